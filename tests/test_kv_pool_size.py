"""The KV pool's default size, for the built-in model and for a checkpoint with wide cells, and the line `serve`
says it in. A default of 65536 cells took 4 GiB of a tiny model with Llama-3-8B's per-layer KV width, unsaid; a
fixed 256 MiB made 200 live streams thrash on a 24 GiB host (review376 #8). The default is now a quarter of memory,
at most 4 GiB, committed as its cells are first used."""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from pathlib import Path
from typing import TextIO

import pytest
import torch

from connectors.ticks import Tick, encode
from engine.kv_cache import CacheSpec, KVCache
from engine.memory_limit import cgroup_memory_limit, resident_bytes
from engine.models import ModelConfig
from engine.service.client import ControlClient
from engine.service.cmd_serve import _byte_size_text
from engine.service.config import ServiceConfig
from engine.service.config_kv import KVSection, default_kv_bytes
from engine.service.pipeline import TickPipeline
from conftest import tiny_text_checkpoint
from test_server import checkpoint  # noqa: F401  (checkpoint: the model fixture)
from test_service_limits import live_server, wait_for

MIB, GIB = 2**20, 2**30
# 1 layer x (K, V) x 8 KV heads x head_dim 128 x 4 bytes: 8 KiB a cell, so 65536 cells would be 512 MiB
WIDE = dict(num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=8, head_dim=128)


@pytest.fixture(scope="module")
def wide_checkpoint(tmp_path_factory):
    return tiny_text_checkpoint(tmp_path_factory.mktemp("wide"), **WIDE)


def pool_of(config: dict) -> dict[str, int]:
    pipeline = TickPipeline(ServiceConfig.from_dict({"log": {"enabled": False}, **config}), live_scores=False)
    try:
        return {**pipeline.runner.kv.summary(), **pipeline.engine.scheduler.kv_summary()}
    finally:
        pipeline.close()


