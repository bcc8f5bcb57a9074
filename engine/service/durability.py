"""The data directory: accepted ingest items in a tick log, the registered queries and the published
answers beside it, and the replay that rebuilds every stream's session from the log when the service
starts again.

    DATA_DIR/ticks/         TickLog segments (engine/service/ticklog.py): every accepted item, in order
    DATA_DIR/answers/       the answer log (engine/service/answer_log.py): seqs, latest answers, gap fills
    DATA_DIR/queries.yaml   the registered queries, rewritten (atomically) on every register/unregister
    DATA_DIR/queries.state.json  beside it: the registry's versions, and where each query started
                            (RegistrationMarks), so a restart owes a query no answer on ticks from before it
    DATA_DIR/meta.json      the model and codec the logs were written with (a restart must use the same)
    DATA_DIR/written_with.json  the precision and settings its answers were computed under, the release that last
                            opened it (data_dir_meta.py)
    DATA_DIR/epoch          the id of this directory's answer seqs (heartbeats, answers: `epoch`), made once
    DATA_DIR/lock           held (flock) by the one service using the directory

An item is logged after it passed every check (validation, ordering, admission,
back-pressure) and before it reaches a session, so the log holds exactly the
accepted items. Replaying them through the same encoders and engine rebuilds
the same sessions: codec state and ordering guard from the raw ticks, and the
same token logs, because a context roll depends on token counts and tick
boundaries only, never on how ticks were grouped into forwards. So the replay
books ticks without computing them and then computes, once, only what each
stream's window still holds: far less than the live run computed. Standing
queries do not run during the replay; answers owed are computed after it.

This file holds DataDir, which owns the directory; its parts live beside it: data_dir_open.py (what a start checks
and claims before the logs open), kept_queries.py and registration_marks.py (the queries kept and where each
starts), segment_starts.py (each tick log segment's first record), log_replay.py (the tick log read back onto
sessions), lost_ticks.py (what the answer log refers to that the tick log lost), recovery_report.py (what a start
says of its replay), owed_answers.py (the answers a restart owes) and item_log.py (each accepted item logged, framed
by its message; ticks refused while a log cannot be written).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Container
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.encoder import EncodedTick, StreamEncoders
from engine.service.answer_log import AnswerHistory, AnswerLog, state_damage
from engine.service.config import ConfigError, LogSection
from engine.service.data_dir_meta import check_meta
from engine.disk_full import DISK_FULL
from engine.service.data_dir_open import (DataDirFull, check_room, mark_ended_by_signal, others_access, read_epoch,
                                          refuse_the_users_folder, release_lock, retention_below_segments,
                                          retention_past_filesystem, small_segments, take_lock, unclean_stop,
                                          unusable_part)
from engine.service.item_log import ItemLog
from engine.service.kept_queries import (LIVE, RestoredQueries, read_origins, read_query_versions,
                                         write_queries_files)
from engine.service.log_damage import damaged_copies
from engine.service.log_read_progress import LogReadProgress
from engine.service.log_replay import ReplayTarget, dropped_by_retention, split_log
from engine.service.log_stats import LogStats
from engine.service.lost_ticks import forget_lost_answers, say_lost_streams
from engine.service.private_dirs import make_private_dirs
from engine.service.recovery_report import say_damaged_copies, say_latched_messages, say_recovered
from engine.service.registration_marks import RegistrationMarks
from engine.service.segment_starts import SegmentStarts, counts_before
from engine.service.ticklog import TickLog
from queries.cache import AnswerCache
from queries.registry import Registry

if TYPE_CHECKING:
    from engine.service.owed_answers import TailStarts

__all__ = ["DataDir"]  # what other modules import from here


class DataDir:
    def __init__(self, config: LogSection, cache: AnswerCache, written_by: dict[str, Any],
                 encoders: StreamEncoders | None = None) -> None:
        """``written_by`` names what the logs depend on (model, codec): a directory written by another is
        refused, since replaying its ticks through a different codec would build different sessions.
        ``encoders``: the live ones, whose tick counts and ordering guards start each new tick log segment
        (``SEGMENT_START``), so a stream whose first segments retention dropped keeps counting where it was."""
        if config.dir is None:
            raise ValueError("DataDir needs log.dir")
        self.config = config
        self.root = Path(config.dir).expanduser().absolute()  # said in full: a relative one is the config file's
        self._lock_file = self._claim(config)
        self.failed = False  # the service using it failed (server_failure.py): its lock is left as a running one's
        self.queries_path = self.root / "queries.yaml"
        self.state_path = self.root / "queries.state.json"
        self.read_stats = LogStats()
        # what retention dropped since the log began, read again from the oldest segment at each live drop (the
        # replay's read_stats count only what it dropped before this start): log.stats.segments_dropped then, and it
        self._drops_read = 0
        self._dropped_live: int | None = None
        self.encoders = encoders  # set later by a front door that makes them after its data directory
        # one engine's Scheduler.booked: each stream's session as a replay books it (a front door has none)
        self.booked: Callable[[str], Any] | None = None
        self._starts = SegmentStarts(config.segment_bytes)
        # each stream's tick count whose answers are settled (None: no bound), which retention never drops a tick
        # past (_droppable): unset until a restart's replay knows its answered points, then one engine's committed
        # counts (``committed``, set by its pipeline; a front door has none: no bound)
        self._settled: Callable[[str], int | None] | None = None
        self.committed: Callable[[str], int | None] | None = None
        self._retention_deferred = False  # a drop _droppable held back: tried again at each heartbeat (check)
        try:
            self._open_parts(config, cache, written_by)
        except BaseException as e:  # the lock goes too: a refused directory is not held by who refused it (a damaged
            # record in the tick log's last segment, found as it opens, too: review400 #4)
            if getattr(self, "log", None) is not None:
                self.log.close()
            release_lock(self._lock_file)
            if isinstance(e, OSError):  # a file where a folder belongs (or the reverse), no permission: named
                raise ConfigError(unusable_part(self.root, e)) from None
            raise
        self.items = ItemLog(self.log, self.answers, self.root)  # each accepted item, framed by its message
        self.recovered_ticks = 0
        # of recovered_ticks, those of sessions expired for idleness before the stop, and of how many streams: the
        # start's line counts the streams held, and their ticks, apart from them
        self.expired_ticks = self.expired_streams = 0
        self.recovered_answers = 0
        # the messages the tick log stopped taking part way through (its directory moved away), as their end
        # records say (message_ends.LATCHED): the start says each
        self.latched_messages: list[dict[str, Any]] = []
        self._restored = RestoredQueries(RegistrationMarks(), set())  # what restore_queries brought back, if it ran
        self.origins: dict[str, str] = {}  # kept query -> where it came from (kept_queries.FROM_FILE or LIVE)
        self._restored_answers: tuple[Registry, AnswerHistory, Any] | None = None  # restore_answers' arguments
        self.replay_refused = 0  # logged items the replay could not place (none expected)
        self.recovery_s = 0.0
        self.rebuild_forwards = 0

    def _claim(self, config: LogSection) -> Any:
        """The directory made (0700) or taken as the user's own (said, not changed), and locked; returns the lock's
        open file. Raises ConfigError before anything is written into a folder refused."""
        refuse_the_users_folder(self.root)  # before the lock: nothing is written into a folder refused
        # (one the service makes is 0700; one the user made is said, or refused before anything is written there)
        access = others_access(self.root) if self.root.is_dir() else None
        try:
            # 0700: every tick, answer and query of the desk is in here; another user of a shared host reads none
            make_private_dirs(self.root)
            lock = take_lock(self.root / "lock")
        except OSError as e:  # under a file, on a read-only filesystem, no permission: name the key
            if e.errno in DISK_FULL:
                raise DataDirFull(f"log.dir {self.root}: {e.strerror}: free space there, then start it again") \
                    from None
            raise ConfigError(f"log.dir {self.root}: {e.strerror or e} (a data directory must be a writable "
                              f"directory)") from None
        try:
            check_room(self.root)  # before the replay: a full disk is said now, not after minutes of it
        except BaseException:
            release_lock(lock, clean=False)
            raise
        if (said := unclean_stop(lock.previous)) is not None:  # (a crash's: counted by a log pipeline)
            print(said, file=sys.stderr, flush=True)
        for problem in filter(None, [retention_past_filesystem(self.root, config), *retention_below_segments(config),
                                     *small_segments(config)]):
            print(f"flashtick: warning: {problem}", file=sys.stderr, flush=True)
        if access is not None:  # the user's own folder: said, not changed
            print(f"flashtick: {access}", file=sys.stderr, flush=True)
        return lock

    def resolved(self, written_by: dict[str, Any]) -> None:
        """meta.json checked and recorded again with what was resolved after the directory was opened: a sharded
        front door opens it before its shards start, and only they resolve `scheduler.window` (it was recorded
        null, where one engine records its number). A change from the window the logged answers had is noted as
        at any start."""
        check_meta(self.root / "meta.json", written_by)

    def _open_parts(self, config: LogSection, cache: AnswerCache, written_by: dict[str, Any]) -> None:
        """What the directory holds: its metadata and epoch, then the tick and answer logs (each made if missing)."""
        # other model files than the logged answers came from (a recalibration, a fine-tune in place): said, in
        # `health` too, and a new epoch, so that a client holding seqs knows the answers from here on are another
        # model's (review349 #2)
        self.model_changed = check_meta(self.root / "meta.json", written_by)
        damage = state_damage(self.root / "answers" / "state.msgpack")
        if damage is not None and not config.skip_corrupt:
            raise ConfigError(f"data directory {self.root}: answers/state.msgpack is damaged ({damage}). It is the "
                              f"answer log's checkpoint: every topic's last seq and latest answer, past what retention "
                              f"kept of the log. Restore it from a backup, or start with log.skip_corrupt: true to "
                              f"read the answer log's records alone, under a new epoch (a subscriber holding seqs "
                              f"starts over; docs/durability.md)")
        self.epoch = read_epoch(self.root / "epoch", renew=self.model_changed is not None or damage is not None)
        if self.model_changed is not None:
            print(f"flashtick: note: data directory {self.root}: its logged answers came from other model files "
                  f"({self.model_changed}); the answers from here on are this model's, published under a new epoch "
                  f"{self.epoch} (health's model_changed says it too)", file=sys.stderr, flush=True)
        if damage is not None:  # (moved aside, kept for a look: the next start reads the log alone too, as this one)
            state = self.root / "answers" / "state.msgpack"
            os.replace(state, state.with_name("state.msgpack.damaged"))
            print(f"flashtick: WARNING: data directory {self.root}: answers/state.msgpack is damaged ({damage}); "
                  f"log.skip_corrupt: the answer log's records alone are read (topics whose answers retention "
                  f"dropped start their seqs over), published under a new epoch {self.epoch}; the file is kept as "
                  f"state.msgpack.damaged", file=sys.stderr, flush=True)
        self.log = TickLog(self.root / "ticks", fsync=config.fsync, group_ms=config.group_ms,
                           segment_bytes=config.segment_bytes, retention_bytes=config.retention_bytes,
                           retention_s=config.retention_s, segment_start=self._segment_start,
                           skip_corrupt=config.skip_corrupt, droppable=self._droppable)
        self.answers = AnswerLog(self.root / "answers", cache, fsync=config.fsync, group_ms=config.group_ms,
                                 segment_bytes=config.answers_segment_bytes,
                                 retention_bytes=config.answers_retention_bytes, skip_corrupt=config.skip_corrupt)

    def restore_answers(self, registry: Registry, history: AnswerHistory, replayed: Any = None,
                        progress: Callable[[str], None] | None = None) -> set[str]:
        """Seqs, latest answers and trigger state from the answer log (after the queries are registered);
        ``replayed`` (the answer adaptation) is handed every logged answer, to re-feed during the tick replay.
        The registry's versions are caught up with the log's first (``_catch_up_versions``); returns the queries
        that registered afresh, which the caller treats as ``restore_queries``' ``reregistered``."""
        self._restored_answers = (registry, history, replayed)  # what a replay needs to take back lost answers
        reading = LogReadProgress("reading the answer log", self.answers.directory, "answers", progress) \
            if progress is not None else None  # (the start's phase: `health`, /readyz)
        self.recovered_answers = self.answers.read_back(history, self.config.skip_corrupt, replayed, reading)
        if reading is not None:
            reading.finished()
        afresh = self._catch_up_versions(registry)
        self.answers.settle(registry, replayed)
        self.answers.retire_unregistered(registry, history)
        return afresh

    def _catch_up_versions(self, registry: Registry) -> set[str]:
        """A registry restored from a ``queries.state.json`` older than the answer log (put back from a backup, or
        lost) would hand out again versions answers were already published under, for other specs: the registry
        version goes on past the highest logged ``query_version``, and a query whose logged answers are of a later
        registration than the state says (its spec then may not be its spec now), or that ``restore_queries``
        registered afresh, registers afresh at it."""
        logged = self.answers.logged_query_versions
        highest = max(logged.values(), default=0)
        later = {name for name, version in logged.items()
                 if name in registry and version > registry.query_version(name)}
        if highest <= registry.version and not later:
            return set()
        afresh = later | self._restored.reregistered
        restored, version = registry.version, max(registry.version, highest) + 1
        registry.restore_versions(version, {name: version for name in afresh})
        for name in afresh:
            self._restored.marks.removed(name)
        names = ", ".join(sorted(later))
        why = (f"answers were published under query_version {highest}, past the registry version {restored} it "
               f"restored" if highest > restored else f"the logged answers of {names} are of a later registration")
        again = f"; {', '.join(sorted(afresh))} registered afresh" if afresh else ""
        print(f"flashtick: {self.state_path.name} is older than the answer log of {self.root} (put back from a "
              f"backup, or lost?): {why}; the registry goes on at version {version}{again}",
              file=sys.stderr, flush=True)
        return afresh

    def _droppable(self, after: Path) -> bool:
        """Whether retention may drop the tick log segments before ``after`` (TickLog.droppable): no answer waits to
        be logged, and no stream has a tick in them past its settled count. A restart computes the answers owed on a
        stream's ticks past its last logged answer again, under the seqs subscribers had, only while those ticks are
        kept: dropped (the engine was behind, then the answer log refused its answers), it gave those seqs to other
        answers (review293). Past the limits, then, the log keeps what the engine has not answered and logged."""
        if self._settled is None or self.answers.unlogged:
            self._retention_deferred = self._settled is not None
            return False
        counts = counts_before(after)
        settled = counts is None or all((point := self._settled(stream)) is None or ticks <= point
                                        for stream, ticks in counts.items())
        self._retention_deferred = not settled
        return settled

    def _segment_start(self) -> bytes:
        """A new segment's first record (segment_starts.py), from the live encoders and sessions."""
        return self._starts.record(self.encoders, self.booked, self.items.ticks_logged)

    def save_queries(self, yaml_text: str, registry: Registry, marks: RegistrationMarks) -> None:
        """The registered queries, then their versions and registration marks, each replaced atomically
        (kept_queries.write_queries_files)."""
        write_queries_files(self.queries_path, self.state_path, yaml_text, registry, marks, self.origins)

    def registered_live(self, names: list[str]) -> None:
        """Queries registered over the control socket: so recorded at the next save (queries.state.json)."""
        self.origins.update(dict.fromkeys(names, LIVE))

    def restore_queries(self, registry: Registry) -> RestoredQueries:
        """The saved queries registered again, with the versions and marks they had (none saved: fresh ones).
        A query the state does not describe (a `register` killed between the two files, or the queries file
        edited by hand) is returned in ``reregistered``, at a fresh registry version: the caller treats it as
        registered now (its old answers forgotten, owed none of the logged ticks), as the lost registration was.
        A query the state has and the file lacks (an `unregister` cut short) bumps the registry version too.
        stderr says how many queries came back (nothing when the file holds none)."""
        text = self.queries_path.read_text(encoding="utf-8")
        specs = registry.register_file(self.queries_path, restoring=True)
        restored = self._restored = read_query_versions(self.queries_path, self.state_path, registry, specs, text)
        self.origins = read_origins(self.state_path)
        if specs:
            print(f"flashtick: restored {len(specs):,} quer{'y' if len(specs) == 1 else 'ies'} (registry version "
                  f"{registry.version}) from {self.root}", file=sys.stderr, flush=True)
        return restored

    def replay(self, encoders: StreamEncoders, target: ReplayTarget, answered: TailStarts | None = None,
               turned_away: Container[str] = (), progress: Callable[[str], None] | None = None
               ) -> list[EncodedTick | None]:
        """Re-feed every logged item through ``encoders`` (codec state and ordering guards come back) and
        book it on ``target`` (split_log); returns the tail past each stream's answered point. The caller
        computes what the booked windows hold (Engine.rebuild) and then calls ``replayed``. ``turned_away``: the
        streams ``target`` refused meanwhile (filled as it replays), which the caller says: not lost segments."""
        self._replay_started = time.perf_counter()
        # the retention a start owes, now that the answered points are known (none: drop as the limits say)
        self._settled = answered.answered if answered is not None else lambda stream: None
        self.log.retain()
        reading = LogReadProgress("replaying the tick log", self.log.directory, "ticks", progress) \
            if progress is not None else None  # (the start's phase: `health`, /readyz)
        ticks, refused, tail, logged, expired_ticks, expired_streams = split_log(
            self.log.directory, encoders, target, answered, skip_corrupt=self.config.skip_corrupt,
            stats=self.read_stats, latched=self.latched_messages.append, progress=reading)
        if reading is not None:
            reading.finished()
        self._settled = self.committed or (lambda stream: None)
        self.recovered_ticks += ticks
        self.expired_ticks += expired_ticks
        self.expired_streams += expired_streams
        self.replay_refused += refused
        self.items.ticks_logged = logged
        say_lost_streams(self.answers, encoders, turned_away, self.log.directory)
        forget_lost_answers(self.answers, self._restored_answers, encoders, turned_away)
        return tail

    def replayed(self, streams: int, rebuild_forwards: int = 0) -> None:
        """After ``replay`` and the rebuild: timed and said (recovery_report.py)."""
        self.rebuild_forwards = rebuild_forwards
        self.recovery_s = time.perf_counter() - self._replay_started
        say_recovered(self.log.directory, streams, self.recovered_ticks, self.expired_ticks, self.expired_streams,
                      self.read_stats, self.recovery_s)
        say_latched_messages(self.latched_messages, self.log.directory)
        say_damaged_copies(self.damaged_copies(), self.root)

    def damaged_copies(self) -> dict[Path, int]:
        """The damaged copies kept beside the tick and answer logs (a ``log.skip_corrupt`` repair's originals, a
        torn tail's non-zero cut bytes), with their sizes (log_damage.damaged_copies)."""
        return damaged_copies(self.log.directory) | damaged_copies(self.answers.directory)

    def read_items(self, streams: set[str], upto: int, encoders: StreamEncoders, target: ReplayTarget,
                   answered: dict[str, tuple[int, int | None] | None] | None = None
                   ) -> list[EncodedTick | None]:
        """The logged items of ``streams`` among records ``[0, upto)``, encoded afresh through ``encoders`` (a
        new StreamEncoders: the live ones are not touched) and booked on ``target``; returns their tail past
        ``answered`` (split_log): what rebuilds those streams elsewhere (a shard restarted or a stream moved).
        Safe beside live appends: it stops before record ``upto``, so it never reaches a record being written
        (nor cuts one as a torn tail)."""
        return split_log(self.log.directory, encoders, target, answered, skip_corrupt=self.config.skip_corrupt,
                         stats=LogStats(), streams=streams, upto=upto).tail

    def check(self) -> None:
        """Whether the logs' files still exist (a heartbeat's check: said at once, even while nothing arrives), and
        the retention a roll held back for ticks not answered then, once the engine has answered them."""
        self.log.check()
        self.answers.log.check()
        if self._retention_deferred:
            self._retention_deferred = False  # (set again by _droppable while the drop is still held back)
            self.log.retain()

    def stats(self) -> dict[str, object]:
        return {"dir": str(self.root), "recovered_ticks": self.recovered_ticks, "replay_refused": self.replay_refused,
                "recovered_answers": self.recovered_answers, "recovery_s": self.recovery_s,
                "rebuild_forwards": self.rebuild_forwards, **vars(self.log.stats),
                "torn_tails": self.log.stats.torn_tails + self.read_stats.torn_tails,
                "ticks_dropped_by_retention": self._ticks_dropped(),
                "ticks_dropped_unended_message": self.read_stats.ticks_dropped_unended_message,
                "ticks_unended_at_log_end": self.read_stats.ticks_unended_at_log_end,
                # (damage in the segment being written is skipped, and repaired, when the log opens it)
                "corrupt_skipped": self.log.stats.corrupt_skipped + self.read_stats.corrupt_skipped,
                "corrupt_records": self.log.stats.corrupt_records + self.read_stats.corrupt_records,
                **self._damaged_stats(),
                "answers": self.answers.stats()}

    def _ticks_dropped(self) -> int:
        """Every tick retention dropped since the tick log began, live drops included: an operator graphing
        `stats.log` saw `segments_dropped` climb while this stayed at the start's figure. Read from the oldest
        kept segment's start record once per drop; the replay's count where that record does not say (older logs)."""
        if self.log.stats.segments_dropped != self._drops_read:
            self._drops_read = self.log.stats.segments_dropped
            self._dropped_live = dropped_by_retention(self.log.directory)
        return self.read_stats.ticks_dropped_by_retention if self._dropped_live is None else self._dropped_live

    def _damaged_stats(self) -> dict[str, int]:
        copies = self.damaged_copies()
        return {"damaged_files": len(copies), "damaged_bytes": sum(copies.values())}

    def mark_ended_by_signal(self, signal_name: str) -> None:
        """Said in the lock as the process ends by a second signal during its stop (data_dir_open)."""
        mark_ended_by_signal(self._lock_file, signal_name)

    def close(self) -> None:
        self.items.close()
        self.log.close()
        self.answers.close()
        # a service that failed leaves its lock as a running one's: the next start says it recovers after an unclean
        # stop, the line crashes are counted by (server_failure.py)
        release_lock(self._lock_file, clean=None if self.failed else True)
