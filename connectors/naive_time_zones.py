"""The zone a file's naive times are read in when its layout was guessed or its header names one, and the notes
that say so: a zone in the time column's header (`Time (JST)`), an offset the format reads, an offset column
beside the times (LSEG's `GMT Offset`), HistData's EST all year, else UTC with the option that says otherwise.
connectors/file_layout.py settles a layout's zone with them."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import TRANSACTION_TIME
from connectors.csv_dialect import Dialect
from connectors.day_folders import numeric_code
from connectors.utc_offsets import UTC_OFFSET
from connectors.field_names import normal_name
from connectors.file_names import HISTDATA_ZONE, NUMERIC_CODE, histdata_frame
from connectors.file_scans import time_sample
from connectors.file_suffixes import file_stem
from connectors.header_zones import header_zone_note, unknown_zone_refusal, zone_after_time
from connectors.histdata_layout import zone_has_dst
from connectors.hours_window import Hours
from connectors.layout import zone_in_header
from connectors.market_zones import EXCHANGE_ZONES, each_exchange_clock, header_language, named_market
from connectors.map_vocabulary import CLOCK_DIGIT_UNITS, DAY_CLOCK_UNITS, EXCEL_DAYS, VALUE_FIELDS
from connectors.us_session import us_session_said
from engine.quoting import quoted


def naive_time_notes(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                      dialect: Dialect | None, first: Callable[..., Any],
                      detected: bool = True) -> tuple[ColumnMap, list[str]]:
    """The one place that tells a map reading naive wall-clock times with no zone given, detected or given in full:
    datetime text or digits a format reads, a datetime column of no time zone (a Parquet's), clock digits
    (`090001418`) of a date's day; how their zone is read: the offset the format reads, for a `detected` layout an
    offset column beside them (LSEG's `GMT Offset`), else UTC, said in a note naming the option that says
    otherwise; spreadsheet serial dates and counts after midnight of a day (`_counted_note`), in the zone read.
    The map with the offset column read, and the notes."""
    if (counted := _counted_note(path, cmap)) is not None:
        return cmap, [counted]
    # Dukascopy's `Gmt time`, LSEG's `Time[G]`: UTC by their names; epoch counts (`%s`) are instants: no zone to say
    utc_named = any(z in cmap.ts.lower() for z in ("utc", "gmt", "[g]"))
    if cmap.tz is not None or cmap.utc_offset is not None or utc_named or "%s" in (cmap.ts_format or ""):
        return cmap, []
    if (text := _naive_sample(path, cmap, schema, names, dialect, first)) is None:
        return cmap, []
    offsets = next((c for c in schema if normal_name(c) in OFFSET_NAMES), None) if detected else None
    if any(code in (cmap.ts_format or "") for code in ("%z", "%Z")):  # `GMT%z`, `%Z`: the format reads it
        return cmap, [f"{path.name}: its times ({quoted(text, 40)}) carry their UTC offset, which the format reads "
                      f"({cmap.ts_format}): read at each row's own offset"]
    if UTC_OFFSET.search(text) or zone_after_time(text) is not None:  # (`... PM ET`: read in its zone)
        return cmap, []
    if offsets is not None:  # LSEG's GMT Offset beside local times
        return replace(cmap, utc_offset=offsets), [
            f"{path.name}: its times ({quoted(text, 40)}) carry no UTC offset and column {quoted(offsets)} gives each "
            "row's (hours): read as wall-clock times at that offset (--tz ZONE reads them in a zone instead)"]
    if (window := Hours.parse(cmap.hours).zone if cmap.hours else None) not in (None, "UTC", "Etc/UTC"):
        # the window names a zone, the times none: kept explicit (no zone is guessed), but never a quiet note
        return cmap, [Caution(f"{path.name}: its times ({quoted(text, 40)}) carry no UTC offset and are read as "
                              f"UTC, while the hours window ({cmap.hours}) is on {window}'s clock: it keeps the "
                              f"rows whose UTC time falls in it there, not those the file stamps in it; if the times "
                              f"are {window} times, give --tz {window}")]
    if us_session := us_session_said(path, cmap, names, dialect):  # a warning: the run goes on in UTC
        return cmap, [Caution(f"{path.name}: its times ({quoted(text, 40)}) carry no UTC offset and are read as UTC"
                              f"{us_session}")]
    return cmap, [f"{path.name}: its times ({quoted(text, 40)}) carry no UTC offset and are read as UTC; if they are "
                  f"local times, give their zone, {_zone_hint(path, cmap, schema, first)}"]


def _counted_note(path: Path, cmap: ColumnMap) -> str | None:
    """What zone a map's spreadsheet serial dates (Bloomberg's `Dates`) or counts after midnight of each row's day
    (`date+ns`, ns_after_midnight) are read in: the map's tz, else UTC, said with the option for local times; None
    for other units (clock digits, `hhmmss_ms`: clock_digits' note says how they were told from a count)."""
    if cmap.ts_unit == EXCEL_DAYS:
        zone = (f"in {cmap.tz} (--tz ZONE says otherwise)" if cmap.tz else
                "in UTC: give --tz ZONE if they are local times (a Bloomberg terminal's are)")
        return (f"{path.name}: column {quoted(cmap.ts)} read as spreadsheet serial dates (days since 1899-12-30, to "
                f"the millisecond; as epoch seconds they would be times on 1970-01-01), {zone}")
    if len(cmap.ts_columns) == 2 and cmap.ts_unit in DAY_CLOCK_UNITS and cmap.ts_unit not in CLOCK_DIGIT_UNITS:
        return (f"{path.name}: column {quoted(cmap.ts_columns[1])} read as {cmap.ts_unit.replace('_', ' ')} of each "
                f"row's day in column {quoted(cmap.ts_columns[0])}, in {cmap.tz or 'UTC'} (--ts-unit "
                "ns_after_midnight, us_after_midnight, ... says otherwise; --tz ZONE if they are local times)")
    return None


def _naive_sample(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                  dialect: Dialect | None, first: Callable[..., Any]) -> str | None:
    """The first time of a map that reads naive wall-clock times, as text; None when it reads none (epoch counts,
    counts after midnight, serial dates, whose notes say their zone; a column that carries its zone)."""
    dtype = schema.get(cmap.ts)
    if cmap.ts_unit in CLOCK_DIGIT_UNITS:  # `20260601 090000668`, KRX's date and HHMMSSfff: a wall clock's
        return str(first(cmap.ts_columns) or "")
    if cmap.ts_unit != "datetime":
        return None
    if isinstance(dtype, pl.Datetime):  # (one with a time zone carries it)
        return None if dtype.time_zone is not None else str(first(cmap.ts) or "")
    if dtype in (pl.String, None) or cmap.ts_format and dtype.is_integer():
        # (a file whose later times carry offsets reads at them, its naive rows rejected: no "read as UTC" note;
        # digits a format reads, MetaStock's 202401021700, are as naive as text)
        return str((first(cmap.ts_columns) if cmap.ts_format else time_sample(path, names, dialect, cmap.ts_columns))
                   or "")
    return None


def _zone_hint(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], first: Callable[..., Any]) -> str:
    """The --tz a note on naive times read as UTC suggests: HistData's EST by its file's name, Korea time for
    Bithumb's transaction history, the zone of the exchange a stock code's suffix names (`7203.T`, `005930.KS`,
    in the file's name or its first stream), the market a stream's name points at (`RELIANCE.NS`, `NK225M2406`:
    connectors/market_zones.py), those the script of the header can mean (`시간`: Seoul), the clock of a European
    header's language (`Uhrzeit`: Berlin's), those a bare code's shape can mean (`005930`: Seoul or Shanghai), else
    none."""
    if histdata_frame(path) is not None:
        return "--tz Etc/GMT+5 (HistData's files are in EST all year, no summer time)"
    if normal_name(cmap.ts) == TRANSACTION_TIME:
        return "--tz Asia/Seoul (Bithumb's transaction history writes Korea time)"
    streams = (file_stem(path), cmap.stream or (first(cmap.stream_columns) if cmap.stream_col else None) or "")
    for found in (m for name in streams for m in NUMERIC_CODE.finditer(str(name))):
        if (zone := EXCHANGE_ZONES.get(found["after"] or found["before"])) is not None:
            return f"e.g. --tz {zone} (the zone of {found[0].strip()}'s exchange)"
    if (named := named_market(str(name) for name in streams)) is not None:  # `RELIANCE.NS`, `NK225M2406`
        name, market = named
        # one stream's exchange is not the file's clock where each RIC is stamped on its own (review440 #8 rest)
        each_clock = "; LSEG's [L] is each RIC's exchange's clock, not one zone for the file: a warning below names " \
            "each stream's exchange's zone that is off UTC" if each_exchange_clock(cmap.ts) else ""
        return f"e.g. --tz {market.zone} (the zone of {name}'s exchange, {market.market}{each_clock})"
    # a header in Hangul, Kana or Chinese characters says more of where a file was written than a bare code's
    # shape (6 digits: Seoul or Shanghai); New York's example would have sent it 13 to 14 h off
    for where, names in (("its header", [str(name) for name in schema]), ("its name", [file_stem(path)])):
        if script := _header_script_zones(names):  # (`トヨタ自動車_20240405.csv`: Japan's too)
            zones, name, writers = script
            return f"{' or '.join(f'--tz {z}' for z in zones)} (a guess from the script of {where}, {name}: {writers})"
    if (language := header_language(schema)) is not None:  # `Datum;Uhrzeit;Kurs`: a European exchange's clock
        zone, said, column = language
        return f"e.g. --tz {zone} (a guess from its {said} header, {column})"
    # a bare code (`005930.csv`, stream `7203`) names no exchange, but its shape narrows it to Asia's
    for code in (name for name in streams if isinstance(name, str) and numeric_code(name)):
        if shape := _code_shape_zones(code):
            zones, writers = shape
            return (f"{' or '.join(f'--tz {z}' for z in zones)} (a guess from the shape of {code}: {len(code)} "
                    f"digits, like the stock codes of {writers})")
    # nothing in the file names its market: no zone is guessed (New York's example sent India's 9.5 h off)
    return "--tz ZONE (the IANA zone of their exchange: nothing in the file names its market)"


def _header_script_zones(names: Sequence[str]) -> tuple[tuple[str, ...], str, str] | None:
    """The zones the script of a header's names can mean, the name that shows it and what it is: Hangul Korea's;
    Kana, or a form of a Chinese character only Japanese writes (`価`, `値`), Japan's; a simplified form (`价`,
    `时`) mainland China's; a traditional form only (`價`, `賣`) Hong Kong's or Taiwan's; other Chinese characters
    (`成交量`) any of theirs. None for a header of none of these."""
    for script, zones, writers in _SCRIPTS:
        if name := next((n for n in names if script.search(n)), None):
            return zones, name, writers
    return None


_SCRIPTS = [  # (the characters, the zones, what they are), the narrowest first
    (re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]"), ("Asia/Seoul",), "Hangul, as Korea writes"),
    (re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f\u4fa1\u5024\u58f2\u6c17\u5186]"), ("Asia/Tokyo",),
     "Kana or a Japanese form of a Chinese character, as Japan writes"),
    (re.compile("[\u65f6\u95f4\u4ef7\u4e70\u5356\u989d\u5f00\u76d8\u7b14\u5355\u6da8\u8dcc]"),
     ("Asia/Shanghai",), "simplified Chinese characters, as mainland China writes"),
    (re.compile("[\u50f9\u8ce3\u6f32\u55ae]"), ("Asia/Hong_Kong", "Asia/Taipei"),
     "traditional Chinese characters, as Hong Kong and Taiwan write"),
    # (`成交量`, `日期` are written alike in all four)
    (re.compile("[\u3400-\u4dbf\u4e00-\u9fff]"), ("Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei", "Asia/Tokyo"),
     "Chinese characters, as China, Hong Kong, Taiwan and Japan write")]