def default_pool_bytes(cell_bytes: int, block: int = 32) -> int:
    """A quarter of what this process may use (the host's RAM, or its cgroup's limit), at most 4 GiB, in whole
    blocks: read here from the host, not from the code under test."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if (limit := cgroup_memory_limit()) is not None:
        memory = min(memory, limit)
    size = min(4 * GIB, memory // 4)
    return size // (cell_bytes * block) * cell_bytes * block


def test_the_default_pool_is_a_quarter_of_memory_at_most_4_gib_in_whole_cells_of_the_model() -> None:
    pool = pool_of({})
    want = default_pool_bytes(4096)
    assert (pool["kv_cell_bytes"], pool["kv_bytes_capacity"], pool["kv_cells_capacity"]) == (4096, want, want // 4096)
    # split among shards, and capped: 8 GiB shared by 2 shards is 1 GiB each, 64 GiB one engine 4 GiB
    assert (default_kv_bytes(2, memory=8 * GIB), default_kv_bytes(memory=64 * GIB)) == (GIB, 4 * GIB)
    assert KVSection().spec(shards=2).bytes == default_kv_bytes(2)


def test_a_checkpoint_with_wide_cells_gets_the_same_bytes_so_fewer_cells(wide_checkpoint) -> None:
    pool = pool_of({"model": {"path": str(wide_checkpoint)}})
    want = default_pool_bytes(8192)
    assert (pool["kv_cell_bytes"], pool["kv_bytes_capacity"], pool["kv_cells_capacity"]) == (8192, want, want // 8192)
    # a size the config gives is the size, wide cells or not
    assert pool_of({"model": {"path": str(wide_checkpoint)}, "kv": {"cells": 40960}})["kv_cells_capacity"] == 40960
    assert pool_of({"model": {"path": str(wide_checkpoint)}, "kv": {"bytes": 64 * MIB}})["kv_cells_capacity"] == 8192


def test_the_pool_takes_host_memory_only_as_its_cells_are_first_used() -> None:
    """A 1 GiB pool of zeros: resident as a few MiB until cells are written, zeros where never written, aligned;
    kv_cells_touched says how far the cells held have reached (what is resident of it)."""
    config = ModelConfig("llama", 100, 64, 128, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                         max_positions=256)  # 512 bytes a cell in fp32
    before = resident_bytes()
    cache = KVCache(config, CacheSpec(block_size=16, bytes=GIB), torch.float32, "cpu")
    assert cache.nbytes == GIB and cache.tensor.data_ptr() % 64 == 0
    assert resident_bytes() - before < 64 * MIB
    cache.tensor[:, :, :, : cache.tensor.shape[3] // 4].fill_(1.0)  # a quarter of the cells, in every layer
    assert resident_bytes() - before > 200 * MIB
    assert float(cache.tensor[:, :, :, -16:].abs().sum()) == 0.0  # never written: zeros
    pool = cache.new_pool()
    first = pool.allocate(3)
    pool.free(first)
    pool.allocate(2)
    assert pool.touched_blocks == 3 and pool.used_cells == 32
    assert pool_of({"kv": {"cells": 4096}})["kv_cells_touched"] == 0  # nothing held yet


class _StartLines(io.TextIOBase):
    """serve's stderr, passed on to ``stream``: its lines up to `flashtick serving`, which stops it as a SIGTERM
    would, with serve's own handler (a stop that drains and exits 0)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream, self._pending, self.lines = stream, "", []
        self.serving = False

    def write(self, text: str) -> int:
        self._stream.write(text)
        self._pending += text
        *whole, self._pending = self._pending.split("\n")
        for line in whole if not self.serving else ():
            self.lines.append(line + "\n")
            if line.startswith("flashtick serving"):
                self.serving = True
                signal.raise_signal(signal.SIGTERM)  # (its handler runs here, on this the main thread)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def serve_lines(config: Path) -> tuple[list[str], int]:
    """What `serve --config CONFIG` says on stderr up to `flashtick serving`, and its pid; stopped with SIGTERM, its
    status checked. Run in this process (`cli.main`, as the `flashtick` script runs it): the start lines are what
    these tests read, and a process of its own cost a torch import and an interpreter each (~2-6 s of CPU)."""
    from engine.service.cli import main

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    said, stderr = _StartLines(sys.stderr), sys.stderr
    sys.stderr = said
    try:
        code = main(["serve", "--config", str(config)])
    finally:  # (serve takes these signals for its run: this process's own come back)
        sys.stderr = stderr
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert said.serving and code in (0, None), said.lines
    return said.lines, os.getpid()


ENDPOINTS = "endpoints: {ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', control: 'tcp://127.0.0.1:0'}\n"


