"""The documentation stays true: every CLI example parses, every module and link it names exists.

Shell examples are the lines in ```sh / ```bash / ```console fences of README.md
and docs/*.md. In a console fence only lines with a `$ ` prompt are commands
(the rest is output). A `flashtick ...` command must parse with the real
parser (argparse exits on bad arguments); a `python -m MODULE` must name a
module that exists. Files an example names need not exist.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import re
import shlex
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import zmq

from connectors.feed import FeedClient
from engine.service.cli import build_parser
from engine.service.config import LimitsSection

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python -m benchmarks.x` runs from the repository root
    sys.path.insert(0, str(ROOT))

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
USER_DOCS = [README, *DOCS]
ALL_DOCS = [*USER_DOCS, ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "RESULTS_PEERS.md"]
README_MAX_LINES = 250

FENCE = re.compile(r"^(`{3,})\s*([\w-]*)\s*$")
SHELL_LANGS = {"sh", "bash", "shell", "console"}
OPERATORS = {"&&", "||", "|", ";", "&", "(", ")", "<", ">", ">>", "<<", "<<<", "2>", "&>"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
OUTSIDE_REFS = re.compile(r"\.\./shared|(?<!\w)PEERS\.md|README_REPLAY")


class Command(NamedTuple):
    file: Path
    line: int
    argv: list[str]

    def __str__(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}: {shlex.join(self.argv)}"


def shell_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, command text) for every command line in a shell fence of `path`."""
    out, fence, lang, heredoc = [], None, "", None
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        match = FENCE.match(raw.strip())
        if fence is None:
            if match:
                fence, lang = match.group(1), match.group(2).lower()
            continue
        if match and match.group(1) == fence and not match.group(2):
            fence, heredoc = None, None
            continue
        if lang not in SHELL_LANGS:
            continue
        line = raw.strip()
        if heredoc is not None:  # the body of a here-document is data, not commands
            if line == heredoc:
                heredoc = None
            continue
        if lang == "console":
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        if line:
            out.append((number, line))
            if (here := re.search(r"<<-?\s*'?\"?(\w+)", line)) is not None:
                heredoc = here.group(1)
    return out


def segments(line: str) -> list[list[str]]:
    """The simple commands of one shell line, comments dropped, split at operators."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    parts: list[list[str]] = [[]]
    for token in lexer:
        if token in OPERATORS or set(token) <= set("&|;()<>"):
            parts.append([])
        else:
            parts[-1].append(token)
    return [p for p in parts if p]


def commands(paths: list[Path]) -> list[Command]:
    return [Command(path, number, argv) for path in paths for number, line in shell_lines(path)
            for argv in segments(line)]


def flashtick_argv(argv: list[str]) -> list[str] | None:
    """The CLI arguments if this command runs flashtick (directly or as `python -m engine.service.cli`)."""
    if argv[0] == "flashtick":
        return argv[1:]
    module = python_module(argv)
    return argv[argv.index("-m") + 2:] if module == "engine.service.cli" else None


def python_module(argv: list[str]) -> str | None:
    """MODULE of `[env VAR=..] [nice ..] [timeout ..] .../python[3] -m MODULE ...`, else None."""
    for i, token in enumerate(argv[:-2]):
        if re.fullmatch(r"python(3(\.\d+)?)?", Path(token).name) and argv[i + 1] == "-m":
            return argv[i + 2]
    return None


def relative_links(path: Path) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for target in LINK.findall(line):
            if not re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # skip http:, mailto:, in-page anchors
                out.append((number, target))
    return out


def strict(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser and its subparsers without prefix matching: `--rat` must not pass for `--rate` in the docs."""
    parser.allow_abbrev = False
    for action in parser._actions:  # argparse keeps subparsers here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                strict(sub)
    return parser


