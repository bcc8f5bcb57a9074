"""Column names that say what a column holds beyond the tick fields' own (those are FIELD_NAMES, in
connectors/field_names.py): the parts of a contract (an option's root, strike and right, a future's month, a share
class's suffix), a column that says which kind of row each is (and the marks of its trade and quote rows), a
buyer-maker flag, a date or a time of day read as one time, a bar's open, high, low and close, a settlement price, a
yield. Layout detection reads a
file's columns by them; content notes and planning use them to say what a file's values show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from connectors.field_names import FIELD_NAMES, normal_name


# A file of bars (OHLC, OHLCV): it has these besides its close. Each bar replays as one trade at its close.
BAR_COLUMNS = frozenset({"open", "high", "low"})
BAR_CLOSES = {"close": BAR_COLUMNS, "close_price": BAR_COLUMNS,  # a close column -> the columns that make it a bar's
              "last": BAR_COLUMNS, "last_price": BAR_COLUMNS,  # Sierra Chart's and Barchart's close: `Last`
              "c": frozenset({"o", "h", "l"}),  # Polygon's aggregates' short keys (connectors/bar_documents.py)
              **{f"{p}_c": frozenset({f"{p}_o", f"{p}_h", f"{p}_l"}) for p in ("mid", "bid", "ask")}}  # OANDA's


def bar_close(column: str, columns: set[str]) -> bool:
    """Whether `column` is a bar's close beside its open, high and low (a file's columns, as normal names)."""
    bar = BAR_CLOSES.get(normal_name(column))  # None: no close (an Excel CSV's trailing empty column is no bar)
    return bar is not None and bar <= columns


def holds_bars(columns: set[str]) -> bool:
    """Whether a file's columns (normal names) hold a bar: a close beside its open, high and low."""
    return any(bar_close(column, columns) for column in columns)


def bar_values(columns: set[str]) -> set[str]:
    """The columns (normal names) that are a bar's open, high, low or close, of a file's columns that hold bars."""
    return {value for close, bar in BAR_CLOSES.items() if bar_close(close, columns) for value in (close, *bar)}


# An option contract's columns: one stream per contract, `SPY 2024-01-19 470 C` (the root before the underlying: SPXW
# and SPX options on one underlying are other contracts)
OPTION_ROOT_NAMES = ("root", "option_root", "underlying", "underlying_symbol", "underlying_ticker", "underlying_sym")
STRIKE_NAMES = ("strike", "strike_price")
RIGHT_NAMES = ("right", "put_call", "call_put", "putcall", "callput", "option_type", "cp_flag", "cp")
# A futures product's root (CME's `Product`, ICE's `Commodity`), the root of a contract column beside it when no
# stream column is (connectors/contract_column.py); and a power product, whose name says its delivery period's length
PRODUCT_NAMES = ("product", "product_code", "commodity", "produkt", "produit", "prodotto", "producto")


def with_product(names: Iterable[str], column: str) -> str:
    """A stream of ``column`` for a map's `stream=` key, joined to a product column among a file's ``names`` (ICE's
    `Commodity+Contract Month`): advised alone, Brent's Jan25 and WTI's would meet in one stream (review441 #5)."""
    product = next((n for n in names if normal_name(n) in PRODUCT_NAMES and n != column), None)
    return f"{product}+{column}" if product else column


# A power product's delivery period (EPEX's continuous trades: Product, DeliveryStart; Nord Pool's `Delivery Start
# (CET)`, `Delivery End (CET)`): each quarter-hour or hour delivered is an instrument of its own, as each month is
DELIVERY_START_NAMES = ("deliverystart", "delivery_start", "delivery_start_time")
# its end, part of the stream where no product names the period's length (an hour and its first quarter-hour start
# together: connectors/layout.py)
DELIVERY_END_NAMES = ("deliveryend", "delivery_end", "delivery_end_time")
# A contract's month beside its symbol (`Symbol=CL, Contract Month=202406`): the stream is both
CONTRACT_MONTH_NAMES = ("contract_month", "delivery_month", "expiry", "expiration", "expiration_date", "maturity",
                        "maturity_date", "month_code",
                        # German, French, Italian, Spanish and Dutch futures exports' (Eurex's `Produkt;Verfall`,
                        # `03.2025`: review373 #2)
                        "verfall", "verfallmonat", "verfallsmonat", "verfalltag", "verfallsdatum", "verfalldatum",
                        "fälligkeit", "faelligkeit", "liefermonat", "kontraktmonat", "échéance", "echeance",
                        "mois_d_échéance", "mois_d_echeance", "scadenza", "mese_di_scadenza", "vencimiento",
                        "mes_de_vencimiento", "vervaldatum", "vervalmaand", "expiratie", "expiratiemaand",
                        *DELIVERY_START_NAMES)
