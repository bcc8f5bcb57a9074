"""Names and values in file readers' notes and refusals are quoted as JSON writes them (engine/quoting.py,
review344 #1): a column named with a quote and a non-ASCII letter, and a value holding a no-break space, read back
whole with a JSON parser, where Python's repr wrote `'bald\\xa0morgen'` (no JSON)."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain
from engine.quoting import quoted

JSON_TEXT = r'"(?:[^"\\]|\\.)*"'


def test_a_refusal_names_a_column_and_its_value_so_a_json_parser_reads_them_back(tmp_path: Path) -> None:
    column = "Zeit d'Börse"
    path = tmp_path / "kurse.csv"
    path.write_text(f"{column},px,qty\nbald\u00a0morgen,1.5,2\nspäter,1.6,3\n")
    spec = tmp_path / "map.yaml"
    spec.write_text(f"ts: {json.dumps(column)}\nprice: px\nsize: qty\n")
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(path, columns=map_from_options(columns=str(spec))))
    said = str(refused.value)
    found = re.search(rf"column ({JSON_TEXT}) holds ({JSON_TEXT})", said)
    assert found, said
    assert json.loads(found[1]) == column and json.loads(found[2]) == "bald\u00a0morgen", said
    assert "'" + column not in said  # no Python repr of it


def test_values_a_file_gives_are_quoted_as_json_writes_them() -> None:
    """A numpy scalar (a column's value), a path and a date were `<int64>`, `<PosixPath>`, `<date>`."""
    assert quoted(np.int64(5)) == "5" and quoted(np.float64(0.25)) == "0.25" and quoted(np.str_("AAPL")) == '"AAPL"'
    assert quoted(Path("Börse Frankfurt/a.csv")) == '"Börse Frankfurt/a.csv"'
    assert quoted(date(2024, 3, 1)) == '"2024-03-01"'
    assert json.loads(quoted(['a"b', "ü"])) == ['a"b', "ü"]