def parses(argv: list[str]) -> str | None:
    """None if the real parser accepts argv, else the error it printed."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            strict(build_parser()).parse_args(argv)
    except SystemExit as e:
        if e.code == 0:  # --help
            return None
        return err.getvalue().strip().splitlines()[0] if err.getvalue().strip() else f"exit status {e.code}"
    return None


# -- the checks ----------------------------------------------------------------------------------

CLI_EXAMPLES = [c for c in commands(USER_DOCS) if flashtick_argv(c.argv) is not None]
MODULE_EXAMPLES = [c for c in commands(USER_DOCS) if python_module(c.argv) is not None]


def test_the_docs_have_cli_examples_to_check() -> None:
    assert len(CLI_EXAMPLES) >= 10, [str(c) for c in CLI_EXAMPLES]
    assert {"serve", "feed", "subscribe", "register", "unregister", "list", "get", "ask", "stats", "health", "keygen",
            "backtest", "demo"} <= {
        flashtick_argv(c.argv)[0] for c in CLI_EXAMPLES if flashtick_argv(c.argv)}


@pytest.mark.parametrize("example", CLI_EXAMPLES, ids=str)
def test_cli_example_parses(example: Command) -> None:
    problem = parses(flashtick_argv(example.argv))
    assert problem is None, f"{example}: {problem}"


@pytest.mark.parametrize("example", MODULE_EXAMPLES, ids=str)
def test_python_module_exists(example: Command) -> None:
    module = python_module(example.argv)
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        found = False
    assert found, f"{example}: no module {module!r}"


@pytest.mark.parametrize("path", ALL_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_into_the_repository(path: Path) -> None:
    broken = []
    for number, target in relative_links(path):
        resolved = (path.parent / target.split("#", 1)[0]).resolve()
        if not resolved.exists() or not resolved.is_relative_to(ROOT):
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not broken, broken


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation but `-` and `_` dropped, spaces
    as `-`, a repeated one numbered (`-1`, `-2`); headings inside code fences are none."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not (heading := re.match(r"#{1,6} +(.+?) *#* *$", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


@pytest.mark.parametrize("path", ALL_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_to_a_heading_name_one_that_exists(path: Path) -> None:
    """A link to `file.md#anchor` lands on that heading, not at the top of the page (a bullet point's bold words
    make no anchor)."""
    broken = []
    for number, target in relative_links(path):
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if anchor and linked.suffix == ".md" and linked.exists() and anchor not in heading_anchors(linked):
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not broken, broken


@pytest.mark.parametrize("path", ALL_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_or_files_outside_the_repository(path: Path) -> None:
    bad = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
           for n, line in enumerate(path.read_text().splitlines(), start=1)
           if ISSUE_NUMBER.search(line) or OUTSIDE_REFS.search(line)]
    assert not bad, bad


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_the_readme_links_every_doc() -> None:
    linked = {(README.parent / target.split("#", 1)[0]).resolve() for _, target in relative_links(README)}
    assert not [d.name for d in DOCS if d.resolve() not in linked]


def test_the_systemd_unit_names_the_statuses_it_does_not_restart_on() -> None:
    """Review392 #7: the unit's comment said 6 for a data directory full at the start (6 is a batch command's "no
    data yet"); `serve` exits 7, the status RestartPreventExitStatus lists beside 2."""
    from engine.service.exit_codes import DATA_DIR_FULL, USAGE

    unit = (ROOT / "docs" / "deployment.md").read_text()
    assert f"RestartPreventExitStatus={USAGE} {DATA_DIR_FULL}\n" in unit
    assert f"# {USAGE}: config or data directory refused; {DATA_DIR_FULL}: data directory full at the start." in unit


def test_the_back_pressure_section_states_the_sockets_defaults() -> None:
    """wire-protocol.md's back-pressure numbers are the code's and ZeroMQ's: the ingest socket's 32 messages a
    connection, a raw PUSH socket's own SNDHWM and LINGER (which decide when its send blocks and what it loses at
    close), and FeedClient's."""
    section = (ROOT / "docs" / "wire-protocol.md").read_text().split("### Back-pressure on ingest", 1)[1]
    text = " ".join(section.split())
    assert LimitsSection().ingest_rcvhwm == 32 and "(32 by default)" in text
    push = zmq.Context.instance().socket(zmq.PUSH)
    try:
        defaults = push.getsockopt(zmq.SNDHWM), push.getsockopt(zmq.LINGER)
    finally:
        push.close(linger=0)
    assert defaults == (1000, -1)
    assert "SNDHWM messages (ZeroMQ's default 1000" in text and "(libzmq's default -1 waits for ever" in text
    given = {k: v.default for k, v in inspect.signature(FeedClient.__init__).parameters.items()}
    assert (given["hwm"], given["send_timeout_ms"], given["linger_ms"]) == (1000, 10_000, 2000)
    assert "`FeedClient`'s `hwm` is 1000 too, with a 10 s send timeout and a 2 s linger" in text


# -- the checker itself: a broken example must be caught ---------------------------------------------

