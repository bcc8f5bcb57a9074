"""review262 #5: a step back just under a second was said as `1e+03 ms` in the "rows not in time order" note:
the unit of a duration in a note is chosen by its rounded count (connectors/durations.duration_text)."""

from __future__ import annotations

from pathlib import Path

from connectors.durations import duration_text
from connectors.replay import FileReplay


def test_a_step_back_just_under_a_second_reads_one_second(tmp_path: Path) -> None:
    # (the review's file, a day earlier: on 2016-12-31 that step back is the leap second's, said as such)
    (tmp_path / "back999.csv").write_text("ts,symbol,price,size\n1483142399999999999,S,1,1\n"
                                          "1483142399000000000,S,2,1\n1483142400000000000,S,3,1\n")
    with FileReplay(tmp_path / "back999.csv") as replay:
        said = [note for note in replay.notes if "not in time order" in note]
    assert len(said) == 1 and "by up to 1 s (" in said[0], said


def test_durations_read_in_the_unit_their_rounded_count_fits() -> None:
    shown = {999_999_999: "1 s", 999_500_000: "1 s", 999_499_999: "999 ms", 999_999.6: "1 ms", 999.6: "1 us",
             4e9: "4 s", 6.2e9: "6.2 s", 500e6: "500 ms", 1_000: "1 us", 0: "0 ns", 90e9: "90 s",
             1_500 * 86_400e9: "1500 days", -2e6: "-2 ms"}
    assert {ns: duration_text(ns) for ns in shown} == shown
