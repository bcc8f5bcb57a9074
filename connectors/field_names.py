"""The names vendors and client code give each tick field (and each side), and what they mean on the wire.

Layout detection reads a file's columns by them (connectors/layout.py), and the wire's checks
(connectors/ticks.py) use them to tell a client that sent `symbol` or `qty` what the field is called.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.quoting import quoted

# Column names vendors use for each field, compared in lower case with spaces and dashes as "_"; the first
# name a file has wins. `ts` and `stream` come first: the wire layout.
FIELD_NAMES: dict[str, tuple[str, ...]] = {
    # ts_recv before ts_event: Databento's files are sorted by it, and its DBN reader (connectors/dbn.py) uses it,
    # so one feed read from CSV or DBN replays the same ticks
    "ts": ("ts", "timestamp", "time", "datetime", "date_time", "ts_recv", "ts_event", "event_time",
           "transact_time", "transaction_time", "trade_time", "exchange_time", "sip_timestamp", "timestamp_utc",
           "time_utc", "gmt_time", "utc_time", "created_time",  # created_time: OKX's trade files
           "create_time_ms",  # Gate.io's trades (ms as decimal text, sub-ms digits after the point; create_time: s)
           "local_time",  # Dukascopy's export in local time: `04.02.2019 09:00:00.071 GMT+0100`, its offset written
           "ts_ns", "timestamp_ns", "time_ns", "ts_us", "timestamp_us", "ts_ms", "timestamp_ms", "time_ms",
           "mts",  # Bitfinex's milliseconds
           "unix",  # CryptoDataDownload's epoch count (ms, s in older files), before its `date` (`2024-03-24 07-AM`)
           # bars (BAR_COLUMNS): stamped at their close where the file says when that is, else at their start
           "close_time", "window_end", "end_time", "window_start", "open_time", "start_time", "date",
           "dates",  # Bloomberg's (BDH exports: `Dates`, often spreadsheet serial dates)
           "quote_datetime",  # Cboe DataShop's option trades
           "time_exchange",  # CoinAPI's flat files (time_exchange;time_coinapi;...)
           "tradetimestamp",  # Barchart OnDemand's ticks (tradeTimestamp, ISO with its offset)
           "trade_date", "business_date",  # a day alone, when no column has a time: settlements (Trade Date,Settle)
           "datanegocio",  # B3's public trades files: DataNegocio, joined to HoraFechamento's clock digits
           # on-chain exports: BigQuery's and archive nodes' block_timestamp, Dune's evt_block_time, block_time
           "block_timestamp", "evt_block_time", "block_time"),
    "stream": ("stream", "symbol", "ticker", "instrument", "sym", "pair", "ric", "contract", "product_id",
               "instrument_name", "instid", "inst_id",  # OKX's API (instId)
               "sym_root",  # TAQ's (SYM_ROOT, with SYM_SUFFIX for share classes)
               "currencypair", "currency_pair", "ccypair", "ccy_pair", "cusip", "isin",  # FX ECNs', bonds'
               "stock",  # Nasdaq ITCH's (Stock)
               # exchanges' codes: JPX's and HKEX's `Code`/`Stock Code`, `Security Code`, `Local Code`, BSE's SC_CODE
               "stock_code", "security_code", "local_code", "sc_code", "ticker_code", "sec_code", "symbol_code",
               "instrument_code", "code",
               "secid", "seccode",  # MOEX ISS's SECID; QUIK's exports' SECCODE
               "codigoinstrumento",  # B3's public trades files (NEGOCIOSAVISTA: CodigoInstrumento)
               "metal",  # LME's trade files (Metal: CAD, AHD, ZDS)
               "cusip_id", "bond_sym_id",  # FINRA TRACE's (Enhanced and academic): a bond's CUSIP, its symbol
               # China's vendors' and exchanges' codes (review433 #14: each file was one stream of every stock):
               # Tushare's ts_code, RiceQuant's order_book_id, Wind's windcode, iFinD's thscode, SSE's and SZSE's
               # Level-2 SecurityID, CTP's InstrumentID (a futures contract)
               "ts_code", "order_book_id", "windcode", "wind_code", "thscode", "securityid", "security_id",
               "instrumentid"),
    "price": ("price", "px", "trade_price", "last_price", "last", "close", "close_price",  # close: a bar's
              "deal", "deal_price",  # FX ECNs' deals (EBS: Deal, DealSize, DealSide beside the quote)
              "ltp", "last_traded_price",  # Indian vendors' (NSE feeds: LTP, the last traded price, beside LTQ)
              "mid_c",  # OANDA's candles as pandas flattens them (mid.o, mid.h, mid.l, mid.c)
              "settle", "settlement", "settle_price", "settlement_price",  # exchanges' daily settlement files
              "tradeprice",  # Barchart OnDemand's ticks (tradePrice)
              "preconegocio",  # B3's public trades files (PrecoNegocio)
              "rptd_pr"),  # FINRA TRACE's reported price (percent of par), beside its yield YLD_PT
    "size": ("size", "qty", "quantity", "volume", "amount", "trade_size", "last_size", "sz",  # sz: OKX's API
             "trade_volume", "trade_qty", "trade_quantity",  # Eurex T7's Trade Volume, Upbit's trade_volume
             "dealsize", "deal_size", "shares",  # shares: Nasdaq ITCH's
             "base_amount",  # CoinAPI's
             # Indian vendors' last traded quantity (not TTQ, the day's total traded quantity: a running sum, which
             # no trade's size is, so it is in no field's names and stays unread)
             "ltq", "last_traded_qty", "last_traded_quantity",
             "tradesize",  # Barchart OnDemand's ticks (tradeSize)
             "last_volume",  # FactSet's tick exports (Last Price, Last Volume beside Bid/Ask Price and Size)
             "quantidadenegociada",  # B3's public trades files (QuantidadeNegociada)
             "lots",  # LME's (Lots: contracts traded; a lot is 25 t of copper, 5 t of nickel: not converted)
             "entrd_vol_qt"),  # FINRA TRACE's par value traded (capped: 1MM+, read by connectors/size_readings.py)
    "side": ("side", "aggressor_side", "taker_side", "buy/sell", "buy_sell",  # buy/sell: Kraken's trade exports
             "direction",  # Deribit's (the taker's buy/sell; LOBSTER's `direction` is read by its own layout)
             "aggressor", "dealside", "deal_side",  # CME's B/S; EBS's
             "buysell",  # MOEX ISS's BUYSELL (B/S, the aggressor's)
             # China's vendors' B/S flags (Wind's and Level-2 files' BSFlag, bs_flag; trade_side), review433 #6
             "bsflag", "bs_flag", "b_s_flag", "trade_side", "trade_direction"),
    # pricebid...: Interactive Brokers' API (HistoricalTickBidAsk: priceBid, priceAsk, sizeBid, sizeAsk)
    "bid": ("bid", "bid_price", "bid_px", "best_bid", "bidprice", "best_bid_price", "bid_px_00", "pricebid",
            "bid_c",  # bid_c, ask_c: OANDA's bid/ask candles' closes
            "bids_0_price",  # Tardis.dev's book_snapshot_5/25 (bids[0].price, ...): the top level
            # a book's first level in Level-1 vendors' files (A-share snapshots' bid_price1..5, CTP's BidPrice1)
            "bid_price1", "bid_price_1", "bidprice1", "bid_px1", "bid1"),
    "ask": ("ask", "ask_price", "ask_px", "best_ask", "askprice", "best_ask_price", "offer", "offer_price",
            "ask_px_00", "priceask", "offerprice", "ask_c",
            "asks_0_price", "ask_price1", "ask_price_1", "askprice1", "ask_px1", "ask1", "offer_price1"),
    "bid_size": ("bid_size", "bid_qty", "bid_sz", "bidsize", "bid_volume", "bidvolume", "bid_amount",
                 "best_bid_qty", "bid_sz_00", "sizebid",
                 # TAQ's NBBO and quote files (BIDSIZ, ASKSIZ: round lots; WRDS's NBBO: BEST_BIDSIZ, BEST_ASKSIZ)
                 "bidsiz", "best_bidsiz", "bids_0_amount",
                 "bsize",  # kdb+tick's quote table (sym.q: time sym bid ask bsize asize), and asize
                 "best_bid_amount",  # Deribit's ticker (best_bid_price, best_bid_amount)
                 "bid_sx",  # CoinAPI's quote flat files (time_exchange;time_coinapi;ask_px;ask_sx;bid_px;bid_sx)
                 "bid_volume1", "bid_volume_1", "bidvolume1", "bid_size1", "bid_qty1"),  # the first level's
    "ask_size": ("ask_size", "ask_qty", "ask_sz", "asksize", "ask_volume", "askvolume", "ask_amount",
                 "best_ask_qty", "offer_size", "ask_sz_00", "sizeask", "offersize",
                 "asksiz", "best_asksiz", "asks_0_amount", "best_ask_amount", "asize", "ask_sx",
                 "ask_volume1", "ask_volume_1", "askvolume1", "ask_size1", "ask_qty1"),
}
# Japanese, Chinese and Korean headers (Japanese brokers' 約定日時,価格,数量 exports, SSE/SZSE vendors' 成交时间,证券代码,
# 成交价,成交量, KRX's 체결시간,종목코드,체결가,체결량), after the English names: a file's first known name still wins
FIELD_NAMES.update({field: FIELD_NAMES[field] + names for field, names in {
    "ts": ("約定日時", "約定時刻", "日時", "時刻", "成交时间", "成交時間", "交易时间", "时间", "時間", "체결시간", "체결시각", "시간"),
    # TWSE's 證券代號 (review433 #11), futures' 合约代码, KRX's 단축코드 (the short code, 005930)
    "stream": ("銘柄コード", "証券コード", "コード", "证券代码", "股票代码", "代码", "證券代碼", "股票代碼", "代碼", "證券代號",
               "股票代號", "代號", "合约代码", "合約代碼", "종목코드", "단축코드"),
    # the trade's side (review433 #6: 买卖方向 and 매수매도 were left unread), their cells SIDE_WORDS' 买/卖, 매수/매도
    "side": ("买卖方向", "買賣方向", "买卖标志", "買賣標誌", "内外盘", "內外盤", "売買区分", "売買", "매수매도", "매도매수",
             "매매구분"),
    "price": ("約定価格", "約定値", "価格", "成交价", "成交價", "成交价格", "价格", "價格", "체결가", "체결가격", "가격"),
    "size": ("約定数量", "数量", "出来高", "成交量", "成交数量", "數量", "체결량", "체결수량", "거래량", "수량"),
}.items()})
# European exchanges' and brokers' headers (Xetra's and German brokers' Zeit;Wertpapier;Kurs;Stück, Euronext's
# Heure;Symbole;Cours;Quantité, Borsa Italiana's Ora;Titolo;Prezzo;Quantità, BME's Hora;Símbolo;Precio;Volumen),
# after the others: a file's first known name still wins. Geld/Brief (German), Achat/Vente (French), Denaro/Lettera
# (Italian) and Compra/Venta (Spanish) head a quote's bid and ask; as side cells they are SIDE_WORDS' buy and sell.
# A futures export's product (Eurex's German `Produkt;Verfall`: FDAX beside its contract month, review373 #2) and
# contract are streams as `product` and `contract` are; the month beside them is a CONTRACT_MONTH_NAMES column
FIELD_NAMES.update({field: FIELD_NAMES[field] + names for field, names in {
    "ts": ("zeit", "uhrzeit", "zeitstempel", "handelszeit", "heure", "horodatage", "ora", "orario", "hora"),
    "stream": ("symbole", "wertpapier", "titolo", "simbolo", "símbolo", "produkt", "produit", "prodotto", "producto",
               "kontrakt", "contrat", "contratto", "contrato"),
    "price": ("kurs", "preis", "prix", "prezzo", "precio", "cours"),
    "size": ("menge", "volumen", "stück", "stueck", "quantité", "quantite", "quantità", "quantita", "cantidad",
             "anzahl"),
    "side": ("richtung", "seite", "sens", "lato", "lado"),
    "bid": ("geld", "geldkurs", "achat", "denaro", "compra"),
    "ask": ("brief", "briefkurs", "vente", "lettera", "venta"),
}.items()})
# A quote's bid and ask (and their sizes, where the language has a clear name for them) in Japanese (JPX's and brokers'
# 最良買気配値/最良売気配値, 買気配数量), Chinese (vendors' 买一价/卖一价, 买一量; CTP's 申买价一/申卖价一, 申买量一),
# Korean (KRX's 매수호가/매도호가, 매수호가잔량), Spanish and Portuguese (Precio Compra/Venta, Preço Compra/Venda, Oferta
# Compra/Venta), Italian (Borsa Italiana's Prezzo Denaro/Lettera, Quantità Denaro/Lettera) and German sizes (Eurex's
# and Xetra's Geldvolumen/Briefvolumen, Geld Menge/Brief Menge beside Geldkurs/Briefkurs), after the others
FIELD_NAMES.update({field: FIELD_NAMES[field] + names for field, names in {
    "bid": ("買気配", "買気配値", "最良買気配", "最良買気配値", "买一价", "买价", "申买价一", "申买价", "買一價", "買價",
            "매수호가", "매수1호가", "최우선매수호가", "precio_compra", "preço_compra", "preco_compra", "oferta_compra",
            "prezzo_denaro"),
    "ask": ("売気配", "売気配値", "最良売気配", "最良売気配値", "卖一价", "卖价", "申卖价一", "申卖价", "賣一價", "賣價",
            "매도호가", "매도1호가", "최우선매도호가", "precio_venta", "preço_venda", "preco_venda", "oferta_venta",
            "prezzo_lettera"),
    "bid_size": ("買気配数量", "最良買気配数量", "买一量", "买量", "申买量一", "申买量", "買一量", "買量", "매수호가잔량",
                 "매수1호가잔량", "매수잔량", "volumen_compra", "cantidad_compra", "quantidade_compra",
                 "quantità_denaro", "quantita_denaro", "geldvolumen", "geld_volumen", "geldmenge", "geld_menge"),
    "ask_size": ("売気配数量", "最良売気配数量", "卖一量", "卖量", "申卖量一", "申卖量", "賣一量", "賣量", "매도호가잔량",
                 "매도1호가잔량", "매도잔량", "volumen_venta", "cantidad_venta", "quantidade_venda",
                 "quantità_lettera", "quantita_lettera", "briefvolumen", "brief_volumen", "briefmenge", "brief_menge"),
}.items()})
# Bloomberg's field mnemonics, as a BDH sheet saved as CSV heads its columns (`Dates,PX_LAST,PX_VOLUME,PX_BID,
# PX_ASK`; LAST_PRICE, VOLUME, BID, ASK are English names above): fix296, review291 #7
FIELD_NAMES.update({field: FIELD_NAMES[field] + names for field, names in {
    "price": ("px_last",), "size": ("px_volume",), "bid": ("px_bid",), "ask": ("px_ask",),
}.items()})

# Power markets' exports, after the others (fix290): EPEX's continuous trades (`TradeId,Side,Product,DeliveryStart,
# ...,ExecutionTime,Price,Volume`: the product, its delivery start joined to it by CONTRACT_MONTH_NAMES) and
# ENTSO-E's prices (`MTU (CET/CEST)`, an interval read as its start, `Day-ahead Price [EUR/MWh]`); a market's
# bidding zone (ENTSO-E's `Area`, `BZN|DE-LU`; Nord Pool's `Delivery Area`) names its prices' stream as the older
# ENTSO-E header's `BZN|DE-LU` does (review441 #9: two zones of one file were one stream)
FIELD_NAMES.update({field: FIELD_NAMES[field] + names for field, names in {
    "ts": ("executiontime", "execution_time", "exec_time", "tradetime", "mtu"),
    "stream": ("product", "area", "delivery_area", "bidding_zone", "bidding_zone_area", "price_area"),
    "price": ("day_ahead_price",),
}.items()})


# Aggressor sides as vendors write them (matched in lower case); a side_map entry wins over these.
SIDE_WORDS: dict[str, str | None] = {"buy": "buy", "b": "buy", "sell": "sell", "s": "sell",
                                     "a": "sell", "n": None, "": None,  # A/N: Databento's, as in dbn.py
                                     "unknown": None,  # Tardis.dev's (and CoinAPI's)
                                     "buy_estimated": "buy", "sell_estimated": "sell",  # CoinAPI's inferred sides
                                     "1": "buy", "+1": "buy", "-1": "sell", "0": None,  # signed sides
                                     "1.0": "buy", "-1.0": "sell", "0.0": None,
                                     # European exports' (German, French, Italian, Spanish)
                                     "kauf": "buy", "verkauf": "sell", "achat": "buy", "vente": "sell",
                                     "acquisto": "buy", "vendita": "sell", "compra": "buy", "venta": "sell",
                                     # Chinese (买入, 外盘: the buyer took the offer), Japanese and Korean exports'
                                     **dict.fromkeys(("买", "买入", "买盘", "外盘", "買", "買入", "買盤", "外盤", "買い",
                                                      "매수"), "buy"),
                                     **dict.fromkeys(("卖", "卖出", "卖盘", "内盘", "賣", "賣出", "賣盤", "內盤", "売",
                                                      "売り", "매도"), "sell"),
                                     **dict.fromkeys(("中性盘", "中性盤"), None)}


@dataclass(frozen=True)
class ExchangeMessage:
    """An exchange's own message, known by the keys it always has (file replay reads such files by them,
    connectors/exchange_shapes.py; the wire's checks say what a client that sent one raw should send)."""

    title: str
    keys: frozenset[str]
    wire: tuple[tuple[str, str], ...]  # (wire field, its key there)
    changes: str  # what else a client sends otherwise than the exchange

    def hint(self) -> str:
        names = ", ".join(field if key == field else f"{field} ({key})" for field, key in self.wire)
        return f"the keys of {self.title}: the wire's are {names}; {self.changes}"


