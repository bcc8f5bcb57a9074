"""House style that a checker can hold: no line of Python over 120 characters in the package, the tests and the
benchmarks (the house style's width; lines past it crept in unseen, a caveat's text among them)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("engine", "connectors", "queries", "flashtick_kernels", "tests", "benchmarks")
MAX_LINE = 120


def long_lines(paths: list[Path]) -> list[str]:
    """`path:line: N characters` of each line over MAX_LINE (characters, not bytes: a name in Greek counts as read)."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > MAX_LINE:
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}: "
                             f"{len(line)} characters")
    return found


def python_files() -> list[Path]:
    return sorted(p for folder in CHECKED for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_python_line_is_over_120_characters() -> None:
    files = python_files()
    assert len(files) > 100 and any(p.parts[-2] == "benchmarks" for p in files)  # the folders were found
    assert long_lines(files) == []


def test_the_check_catches_a_long_line(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("x = 1\n" + "y = '" + "é" * (MAX_LINE - 6) + "'\n" + "z = '" + "a" * (MAX_LINE - 5) + "'\n",
                      encoding="utf-8")
    assert long_lines([sample]) == [f"{sample}:3: {MAX_LINE + 1} characters"]