# A bare `Month` beside a product (`Product` ES, `Month` 202403 then 202406): a contract month when its values read as
# one (YYYYMM, not each row's own month: connectors/contract_column.py), as CONTRACT_MONTH_NAMES are by their names
MONTH_NAMES = ("month",)
# A share class's suffix beside its root (WRDS TAQ's SYM_ROOT=BRK, SYM_SUFFIX=B): the stream is both, joined by a
# `.` as the class is conventionally written (BRK.B, as Polygon's tickers have it); an empty suffix adds nothing
SHARE_CLASS_NAMES = ("sym_suffix",)
# An LME prompt beside its metal (`Metal` CAD, `Prompt` 3M / Cash): the stream is both, joined by a `.` (CAD.3M) as
# a share class is, when a file mixes prompts (connectors/lme_prompts.py): 3M and Cash are two contracts' series
PROMPT_NAMES = ("prompt",)
# A column that says which kind of row each is (`event` X / B / A), by its normal name (field_names.normal_name:
# `Event Type` is event_type, camel case `EventType` is eventtype, so both spellings are here): only its trade rows
# are trades. This vocabulary and the marks below feed every file's detection (content_notes.py, row_exprs.py), not
# one vendor's: a word added for one vendor is read in every file that has it (docs/extending.md)
EVENT_NAMES = ("type", "event", "event_type", "eventtype", "msg_type", "msgtype", "message_type", "messagetype",
               "record_type", "recordtype", "tick_type", "ticktype", "update_type", "updatetype", "entry_type",
               "entrytype", "md_entry_type", "mdentrytype", "row_type", "rowtype")
# Algoseek's TAQ marks trades TRADE and TRADE NB, both trades
TRADE_MARKS = frozenset({"t", "x", "trade", "trades", "e", "exec", "execution", "fill", "last", "trade nb"})
QUOTE_MARKS = frozenset({"q", "b", "a", "bid", "ask", "offer", "quote", "quotes", "bbo", "nbbo"})
# Rows that are one side of a quote, their price in the one price column (Bloomberg's tick dump `time,type,value,
# size`: BID, ASK, BEST_BID, BEST_ASK; Algoseek's TAQ: QUOTE BID / QUOTE ASK, a venue's quote, and QUOTE BID NB /
# QUOTE ASK NB, the national best): read by the map's quote_sides, each field from the row its mark names
BID_ROWS = frozenset({"bid", "best_bid", "quote bid", "quote bid nb"})
ASK_ROWS = frozenset({"ask", "best_ask", "offer", "best_offer", "quote ask", "quote ask nb"})
QUOTE_SIDE_MARKS = TRADE_MARKS | BID_ROWS | ASK_ROWS  # every mark quote_sides reads (lower case)
# Sides, via BUYER_MAKER (true = the taker sold): a buyer-maker flag, or a flag that the taker sold (Kaiko's `sell`)
BUYER_MAKER_NAMES = ("is_buyer_maker", "isbuyermaker", "buyer_maker", "buyer_is_maker", "sell", "taker_side_sell",
                     "is_sell")