# A venue's capture saved as it came is read by file replay, which sends ticks the wire takes
REPLAY_CAPTURE = ("or save the messages as JSON lines and send them with `flashtick feed replay FILE` "
                  "(docs/replay.md)")

# One table for every hint of an exchange's message (the wire's errors) and for the file layouts read by these keys.
EXCHANGE_MESSAGES: dict[str, ExchangeMessage] = {
    "binance-trade": ExchangeMessage(  # trade and aggTrade events (aggTrade's `a` is its id, not an ask)
        "a Binance trade event", frozenset({"e", "s", "p", "q", "T", "m"}),
        (("stream", "s"), ("ts", "T"), ("price", "p"), ("size", "q"), ("side", "m")),
        "T counts ms: ts is int ns (T x 1,000,000); p and q are text: send numbers; side is 'sell' when m is true "
        "(the buyer was the maker), else 'buy'"),
    "binance-bookticker": ExchangeMessage(
        "a Binance bookTicker", frozenset({"u", "s", "b", "B", "a", "A"}),
        (("stream", "s"), ("bid", "b"), ("ask", "a"), ("bid_size", "B"), ("ask_size", "A")),
        "b, a, B and A are text: send numbers; ts (int ns) is required: T x 1,000,000 where it has T, else the time "
        "you received it"),
    "coinbase-matches": ExchangeMessage(  # Coinbase Exchange's websocket match and last_match (and REST trades)
        "a Coinbase match", frozenset({"type", "product_id", "price", "size", "side", "time"}),
        (("stream", "product_id"), ("ts", "time"), ("price", "price"), ("size", "size"), ("side", "side")),
        "time is ISO 8601 text: ts is int ns; price and size are text: send numbers; its side is the maker's: send "
        'the other ("sell" for "buy")'),
    "coinbase-ticker": ExchangeMessage(
        "a Coinbase ticker", frozenset({"type", "product_id", "best_bid", "best_ask", "time"}),
        (("stream", "product_id"), ("ts", "time"), ("bid", "best_bid"), ("ask", "best_ask"),
         ("bid_size", "best_bid_size"), ("ask_size", "best_ask_size")),
        "time is ISO 8601 text: ts is int ns; prices and sizes are text: send numbers; send the quote alone (its "
        "last trade, price and last_size, is a tick of its own)"),
    # Venues' websocket envelopes, their trades in an array under `data` (review310 #11): file replay reads these
    # captures (connectors/exchange_shapes.py); the wire takes one tick a map
    "deribit-subscription": ExchangeMessage(
        "a Deribit JSON-RPC subscription message (its trades in params.data)",
        frozenset({"jsonrpc", "method", "params"}),
        (("stream", "instrument_name"), ("ts", "timestamp"), ("price", "price"), ("size", "amount"),
         ("side", "direction")), f"send each trade as a tick of its own: timestamp counts ms: ts is int ns (x "
        f"1,000,000); {REPLAY_CAPTURE}"),
    "bybit-topic": ExchangeMessage(
        "a Bybit v5 message (publicTrade's trades in data)", frozenset({"topic", "data"}),
        (("stream", "s"), ("ts", "T"), ("price", "p"), ("size", "v"), ("side", "S")),
        f"send each trade as a tick of its own: T counts ms: ts is int ns (x 1,000,000); p and v are text: send "
        f"numbers; S Buy/Sell as 'buy'/'sell'; a perpetual's stream is s + '_PERP' (BTCUSDT_PERP), spot's s; "
        f"{REPLAY_CAPTURE}"),
    "bitmex-table": ExchangeMessage(
        "a BitMEX message (its trade table's rows in data)", frozenset({"table", "action", "data"}),
        (("stream", "symbol"), ("ts", "timestamp"), ("price", "price"), ("size", "size"), ("side", "side")),
        f"send each trade as a tick of its own: timestamp is ISO 8601 text: ts is int ns; side Buy/Sell as "
        f"'buy'/'sell'; {REPLAY_CAPTURE}"),
    "okx-arg": ExchangeMessage(
        "an OKX message (its trades in data)", frozenset({"arg", "data"}),
        (("stream", "instId"), ("ts", "ts"), ("price", "px"), ("size", "sz"), ("side", "side")),
        f"send each trade as a tick of its own: ts counts ms and is text: ts is int ns (x 1,000,000); px and sz "
        f"are text: send numbers; {REPLAY_CAPTURE}"),
}