def _code_shape_zones(code: str) -> tuple[tuple[str, ...], str] | None:
    """The zones of the exchanges that write their stock codes in a bare code's shape, and who they are: Korea's
    and mainland China's 6 digits, Hong Kong's 5 (and its 4 with a leading zero, `0700`), Tokyo's and Taiwan's 4;
    None for 3."""
    if len(code) == 6:
        return ("Asia/Seoul", "Asia/Shanghai"), "KRX and the Shanghai and Shenzhen exchanges"
    if len(code) == 5 or len(code) == 4 and code.startswith("0"):
        return ("Asia/Hong_Kong",), "the Hong Kong exchange"
    return (("Asia/Tokyo", "Asia/Taipei"), "the Tokyo and Taiwan exchanges") if len(code) == 4 else None


def zone_of_header(path: Path, cmap: ColumnMap, schema: Mapping[str, Any],
                    first: Callable[..., Any]) -> tuple[ColumnMap, list[str]]:
    """A map whose time column's header names the zone of its naive times (`Time (JST)`, `Time[UTC+9]`): read in
    that zone unless the map's tz (--tz) says another, with a note that says which; a zone none known here
    (`Time (IST)`) with no tz is refused, as reading it as UTC would put every time off."""
    if (zoned := zone_in_header(cmap.ts, cmap.ts_unit, schema.get(cmap.ts), first)) is None:
        return cmap, []
    column, zone = zoned
    if not zone.known and cmap.tz is None:
        given = [f"ts={cmap.ts}", *([f"stream={cmap.stream_col}"] if cmap.stream_col else []),
                 *(f"{f}={getattr(cmap, f)}" for f in VALUE_FIELDS if getattr(cmap, f) is not None)]
        raise ValueError(unknown_zone_refusal(str(path), column, zone, ",".join(given)))
    cmap = cmap if cmap.tz is not None or zone.zone is None else replace(cmap, tz=zone.zone)
    return cmap, [header_zone_note(path.name, column, zone, cmap.tz)]


def histdata_zone(path: Path, guessed: ColumnMap, cmap: ColumnMap) -> list[str]:
    """A HistData file's zone: EST all year, unless --tz says otherwise; a caution when the zone given
    changes its clocks for summer time, which HistData's times never do."""
    if guessed.tz != HISTDATA_ZONE or cmap.tz is None:
        return []
    if cmap.tz == HISTDATA_ZONE:
        return [f"{path.name}: its times read in {HISTDATA_ZONE} (EST all year, no summer time), the zone HistData "
                f"writes them in (--tz says otherwise)"]
    if not zone_has_dst(cmap.tz):
        return []
    return [Caution(f"{path.name}: --tz {cmap.tz} changes its clocks for summer time, but HistData writes its times "
                    f"in EST all year: its summer times are read an hour off (--tz {HISTDATA_ZONE}, or no --tz, "
                    f"reads them as written)")]


OFFSET_NAMES = ("gmt_offset", "utc_offset")  # a column of each row's UTC offset in hours (LSEG's `GMT Offset`)
