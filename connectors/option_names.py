"""What a stream's name says of its instrument: an option (every venue's way of naming one, OSI's included) or a
derivative already marked as one. Plain regular expressions, no polars: the wire's checks (shifted_prices, through
the clients' import of connectors.feed) and the answer caveats use them as the file readers do
(derivative_streams)."""

from __future__ import annotations

import re

# An option's symbol as OCC (OSI: the root padded to six, `AAPL  261218C00150000`), OPRA, Cboe, Polygon
# (`O:AAPL261218C00150000`) and most US vendors write it: root, expiry YYMMDD, right, strike x 1000 in 8 digits
OSI_OPTION = r"^(O:)?[A-Z][A-Z0-9.]{0,5} *\d{6}[CP]\d{8}$"
# An option's name, every venue's way (Deribit's BTC-27DEC24-60000-C, Binance's, OKX's; OSI's): `is_option_name`
OPTION_NAME = re.compile(rf"(?i)[-_][CP]$|{OSI_OPTION}")
# A name that already says it is a derivative: a perpetual's or swap's word, a delivery date (YYMMDD, Deribit's
# 29MAR24, a month code and year: BTCUSDH24, BitMEX's XBTZ25), an option's right, Kraken Futures' prefix, BitMEX's
# up and down contracts (XBT7D_U110, XBT7D_D95: binary contracts that settle after 7 days, named by their term and
# strike, not their date: kept, never a perpetual's name). No look-arounds, so the one pattern serves Python's re
# and polars' (Rust) regex alike.
MARKED = (r"(?i)(PERP|SWAP|FUTURE|[-_]\d{6}$|-\d{1,2}(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)\d\d|"
          r"[-_][CP]$|^[A-Z0-9]{3,}[FGHJKMNQUVXZ]\d\d$|^(PF|PI|FI|FF|PV)_|^[A-Z]{3,}\d{1,2}[DHW]_[UD]\d+$|"
          rf"{OSI_OPTION})")


def is_option_name(stream: str) -> bool:
    """Whether a stream's name says it is an option: the one rule for the spot-trained model's caveat, the
    two-instruments price caution and the zero-bid advice (review355 #10: OSI's names were none of them)."""
    return bool(OPTION_NAME.search(stream.strip()))
