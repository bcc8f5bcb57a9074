"""The calibration plot: a reliability diagram PNG of predicted probability against observed frequency.

Drawn for a backtest's queries (beside its answers file) and for `flashtick evaluate`'s questions. matplotlib is
an optional extra (`bench`), so it is imported only when a plot is drawn, and its absence is a note, not an error.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from engine.service.backtest_scores import QueryScore
from engine.service.output_paths import write_atomically


def plot_backtest_calibration(out: Path, scores: list[QueryScore]) -> None:
    """The backtest's queries' calibration curves, beside its answers file `out`."""
    curves = {f"{s.query} (n={s.scored})": s.calibration for s in scores if s.calibration}
    plot_calibration(out.with_suffix(".calibration.png"), curves, "flashtick backtest calibration",
                     "flashtick backtest")


def plot_calibration(path: Path, curves: dict[str, list[dict[str, float]]], title: str, who: str) -> bool:
    """A reliability-diagram PNG, when matplotlib is installed (the `bench` extra); False (and a note) without it."""
    if not curves:
        return False
    _usable_config_dir()
    try:  # a Figure on its own Agg canvas: pyplot, its backend and its figures are the caller's (a notebook's
        # inline backend switched to Agg by a library call stopped showing figures: review354 #3)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print(f"{who}: matplotlib is not installed; skipping the calibration plot "
              "(pip install 'flashtick[bench]')", file=sys.stderr)
        return False
    fig = Figure(figsize=(5, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfectly calibrated")
    for label, table in curves.items():
        ax.plot([c["predicted"] for c in table], [c["observed"] for c in table], marker="o", label=label)
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    # through the one writer of every output: a full disk is said naming the image
    write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=100, format=path.suffix[1:].lower()))
    return True


def _usable_config_dir() -> None:
    """MPLCONFIGDIR pointed at a private folder in the system's temp dir when matplotlib's own (under XDG_CONFIG_HOME
    or XDG_CACHE_HOME, else HOME) cannot be written: matplotlib then made a temporary one and said so in a warning of
    several lines on stderr (a container's read-only HOME), where every other line is `flashtick COMMAND: ...`. One
    folder per user, kept: its font cache is built once, not at every run. A choice of the user's (MPLCONFIGDIR set)
    is left alone."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no passwd entry
        home = None
    defaults = [os.environ.get(var) or (home and home / below) for var, below in
                (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"))]
    if all(base and _writable_dir(Path(base) / "matplotlib") for base in defaults):
        return
    private = Path(tempfile.gettempdir()) / f"flashtick-matplotlib-{os.getuid()}"
    if _writable_dir(private) and not private.is_symlink() and private.stat().st_uid == os.getuid():
        os.environ["MPLCONFIGDIR"] = str(private)  # (a folder another user made there is not ours to use)


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK)
