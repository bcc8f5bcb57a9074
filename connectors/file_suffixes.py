"""The suffixes that say which kind of tick file a path is (Parquet, CSV, DBN; JSON lines' own are in
connectors/json_lines.py), and a file's name without one: the stream a file that names none reads into.
"""

from __future__ import annotations

from pathlib import Path

from connectors.json_lines import JSON_LINES_SUFFIXES


PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt")
DBN_SUFFIXES = (".dbn", ".dbn.zst")
# what a charting platform's export adds to the symbol in its file name, left out of the stream: Sierra Chart's
# "Export Intraday/Daily Data to Text File" writes ESZ26-CME.scid_BarData.txt and ESZ26-CME.dly_BarData.txt
EXPORT_SUFFIXES = (".scid_bardata", ".dly_bardata")


def file_stem(path: Path) -> str:
    """The file name without its tick-file suffix (`es.csv.gz` -> `es`) and a platform's export suffix
    (`ESZ26-CME.scid_BarData.txt` -> `ESZ26-CME`): the stream of a map that names none."""
    name = path.name
    suffixes = (*DBN_SUFFIXES, *CSV_SUFFIXES, *PARQUET_SUFFIXES, *JSON_LINES_SUFFIXES)
    suffix = next((x for x in suffixes if name.lower().endswith(x)), "")
    stem = name[: len(name) - len(suffix)] if suffix and len(name) > len(suffix) else path.stem
    export = next((x for x in EXPORT_SUFFIXES if stem.lower().endswith(x)), "")
    return stem[: len(stem) - len(export)] if export and len(stem) > len(export) else stem