def exchange_message(keys: Iterable[object]) -> ExchangeMessage | None:
    """The exchange message whose keys a map has, else None."""
    held = {key for key in keys if isinstance(key, str)}
    return next((message for message in EXCHANGE_MESSAGES.values() if message.keys <= held), None)


CJK_LETTERS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"  # kana, CJK ideographs, Hangul
LATIN_LETTERS = "\u00df-\u00f6\u00f8-\u00ff\u0100-\u017f"  # lower-case accented Latin letters: ß, é, ü, à, ...


def normal_name(name: str) -> str:
    """A column name as FIELD_NAMES spells it: lower case, each run of other characters than letters, digits and
    `/` as one "_", none at the ends (`Bid Price` and `bid-price` -> bid_price; LSEG's `#RIC` -> ric; MetaTrader's
    `<BID>` -> bid). Kana, CJK ideographs, Hangul (`約定日時`) and accented Latin letters (`Stück`, `Quantité`) are
    kept, which no ASCII name has."""
    return re.sub(rf"[^0-9a-z/{LATIN_LETTERS}{CJK_LETTERS}]+", "_", name.strip().lower()).strip("_")


def wire_field_of(name: object) -> str | None:
    """The tick field a map key or column name stands for when it is one of a field's other names (`symbol`:
    `stream`, `qty`: `size`), else None (the wire name itself included)."""
    if not isinstance(name, str):
        return None
    normal = normal_name(name)
    return next((field for field, names in FIELD_NAMES.items() if normal in names and normal != field), None)