def test_checker_catches_broken_examples(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("\n".join([
        "```console",
        "$ flashtick serve --config engine.yaml &   # fine",
        "flashtick output line that is not a command",
        "$ flashtick ask   # stream missing",
        "```",
        "```sh",
        "flashtick feed synthetic --rat 200",
        "make setup && python -m engine.service.cli subscribe dir20/ --jsn",
        "nice -n 10 python -m connectors.no_such_module --steps 1",
        "cat > q.yaml <<'EOF'",
        "flashtick this is here-document data",
        "EOF",
        "```",
        "```python",
        "flashtick = 'not shell'",
        "```",
    ]))
    found = commands([doc])
    cli = [c for c in found if flashtick_argv(c.argv) is not None]
    assert [c.line for c in cli] == [2, 4, 7, 8]
    assert [parses(flashtick_argv(c.argv)) is None for c in cli] == [True, False, False, False]
    module = next(c for c in found if python_module(c.argv) == "connectors.no_such_module")
    assert importlib.util.find_spec(python_module(module.argv)) is None
    assert ISSUE_NUMBER.search("the target (issue 6)") and ISSUE_NUMBER.search("issues 4 and 6")
    assert OUTSIDE_REFS.search("see ../shared/PEERS.md") and not OUTSIDE_REFS.search("see RESULTS_PEERS.md")


def table_firsts(path: Path, header: str) -> list[str]:
    """The backticked first cells of the markdown table whose header row starts `| header |`: `{ticks: N}` -> ticks."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    firsts = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        if cell := re.match(r"^\|\s*`\{?\s*(\w+)", line):
            firsts.append(cell.group(1))
    return firsts


def test_queries_md_lists_every_trigger_and_every_kind() -> None:
    """The trigger and kind tables were checked by nothing: a kind added to the code passed undocumented
    (docs/extending.md says where each is named)."""
    from queries.spec import KINDS
    from queries.trigger import TRIGGER_KINDS

    queries_md = ROOT / "docs" / "queries.md"
    assert sorted(table_firsts(queries_md, "trigger")) == sorted(TRIGGER_KINDS)
    assert sorted(table_firsts(queries_md, "kind")) == sorted(KINDS)


def test_model_md_defines_every_feature_of_the_logistic_baseline() -> None:
    """review434 #4: model.md named the `logistic` baseline's features in words ("the trade-sign run", "the quoted
    spread") a quant could not recompute it from (direction_20 0.748 against flashtick's 0.794); the definitions were
    only in engine/service/features.py's docstring. model.md's feature table names every one the fit uses."""
    from engine.service.features import FEATURES

    lines = (ROOT / "docs" / "model.md").read_text().splitlines()
    start = lines.index("| feature | definition |")
    rows = [line for line in lines[start + 2:start + 2 + len(FEATURES)] if line.startswith("|")]
    assert sorted(name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])) == sorted(FEATURES)


def yaml_fences(path: Path) -> list[tuple[int, str]]:
    """(first line number, text) of every ```yaml fence of `path`."""
    out, start, lines = [], None, path.read_text().splitlines()
    for number, raw in enumerate(lines, start=1):
        if start is None and raw.strip() == "```yaml":
            start = number + 1
        elif start is not None and raw.strip() == "```":
            out.append((start, "\n".join(lines[start - 1:number - 1])))
            start = None
    return out


def test_every_queries_block_of_the_docs_suits_one_kind_of_model() -> None:
    """review400 #2: queries.md's "Answering early" block held a generate query (which needs a text model) beside a
    query asking a codec question by name without choices (which needs a tick model), so no model registered it.
    Every `queries:` block of the docs parses, and asks what one kind of model answers."""
    import yaml

    from queries.spec import QuerySpec

    for path in USER_DOCS:
        for line, text in yaml_fences(path):
            document = yaml.safe_load(text)
            if not isinstance(document, dict) or not isinstance(document.get("queries"), list):
                continue
            specs = [QuerySpec.from_dict(query) for query in document["queries"]]
            text_model = [s.name for s in specs if s.kind == "generate" or not s.names_question]
            tick_model = [s.name for s in specs if s.names_question and s.choices is None]
            assert not (text_model and tick_model), (f"{path.relative_to(ROOT)}:{line}: {text_model} need a text "
                                                     f"model, {tick_model} a tick model")


def test_replay_md_has_a_row_for_every_reading_option() -> None:
    """The reading options (`backtest`, `feed replay`, `train`, `evaluate`, `demo`) are described in one table of
    replay.md; an option added to the parser alone was in no doc (docs/extending.md, "A command-line option")."""
    from engine.service.cli_options import _reading_options, _time_range_options

    section = (ROOT / "docs" / "replay.md").read_text().split("## On the command line", 1)[1].split("\n## ", 1)[0]
    first_cells = " ".join(line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))
    options = [option for parser in (_reading_options(), _time_range_options()) for action in parser._actions
               for option in action.option_strings if option.startswith("--")]
    missing = [option for option in options if not re.search(rf"`{re.escape(option)}[ `]", first_cells)]
    assert options and not missing, f"reading options with no row in replay.md's table: {missing}"