# Sides, via ASK_BID (ASK = the taker sold), when the column holds ask/bid: Upbit's `ask_bid` (the taker's order side)
ASK_BID_NAMES = ("ask_bid",)
# `market` names the instrument in some vendors' records (Upbit's `KRW-BTC`), a venue (NASDAQ) or an order type
# (market/limit) in others: read as the stream only when its first value is a pair of two coins or currencies
MARKET_NAMES = ("market",)
PAIR_VALUE = re.compile(r"^[A-Z][A-Z0-9]{1,9}[-/_][A-Z][A-Z0-9]{1,9}$")
# A bar's volume in each asset of its pair (CryptoDataDownload's `Volume BTC`, `Volume USDT`): the size is the
# base asset's, the first of the pair's symbol (BTC/USDT), else the one whose asset is no quote currency
BASE_VOLUME = re.compile(r"^volume_([a-z0-9]{2,10})$")
QUOTE_ASSETS = frozenset({"usd", "usdt", "usdc", "busd", "fdusd", "tusd", "dai", "eur", "gbp", "jpy", "krw", "try"})
# Sides, via MAKER_ROLE (buyer = the taker sold), when the column holds buyer/seller or b/s (content_notes.maker_sides)
MAKER_NAMES = ("maker", "maker_side")
# a date column beside a time-of-day column: read as one datetime (LSEG's legacy Date[G]/Time[G]: GMT, [L]: local)
DATE_NAMES = ("date", "trade_date", "day", "date_g", "date_l",
              "tradedate",  # MOEX ISS's TRADEDATE, beside TRADETIME
              "datanegocio",  # B3's public trades files' DataNegocio, beside HoraFechamento
              "trd_exctn_dt")  # FINRA TRACE's execution date, beside TRD_EXCTN_TM (not the report's, TRD_RPT_DT)
# Bithumb's transaction history (transaction_date, type, units_traded, price, total): its time, read only when it
# holds date-times (a bare `transaction_date` is an account statement's day, no tick's time), and its trade's size
# beside that time alone (Bithumb's ticker's `units_traded` is a running total since midnight, no trade's size)
TRANSACTION_TIME = "transaction_date"
TRANSACTION_UNITS = "units_traded"
# a mid price with neither trades nor bid and ask beside it (FX and rates feeds): read as a price series
MID_NAMES = ("mid", "mid_price", "midprice", "midpoint", "mid_point", "mid_px", "mid_rate", "midrate")
SETTLEMENT_NAMES = frozenset({"settle", "settlement", "settle_price", "settlement_price"})  # FIELD_NAMES' price
# A prediction market's contract prices (Kalshi's trades and snapshots: yes_price / no_price in cents, 1-99;
# Polymarket's outcome tokens: 0.01-0.99): a contract priced as a probability, which settles at 0 or at the top
PREDICTION_MARKET_NAMES = frozenset({"yes_price", "no_price", "yes_bid", "yes_ask", "no_bid", "no_ask",
                                     "yes_price_dollars", "no_price_dollars", "outcome", "outcome_index"})
PREDICTION_SIDES = frozenset({"yes", "no"})  # a side_map of {yes: buy, no: sell}: the map's own word for it
TIME_OF_DAY_NAMES = ("time", "time_m", "trade_time", "time_of_day", "timestamp", "time_g", "time_l",
                     "tradetime", "horafechamento", "trd_exctn_tm")
# Japanese, Chinese and Korean exports' date beside time (日付,時刻 / 日期,时间 / 일자,시간): review260
DATE_NAMES += ("日付", "約定日", "日期", "交易日期", "成交日期", "일자", "날짜", "체결일자")
TIME_OF_DAY_NAMES += ("時刻", "約定時刻", "時間", "时间", "成交时间", "交易时间", "시간", "체결시간")
# German, French, Italian and Spanish exports' (Datum;Zeit, Date;Heure, Data;Ora, Fecha;Hora): fix274
DATE_NAMES += ("datum", "handelsdatum", "handelstag", "data", "fecha")
TIME_OF_DAY_NAMES += ("zeit", "uhrzeit", "handelszeit", "heure", "ora", "orario", "hora")
TIME_HEADERS = frozenset(FIELD_NAMES["ts"] + DATE_NAMES + TIME_OF_DAY_NAMES)  # names of a time or a date column

# a price, bid or ask column named as a yield (cash Treasuries' `bid_yield`, `yld`, `YTM`): its up is a price's down
YIELD_NAMES = re.compile(r"(^|_)(yield|yld|ytm)(_|$)")


def names_a_yield(column: str) -> bool:
    """Whether a column's name says it holds yields: `bid_yield`, `YLD_BID`, `Bid Yield`, `BidYield` (camel case
    split into words first, so `BidYield` is bid_yield, not one word)."""
    return bool(YIELD_NAMES.search(normal_name(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", column))))