def test_serve_says_the_pools_size_and_the_key_that_sets_it(wide_checkpoint, tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(f"model: {{path: {wide_checkpoint}}}\nlog: {{enabled: false}}\n{ENDPOINTS}")
    lines, pid = serve_lines(config)
    said = [line for line in lines if "KV pool" in line]
    # with the window in effect: a scheduler.window changed between restarts was applied without a word
    # and what it holds in streams (review355 #6): before a thrash warning tells a feed of sparse names
    cells = default_pool_bytes(8192) // 8192
    at_block, at_full = cells // 32, cells // 1056
    assert said == [f"flashtick: INFO: KV pool: {cells} cells x 8 KiB = {_byte_size_text(cells * 8192)} (the default: "
                    "1/4 of this host's memory or its cgroup's limit, at most 4 GiB; on the CPU its memory is taken "
                    "as its cells are first used; kv.cells or kv.bytes sets it); each session's window: 1024 tokens "
                    "(the model's positions: its max_position_embeddings, at most what the pool holds: "
                    f"scheduler.window sets it); it holds {at_full:,} streams at a full window (1056 cells each) and "
                    f"{at_block:,} at one block of 32 cells, the least a stream that has ticked holds; an idle "
                    "stream's KV is freed after scheduler.stream_idle_s (3600 s), its context kept\n"], lines
    # the first line comes before the heavy imports: a supervisor's log shows a start began, and which
    assert lines[0].startswith("flashtick ") and lines[0].endswith(f" starting (pid {pid}, config {config})\n")


def test_a_pool_under_a_gib_is_said_in_mib_not_as_0_00_gib(tmp_path) -> None:
    """`kv.cells: 1024` of the built-in model's 4 KiB cells was said as `= 0.00 GiB`: as if no pool at all."""
    config = tmp_path / "serve.yaml"
    config.write_text(f"kv: {{cells: 1024}}\nlog: {{enabled: false}}\n{ENDPOINTS}")
    lines, _ = serve_lines(config)
    said = [line for line in lines if "KV pool" in line]
    assert len(said) == 1 and said[0].startswith("flashtick: INFO: KV pool: 1024 cells x 4 KiB = 4 MiB (kv.cells); "), \
        lines


def test_a_window_the_pool_capped_is_said_to_be_the_pools(tmp_path) -> None:
    """review244: a wide model's default window, capped by the pool, was said to be "the model's positions"."""
    config = tmp_path / "serve.yaml"
    config.write_text(f"kv: {{cells: 256}}\nlog: {{enabled: false}}\n{ENDPOINTS}")
    lines, _ = serve_lines(config)
    said = [line for line in lines if "KV pool" in line]
    # 8 blocks of 32: a 224-token window and the block a roll may straddle; the built-in model has 512 positions
    assert len(said) == 1 and said[0].endswith(
        "each session's window: 224 tokens (what the KV pool holds, less the block a roll may straddle; the model "
        "has 512 positions (its max_position_embeddings): kv.cells, kv.bytes or scheduler.window sets it); it holds "
        "1 stream at a full window (256 cells each) and 8 at one block of 32 cells, the least a stream that has "
        "ticked holds; an idle stream's KV is freed after scheduler.stream_idle_s (3600 s), its context kept\n"), \
        lines


@pytest.mark.parametrize("cells, window, blocks", [(100, 64, "3 blocks"), (32, 0, "1 block")])
def test_a_pool_too_small_for_a_window_is_said_as_the_start_line_says_a_pools_window(cells: int, window: int,
                                                                                     blocks: str) -> None:
    """review250: kv.cells 100 said "the window (64 positions: what the KV pool of 3 blocks of 32 holds ...)", where 3
    blocks of 32 hold 96 cells and nothing said one is held back for a roll (the start line does); kv.cells 32 said
    "1 blocks". Both errors of a pool too small now word its window as the start line does, plural right."""
    with pytest.raises(ValueError) as e:
        pool_of({"kv": {"cells": cells}})
    assert str(e.value) == (
        f"sink (0) + kept tokens ({window // 2}) + probe_reserve (64) must be below the window ({window} positions: "
        f"what the KV pool holds, less the block a roll may straddle: {blocks} of 32 cells, one held back; raise "
        f"kv.cells / kv.bytes)")
    with pytest.raises(ValueError) as e:
        pool_of({"kv": {"cells": 256}, "scheduler": {"window": 300}})
    assert str(e.value) == (
        "scheduler.window 300 does not fit the KV pool's window of 224 positions (what the KV pool holds, less the "
        "block a roll may straddle: 8 blocks of 32 cells, one held back): raise kv.cells / kv.bytes, or leave "
        "scheduler.window out")


def test_the_pool_line_counts_the_built_in_models_default_pool_in_streams() -> None:
    """review355 #6: the built-in model's former default pool, 65,536 cells, holds 120 streams at a full window of 512
    tokens and 2,048 names that printed a few times (a block of 32 each): a US universe of ~8,000 sparse names needs
    more, which the start line now says before the KV thrash warning does."""
    from engine.service.cmd_serve import _streams_in_pool

    assert _streams_in_pool(65536, 512, 32, 3600.0) == (
        "it holds 120 streams at a full window (544 cells each) and 2,048 at one block of 32 cells, the least a "
        "stream that has ticked holds; an idle stream's KV is freed after scheduler.stream_idle_s (3600 s), its "
        "context kept")
    assert _streams_in_pool(1 << 20, 512, 32, None).startswith("it holds 1,927 streams at a full window")
    assert _streams_in_pool(1 << 20, 512, 32, None).endswith("scheduler.stream_idle_s is null: a stream's KV is "
                                                              "never freed for idleness")
def test_serve_says_once_when_max_streams_admits_more_streams_than_the_pool_holds(tmp_path) -> None:
    """review353 #4: a pool of 65,536 cells (the default before 0.2.0; a 32-cell block a stream) holds 2,048 streams,
    120 at a full window, while max_streams admits 32,768: thrash at a few thousand instruments, unsaid until `KV
    thrash`."""
    config = tmp_path / "serve.yaml"
    config.write_text(f"kv: {{cells: 65536}}\nlog: {{enabled: false}}\n{ENDPOINTS}")
    lines, _ = serve_lines(config)
    said = [line for line in lines if "scheduler.max_streams" in line]
    assert len(said) == 1 and "scheduler.max_streams 32,768 admits more streams than kv.cells 65,536 holds " \
        "resident: 2,048 at one 32-cell block each, 120 once their contexts fill the 512-token window" in said[0], lines
    config.write_text(f"kv: {{cells: 1024}}\nscheduler: {{max_streams: 32}}\nlog: {{enabled: false}}\n{ENDPOINTS}")
    lines, _ = serve_lines(config)
    assert not [line for line in lines if "scheduler.max_streams" in line], lines


def test_the_capacity_note_is_left_out_under_when_full_refuse_and_said_per_shard() -> None:
    from engine.service.stream_capacity import capacity_note, resident_streams

    assert resident_streams(65536, 32, 512) == (2048, 120)
    assert capacity_note(32768, "refuse", 65536, 32, 512) is None  # admission is bounded by the pool itself
    assert capacity_note(2048, "evict", 65536, 32, 512) is None
    assert "holds resident on each shard: 64 at one" in capacity_note(100, "evict", 2048, 32, 512, shards=2)


def test_live_streams_whose_full_windows_pass_the_pool_are_warned_of_at_once_and_in_health(checkpoint,
                                                                                            capsys) -> None:
    """Review376 #8: 200 live streams on the default pool went from 6 ms to 4.5 s tick-to-answer once their windows
    filled, said only by the thrash line once answers were late. Now the moment the streams that ticked in the last
    minute would want more KV at a full window than kv.cells holds, the log says it with the kv.cells that fits, and
    `health` carries a `kv_pool_small` warning while it is so; streams the pool holds are not warned of."""
    with live_server(checkpoint, limits={"heartbeat_s": 0.1}) as (server, push):
        window, block = server.pipeline.engine.scheduler.window, server.config.kv.block_size
        holds = server.pipeline.engine.scheduler.pool.capacity_cells // (window + block)
        now = time.time_ns()
        few = [Tick(stream=f"LIVE{i:02d}", ts=now + i, kind="trade", price=100.0, size=1.0) for i in range(holds)]
        push.send(encode(few))
        wait_for(lambda: server.pipeline.ticks_in == holds)
        beats = server.counters["heartbeats"]
        wait_for(lambda: server.counters["heartbeats"] >= beats + 2)  # (a heartbeat has seen them all)
        with ControlClient(server.endpoints["control"]) as control:
            assert not [w for w in control.call("health").get("warnings", []) if w["kind"] == "kv_pool_small"]
            more = [Tick(stream=f"LIVE{i:02d}", ts=now + i, kind="trade", price=100.0, size=1.0)
                    for i in range(holds, holds + 5)]
            push.send(encode(more))
            wait_for(lambda: any(w["kind"] == "kv_pool_small" for w in control.call("health").get("warnings", [])))
            warning = next(w for w in control.call("health")["warnings"] if w["kind"] == "kv_pool_small")
    need = (holds + 5) * (window + block)
    assert f"{holds + 5} streams held ({holds + 5} ticked in the last 60 s; each keeps its KV until " \
           f"scheduler.stream_idle_s (3600 s) without data)" in warning["message"], warning
    assert f"Set kv.cells to {need} or more" in warning["message"], warning
    err = capsys.readouterr().err
    assert err.count("WARNING: KV pool too small for the live streams") == 1, err


def test_the_pool_warning_counts_every_stream_held_not_only_those_that_ticked_in_the_last_minute(
        checkpoint, monkeypatch, capsys) -> None:
    """Review380 #2: the first warning sized kv.cells on the streams that ticked in the last 60 s (293 of a
    1,500-name scanner: "Set kv.cells to 159392"), while KV is held for scheduler.stream_idle_s, and the `KV thrash`
    line then wanted 816,000. Every stream held counts now; here none ticked within LIVE_S (0 s), as a name that
    prints every few minutes has not, and the warning still sizes the pool on all of them."""
    from engine.service import kv_thrash

    monkeypatch.setattr(kv_thrash, "LIVE_S", 0.0)
    config = ServiceConfig.from_dict({"log": {"enabled": False}, "kv": {"cells": 4096}})
    pipeline = TickPipeline(config, live_scores=False)
    try:
        window, block = pipeline.engine.scheduler.window, config.kv.block_size
        streams = 4096 // (window + block) + 3  # (more full windows than the pool holds)
        now = time.time_ns()
        for i in range(streams):
            pipeline.ingest(Tick(stream=f"QUIET{i:02d}", ts=now, kind="trade", price=100.0, size=1.0))
        pipeline.run_until_idle()
        watch = kv_thrash.KvThrashWatch()
        watch.watch({"kv_cells_capacity": 4096}, pipeline, config)
        assert watch.pool_short is not None, "no warning: the streams that ticked earlier than LIVE_S were not counted"
        assert watch.pool_short.startswith(f"{streams} streams held (0 ticked in the last 0 s;"), watch.pool_short
        assert f"Set kv.cells to {streams * (window + block)} or more" in watch.pool_short, watch.pool_short
        assert capsys.readouterr().err.count("KV pool too small for the live streams") == 1
        # review392 #11: said once as streams were still arriving, its figure then 30% short, never again. Said
        # again once the streams arriving grew it by a quarter, not at each stream more
        for more in (1, streams // 4 + 1):
            for i in range(more):
                pipeline.ingest(Tick(stream=f"LATE{more}.{i:02d}", ts=now, kind="trade", price=100.0, size=1.0))
            pipeline.run_until_idle()
            watch.watch({"kv_cells_capacity": 4096}, pipeline, config)
            said = capsys.readouterr().err
            assert said.count("KV pool too small") == (more > 1), said
        assert f"(more streams since it was said: it wanted {streams * (window + block)})" in said
        assert f"Set kv.cells to {(streams + 1 + streams // 4 + 1) * (window + block)} or more" in said, said
        # review406 #7: after a restart every stream the replay restored counted as ticked in the last minute; a
        # tick before live ingest began is not live, one after it is
        monkeypatch.setattr(kv_thrash, "LIVE_S", 60.0)
        since_start = kv_thrash.KvThrashWatch()
        since_start.watch({"kv_cells_capacity": 4096}, pipeline, config, serving_since=time.time())
        assert " streams held (0 ticked in the last 60 s;" in since_start.pool_short, since_start.pool_short
        since_start.watch({"kv_cells_capacity": 4096}, pipeline, config, serving_since=now / 1e9 - 1)
        assert f"(0 ticked in the last 60 s;" not in since_start.pool_short, since_start.pool_short
    finally:
        pipeline.close()
