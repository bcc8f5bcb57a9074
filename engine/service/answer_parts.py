"""A backtest's answers on disk while it runs: part files and a manifest, so an interrupted run keeps what
it computed and `flashtick backtest --resume` continues from the last checkpoint (engine/service/backtest_resume.py).

    OUT.parts/part-000001.parquet ...   answers, unscored, in the order they were made
    OUT.parts/progress.json             the run's key, the replay position the parts cover, the parts' names, the
                                        flashtick release that wrote it
    OUT.parts/lock                      held (flock) by the one run writing the parts, its pid inside

The parts are plain Parquet files: `pl.read_parquet("answers.parquet.parts/*.parquet")` reads an unfinished
run's answers so far.
A checkpoint that cannot be resumed (damaged, or written by a run with other files, queries, config or options)
is refused in words by resume_refusals.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import polars as pl

from engine.rust_paths import rust_path
from engine.service.output_lock import LockHolder, take_lock
from engine.service.output_paths import DiskFull, temporary_name, write_atomically, write_text_atomically
from engine.service.release import this_release
from engine.service.resume_refusals import as_json, manifest_damage, refuse_changed_key
from engine.service.tick_origins import TickOrigins
from engine.text_files import read_text
from queries.cache import Answer

PARTS_SUFFIX = ".parts"  # answers.parquet -> answers.parquet.parts/
MANIFEST = "progress.json"
LOCK = "lock"  # two runs on one --out (a --resume while the first still ran) interleaved their parts: one writer
# file, row: where the tick the answer was made after was read (tick_origins.py); model_probs: before adaptation
RAW_SCHEMA = {"query": pl.String, "stream": pl.String, "topic": pl.String, "seq": pl.Int64, "ticks": pl.Int64,
              "data_ts": pl.Int64, "file": pl.Int32, "row": pl.Int64, "answer": pl.String, "expected": pl.Float64,
              "nll": pl.Float64, "text": pl.String, "probs": pl.String, "model_probs": pl.String,
              # what the answer attended (an ask's reply's context): the session's tokens and the whole ticks among
              # them, fewer than `ticks` once the stream's context rolled (docs/replay.md)
              "context_tokens": pl.Int64, "context_ticks": pl.Int64}


class PartsGone(FileNotFoundError):
    """A part file or the parts folder vanished while this run wrote them: something else removed or replaced it."""


def _take_lock(directory: Path) -> int | None:
    """This process's lock on ``directory/LOCK`` (output_lock.take_lock): OutputInUse while another run holds it,
    None when the folder went away meanwhile (the run holding it finished and removed it)."""
    return take_lock(directory / LOCK, lambda holder: _in_use(directory, holder))


def _in_use(directory: Path, holder: LockHolder) -> str:
    """Why a run cannot write the parts ``holder``'s run writes, and what to do. Another thread's run in this
    process (review420 #5) is no process to signal: its `kill -TERM` was this process's own, both runs' end."""
    if holder.this_process:
        return (f"{directory} is in use by another backtest running in this process (a thread's run_backtest; pid "
                f"{os.getpid()} is this process: do not kill it, that ends both runs): one run writes an out at a "
                f"time; wait for that run to end (its `stop` ends it at a batch boundary, resume=True continues "
                f"it), or give another out")
    return (f"{directory} is in use by a running backtest{holder.pid}: one run writes an --out at a time; wait for it "
            f"to end, or stop it ({holder.stop}: it checkpoints and exits) and run again with --resume to continue "
            f"it, or give another --out")


def _clear(directory: Path, keep: tuple[str, ...] = (LOCK,)) -> None:
    """Everything in the parts folder but its lock (held by this run: a new file there would be no one's lock) and
    any other name in `keep`."""
    for entry in directory.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


class AnswerParts:
    """A backtest's answers so far: ``OUT.parts/part-NNNNNN.parquet`` and ``progress.json``.

    A part is written whole (temporary name, fsync, rename) before the manifest that lists it, so a run
    killed at any moment leaves a manifest naming only whole parts, and the replay position
    (`consumed`: ticks taken from the files) those parts cover, and each topic's last seq (`last_seq`), from
    which a resumed run's answer cache continues. The run holds the folder's lock from `open` until `release`
    (or the end of a `with` block): a second run on the same --out is refused while it lasts.
    """

    def __init__(self, out: Path, key: dict[str, Any], manifest: dict[str, Any] | None,
                 readings: list | None = None, threads: int | None = None, lock: int | None = None,
                 rolls_inside: bool | None = None) -> None:
        self.dir = out.with_name(out.name + PARTS_SUFFIX)
        self._lock = lock
        self.key = key
        self.readings = as_json(readings or [])  # how each file is read: not in the key, said when it differs
        # torch's CPU threads: not in the key (how fast, not what), but they move the answers' last float bits, so
        # a resume at another count is told that it will not be byte-identical to an uninterrupted run
        self.threads = threads
        self.threads_before: int | None = (manifest or {}).get("threads")
        # scheduler.roll_inside_forward, likewise: where sessions roll is the same either way (context_rolls.ROLL_RULE
        # holds), only the packing of a forward and so its rounding (~1e-6) differs; a resume under the other value is
        # told, not refused (None: a checkpoint written before it was kept here, under either value: nothing said)
        self.rolls_inside = rolls_inside
        self.rolls_inside_before: bool | None = (manifest or {}).get("roll_inside_forward")
        manifest = manifest or {"key": key, "consumed": 0, "parts": [], "answers": 0, "last_seq": {}}
        self.consumed: int = manifest["consumed"]
        self.resumed_at = self.consumed
        self.parts: list[str] = manifest["parts"]
        self.answers: int = manifest["answers"]
        self.last_seq: dict[str, int] = manifest["last_seq"]
        # once the answers are whole in OUT (its rows, size and mtime_ns): the scores are all that is left to make
        self.written: dict[str, int] | None = manifest.get("written")

    @classmethod
    def open(cls, out: Path, key: dict[str, Any], resume: bool, readings: list | None = None,
             threads: int | None = None, rolls_inside: bool | None = None,
             note: Callable[[str], None] = lambda _: None) -> AnswerParts:
        """The run's parts, their lock held (OutputInUse while another run holds it); `readings` ((file, its column
        map) per file, FileReplay.readings) are kept beside the key, so a resume with other files or options can say
        which (a checkpoint without them says less). `note` is told what a user should know (a resume that finds no
        checkpoint starts from the beginning), as run_backtest's other notes are."""
        while True:  # again when the folder went away before its lock was taken: the run holding it had finished
            parts = cls._open_locked(out, key, resume, readings, threads, rolls_inside, note)
            if parts is not None:
                return parts

    @classmethod
    def _open_locked(cls, out: Path, key: dict[str, Any], resume: bool, readings: list | None,
                     threads: int | None, rolls_inside: bool | None,
                     note: Callable[[str], None]) -> AnswerParts | None:
        directory = out.with_name(out.name + PARTS_SUFFIX)
        if not resume:
            try:
                directory.mkdir(parents=True)
            except FileExistsError:
                if (lock := _take_lock(directory)) is None:
                    return None
                if not (directory / MANIFEST).exists():  # stopped before its first checkpoint: nothing to continue
                    _clear(directory)  # (review218 #3: its abort said "nothing kept", then this refused the rerun)
                    return cls(out, key, None, readings, threads, lock, rolls_inside)
                os.close(lock)  # not in use (else OutputInUse): a run that was stopped, to continue or delete
                raise FileExistsError(f"{directory} holds an unfinished backtest; add --resume (resume=True from "
                                      f"Python) to continue it, or delete it to start over") from None
            lock = _take_lock(directory)
            return None if lock is None else cls(out, key, None, readings, threads, lock, rolls_inside)
        if not directory.exists() and out.is_file():  # a finished run: nothing to continue, and not to replace
            raise FileExistsError(f"{out} holds a finished backtest (no checkpoint in {directory}): the run there is "
                                  f"complete, so there is nothing to resume; to run it again, remove {out} or "
                                  f"give another --out")
        directory.mkdir(parents=True, exist_ok=True)
        if (lock := _take_lock(directory)) is None:
            return None
        try:  # any raise from here on lets go of the lock: a later run in this process is not refused by it
            manifest = cls._checkpoint(directory, key, readings)
            if manifest is None:  # nothing to resume: start afresh (so a script may always pass --resume)
                note(f"no checkpoint in {directory}; starting from the beginning")
                _clear(directory)
                return cls(out, key, None, readings, threads, lock, rolls_inside)
            for stray in set(p.name for p in directory.iterdir()) - set(manifest["parts"]) - {MANIFEST, LOCK}:
                (directory / stray).unlink()  # written after the last checkpoint: those answers come again
            return cls(out, key, manifest, readings, threads, lock, rolls_inside)
        except BaseException:
            os.close(lock)
            raise

    @staticmethod
    def _checkpoint(directory: Path, key: dict[str, Any], readings: list | None) -> dict[str, Any] | None:
        """The checkpoint in `directory` to resume (None: there is none), refused when its run's key differs."""
        manifest_path = directory / MANIFEST
        if not manifest_path.is_file():
            return None
        try:
            manifest = json.loads(read_text(manifest_path))
        except (OSError, ValueError) as e:
            raise ValueError(f"{manifest_path}: unreadable checkpoint ({e}); delete {directory} to start "
                             f"over") from None
        if (damage := manifest_damage(manifest)) is not None:  # (before its key, which a damaged file may lack)
            raise ValueError(f"{manifest_path} is damaged: {damage}, so its checkpoint cannot be resumed; remove "
                             f"{directory} and run the command again to start over (a run without --resume refuses "
                             f"the folder while it is there)")
        refuse_changed_key(directory, manifest, key, readings)
        _refuse_earlier_parts(directory, manifest["parts"])
        return manifest

    def save(self, answers: list[Answer], consumed: int, origins: TickOrigins | None = None,
             contexts: dict[tuple[str, int], tuple[int, int]] | None = None) -> None:
        """Checkpoint: the answers since the last one as a part, then the manifest at `consumed`; `origins` names
        the file and row of the tick each answer was made after (None: left null); `contexts` each answer's context
        by (topic, seq) (TickPipeline.answer_context: taken out of it as written; null where missing)."""
        if answers:
            origins = origins or TickOrigins()
            contexts = {} if contexts is None else contexts
            rows = [_raw_row(a, origins, contexts.pop((a.topic, a.seq), (None, None))) for a in answers]
            name = f"part-{len(self.parts) + 1:06d}.parquet"
            table = pl.DataFrame(rows, schema=RAW_SCHEMA, orient="row")
            write_atomically(self.dir / name, lambda tmp: table.write_parquet(rust_path(tmp)))
            self.parts.append(name)
            self.answers += len(rows)
            for row in rows:
                self.last_seq[row[2]] = row[3]
        self.consumed = consumed
        manifest = {"key": self.key, "consumed": consumed, "parts": self.parts, "answers": self.answers,
                    "last_seq": self.last_seq, "readings": self.readings, "threads": self.threads,
                    **({"roll_inside_forward": self.rolls_inside} if self.rolls_inside is not None else {}),
                    "release": this_release().record(),  # the release that wrote it (review321 #5)
                    **({"written": self.written} if self.written is not None else {})}
        text = json.dumps(manifest, indent=1) + "\n"
        write_text_atomically(self.dir / MANIFEST, text)

    def answers_written(self, whole: Path, rows: int) -> None:
        """The answers are whole in `whole` (OUT's temporary name, renamed to OUT next): the manifest says so,
        naming the file (its rows, size and time, which the rename keeps), and the part files go. The folder and its
        lock stay until the scores and plot are written too, so a run stopped while it scores leaves what a --resume
        needs to score OUT without replaying a tick."""
        stat = whole.stat()
        self.written = {"rows": rows, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        self.parts = []
        self.save([], self.consumed)  # first: a manifest never names a part file that is gone
        _clear(self.dir, keep=(LOCK, MANIFEST))

    def written_rows(self, out: Path) -> int:
        """The rows of the whole answers file `out` a resume of a run stopped while it scored is to score; refused
        (ValueError) when `out` is gone or is another file now than the one the run wrote."""
        assert self.written is not None, "only a checkpoint whose answers were written owes scores"
        stat, whole = _stat_of(out), temporary_name(out)
        if not self._is_written(stat) and self._is_written(_stat_of(whole)):
            os.replace(whole, out)  # stopped between marking the answers whole and renaming them: the rename's turn
            stat = _stat_of(out)
        if not self._is_written(stat):
            now = "gone" if stat is None else "another file now (its size or modification time changed)"
            raise ValueError(f"{self.dir} is for the answers written to {out}, to score them, but that file is "
                             f"{now}; remove {self.dir} and run the command again to start over")
        return self.written["rows"]

    def _is_written(self, stat: os.stat_result | None) -> bool:
        """Whether `stat` is the answers file this checkpoint marked whole."""
        assert self.written is not None
        return stat is not None and (stat.st_size, stat.st_mtime_ns) == (self.written["size"], self.written["mtime_ns"])

    def paths(self) -> list[Path]:
        """The part files checkpointed so far, in the order they were written."""
        return [self.dir / name for name in self.parts]

    def scan(self) -> pl.LazyFrame:
        """Every answer checkpointed so far, unscored, read lazily (a day's answers need not fit in memory)."""
        paths = self.paths()
        return pl.scan_parquet([rust_path(p) for p in paths]) if paths else pl.LazyFrame(schema=RAW_SCHEMA)

    def remove(self) -> None:
        """The parts folder, lock and all (the run is whole in OUT, or there was nothing to run); then released."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.release()

    def gone(self, error: BaseException) -> PartsGone | None:
        """`error` said in one line when it is a file of these parts not found (polars: `No such file or directory
        (os error 2): OUT.parts/part-000001.parquet`), else None."""
        # polars shortens a long path from the left (`...st-513/popen-gw0/out.parquet.parts/part-000001.parquet.tmp
        # (set POLARS_VERBOSE=1 ...)`): the folder is found by its own name, the file named after it
        if not isinstance(error, FileNotFoundError):
            return None
        said, marker = str(error.filename or error), f"{self.dir.name}/"
        if marker not in said:
            return None
        missing = self.dir / said.rsplit(marker, 1)[1].split()[0]
        return PartsGone(f"{missing} vanished while this backtest wrote {self.dir}: another process removed or "
                         f"replaced the folder (a cleanup, or a flashtick too old to lock it running on the same --out)"
                         f"; {out_of(self.dir)} was not written: run the same command with --resume to continue from "
                         f"the checkpoint left there, if any")

    def disk_full(self, error: BaseException) -> DiskFull | None:
        """`error` with what to do when it is a full disk (output_paths.said_if_disk_full), else None: the
        checkpoint stays, and --resume continues from it (review224 #6: byte-identical to an uninterrupted run)."""
        if not isinstance(error, DiskFull):
            return None
        room = "raise the limit" if error.errno == errno.EFBIG else "free space"
        said = DiskFull(f"{error}; {room} and run the same command with --resume to continue from the last "
                        f"checkpoint ({self.dir})")
        said.errno = error.errno
        return said

    def release(self) -> None:
        """Let another run write these parts (a resume of this one's checkpoint)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> AnswerParts:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def _refuse_earlier_parts(directory: Path, parts: list[str]) -> None:
    """Refuse a checkpoint whose parts lack columns this version writes (`file`, `row`): an earlier flashtick's,
    whose answers cannot be joined with this run's (polars refused the join after the whole replay, in its words)."""
    first = directory / parts[0] if parts else None
    if first is None or not first.is_file():  # (a part gone is said when it is read: PartsGone)
        return
    if missing := [name for name in RAW_SCHEMA if name not in pl.read_parquet_schema(rust_path(first))]:
        raise ValueError(f"{directory} was checkpointed by an earlier flashtick, whose answers have no "
                         f"{' or '.join(missing)} column, so it cannot be resumed into this version's answers file; "
                         f"remove {directory} and run the command again to start over")


def _stat_of(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def out_of(parts_dir: Path) -> Path:
    """The answers file a parts folder is for (OUT.parts -> OUT)."""
    return parts_dir.with_name(parts_dir.name.removesuffix(PARTS_SUFFIX))


def _raw_row(a: Answer, origins: TickOrigins, context: tuple[int | None, int | None]) -> tuple:
    probs = a.value.get("probs")
    return (a.query, a.stream, a.topic, a.seq, a.version, a.data_ts, *origins.of(a.stream, a.version),
            a.value.get("answer") or (max(probs, key=probs.get) if probs else None),
            a.value.get("expected"), a.value.get("nll"), a.value.get("text"),
            json.dumps(probs, sort_keys=True) if probs else None,
            json.dumps(a.value["model_probs"], sort_keys=True) if "model_probs" in a.value else None, *context)