# Keys a feed handler sends an exchange's sequence number or trade id under (CME's RptSeq, ITCH's match number,
# a crypto venue's trade id): the wire's field for one is `seq`, so such a tick is refused saying so
SEQUENCE_KEYS = frozenset({"sequence", "seq_num", "seqnum", "seq_no", "seqno", "sequence_number",
                           "seq_number", "msg_seq_num", "msgseqnum", "rpt_seq", "rptseq", "trade_id", "tradeid",
                           "match_id", "match_number", "exec_id", "execution_id", "update_id", "id", "tid"})

SEQUENCE_HINT = ("the wire's field for a sequence number or trade id is `seq` (an int, optional): send it so, and "
                 "the service drops a resend or an A/B line's second copy as a duplicate and counts gaps; see "
                 "Sequence numbers in docs/wire-protocol.md")


def renamed(keys: Iterable[object], field: str | None = None) -> str:
    """For an error about a map with ``keys``: ` (key "symbol" is "stream" on the wire; ...)` for its keys that are
    other names of tick fields (of ``field`` only, when given); for an exchange's own message (a Binance trade
    event) what the wire calls each of its keys, and sends otherwise; for a sequence number's key (`seq`,
    `trade_id`: SEQUENCE_KEYS) that the wire calls it `seq`; else ""."""
    keys = list(keys)
    if (message := exchange_message(keys)) is not None:
        return f" ({message.hint()})"
    hints = [f"key {quoted(str(key), 32)} is {quoted(wire)} on the wire" for key in keys
             if (wire := wire_field_of(key)) is not None and (field is None or wire == field)]
    sequences = [key for key in keys if field is None and isinstance(key, str) and normal_name(key) in SEQUENCE_KEYS]
    if sequences:
        hints.append(f"key {quoted(str(sequences[0]), 32)}{' (and others)' if len(sequences) > 1 else ''}: "
                     f"{SEQUENCE_HINT}")
    return " (" + "; ".join(hints[:4]) + ")" if hints else ""

# Databento's record header (its CSVs and `dbn --json`'s `hd`): beside it, integer prices are fixed-point 1e-9
DATABENTO_HEADER = {"rtype", "publisher_id", "instrument_id"}
