"""The data directory: accepted ingest items in a tick log, the registered queries beside it, and
the replay that rebuilds every stream's session from the log when the service starts again.

    DATA_DIR/ticks/      TickLog segments (engine/service/ticklog.py): every accepted item, in order
    DATA_DIR/queries.yaml   the registered queries, rewritten (atomically) on every register/unregister

An item is logged after it passed every check (validation, ordering, admission,
back-pressure) and before it reaches a session, so the log holds exactly the
accepted items. Replaying them through the same encoders and engine rebuilds
the same sessions: codec state and ordering guard from the raw ticks, and the
same token logs, because a context roll depends on token counts and tick
boundaries only, never on how ticks were grouped into forwards. Standing
queries do not run during the replay.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import msgpack

from connectors.encoder import EncodedTick, StreamEncoders, Submit
from connectors.ticks import InvalidTick, validate
from engine.engine import Engine
from engine.service.config import LogSection
from engine.service.ticklog import LogStats, TickLog, read

REPLAY_STEP = 4096  # records re-fed between engine forwards during a replay


class DataDir:
    def __init__(self, config: LogSection) -> None:
        if config.dir is None:
            raise ValueError("DataDir needs log.dir")
        self.config = config
        self.root = Path(config.dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.queries_path = self.root / "queries.yaml"
        self.read_stats = LogStats()
        self.log = TickLog(self.root / "ticks", fsync=config.fsync, group_ms=config.group_ms,
                           segment_bytes=config.segment_bytes, retention_bytes=config.retention_bytes,
                           retention_s=config.retention_s)
        self.recovered_ticks = 0
        self.replay_refused = 0  # logged items the replay could not place (none expected)
        self.recovery_s = 0.0

    def append(self, item: EncodedTick) -> None:
        """Log one accepted item; raises ticklog.LogWriteError (nothing logged) when the disk refuses."""
        self.log.append(msgpack.packb(item.to_record(), use_bin_type=True))

    def save_queries(self, yaml_text: str) -> None:
        """The registered queries, replaced atomically (a crash leaves the old or the new file, whole)."""
        tmp = self.queries_path.with_suffix(".yaml.tmp")
        tmp.write_text(yaml_text, encoding="utf-8")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.queries_path)

    def replay(self, encoders: StreamEncoders, engine: Engine, submit: Submit) -> int:
        """Re-feed every logged item through ``encoders`` into ``engine`` (``submit`` must not log it again),
        with standing queries off; returns the ticks recovered."""
        started = time.perf_counter()
        planner, engine.scheduler.planner = engine.scheduler.planner, None
        try:
            records = read(self.log.directory, skip_corrupt=self.config.skip_corrupt, stats=self.read_stats)
            for count, (_, payload) in enumerate(records, 1):
                record = msgpack.unpackb(payload, raw=False)
                if "tick" in record:
                    try:
                        encoders.ingest(validate(record["tick"]), submit)
                        self.recovered_ticks += 1
                    except InvalidTick:  # accepted once, so not expected: counted, never fatal
                        self.replay_refused += 1
                else:
                    done = encoders.ingest_tokenized(msgpack.packb([record["tokenized"]]), submit)
                    self.recovered_ticks += done.ticks
                    self.replay_refused += len(done.rejections)
                if count % REPLAY_STEP == 0:
                    engine.run_until_idle()
            engine.run_until_idle()
        finally:
            engine.scheduler.planner = planner
        self.recovery_s = time.perf_counter() - started
        if self.recovered_ticks:
            print(f"flashtick: recovered {self.recovered_ticks} ticks of {len(engine.scheduler.streams)} streams "
                  f"from {self.log.directory} in {self.recovery_s:.1f} s", file=sys.stderr, flush=True)
        return self.recovered_ticks

    def stats(self) -> dict[str, object]:
        return {"dir": str(self.root), "recovered_ticks": self.recovered_ticks, "replay_refused": self.replay_refused,
                "recovery_s": self.recovery_s, **vars(self.log.stats),
                "torn_tails": self.log.stats.torn_tails + self.read_stats.torn_tails,
                "corrupt_skipped": self.read_stats.corrupt_skipped}

    def close(self) -> None:
        self.log.close()

