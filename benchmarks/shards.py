"""Scale-out on Ray: sustained ticks/s with the example queries at 1 vs 2 engine shards, in one run, and how
a shard move's rebuild time grows with the moved stream's logged ticks.

Throughput: the built-in model and queries/examples/tick_model.yaml, the seeded synthetic market over 24
streams, messages of 50 ticks fed through ShardedPipeline (the front door's whole ingest path: decode,
validate, encode, tick log, route) as fast as the shards take them: a message goes in whenever the backlog
is under 4,000 tokens (whatever the shard count), so every shard always has work. Timed from the first message to
every tick computed and every due answer published. One torch thread per shard (model.threads: 1), one Ray CPU per
shard, on a local Ray instance with num_cpus=2 and its workers at nice 0 (Ray's default is 15, which on a
shared machine hands the shards' CPU to everyone else); 1 and 2 shards alternate, best of ``--repeats``.

Move: ``L`` ticks of one stream logged by the front door, then the two halves of moving the stream to a
shard: reading its records back from the tick log (re-encoded through fresh encoders) and the shard's
restore (Scheduler.restore books every chunk, Engine.rebuild computes the window once, the answers owed).

    python -m benchmarks.shards                    # 6,000 ticks per throughput run; moves of 1k..64k ticks
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

from benchmarks.common import add_output_arguments, machine, output_dir, require_extra, write_json
from connectors.encoder import StreamEncoders
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.cli import EXAMPLE_QUERIES
from engine.service.config import LogSection, ServiceConfig, ShardsSection
from engine.service.ray_shards import ray_module
from engine.service.shard_restores import ShardRestores
from engine.service.sharded import ShardedPipeline

STREAMS = 24  # 11 and 13 streams on 2 shards by rendezvous hashing (16 would split 6 and 10)
MESSAGE_TICKS = 50
# tokens accepted and not yet computed, the same whatever the shard count: a larger backlog batches more of a
# stream's ticks per forward, and the example dir20 query (trigger: batch) fires once per stream per forward,
# so a backlog that grew with the shards would give more shards less work per tick
BACKLOG_TOKENS = 4000


def config(shards: int, data_dir: Path) -> ServiceConfig:
    return dataclasses.replace(ServiceConfig(queries=str(EXAMPLE_QUERIES)), log=LogSection(dir=str(data_dir)),
                               shards=ShardsSection(count=shards))


def market(streams: int, seed: int, prefix: str = "S") -> SyntheticMarket:
    params = tuple(dataclasses.replace(DEFAULT_STREAMS[i % 4], name=f"{prefix}{i}") for i in range(streams))
    return SyntheticMarket(SyntheticConfig(seed=seed, streams=params))


def busy_cpu_s() -> float:
    """CPU seconds every process on the machine has used so far (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def shards_cpu_s(pipeline: ShardedPipeline) -> float:
    return sum(s["cpu_s"] for s in ray_module().get([link.handle.stats.remote() for link in pipeline.links]))


def throughput(shards: int, ticks: list, warmup: list, root: Path) -> dict:
    """Ticks/s from the first message to everything computed, with the CPU each part used beside it (the
    front door, the shards, everything else on the machine: the other users of a shared machine)."""
    pipeline = ShardedPipeline(config(shards, Path(tempfile.mkdtemp(dir=root))))
    pipeline.run_until_idle()
    pipeline.ingest_message(encode(warmup))
    pipeline.run_until_idle()
    messages = [encode(ticks[i : i + MESSAGE_TICKS]) for i in range(0, len(ticks), MESSAGE_TICKS)]
    answers_before = pipeline.answers_out
    shard_cpu, machine_cpu = shards_cpu_s(pipeline), busy_cpu_s()
    cpu, start = time.process_time(), time.perf_counter()
    for message in messages:
        while pipeline.pending_tokens() > BACKLOG_TOKENS:
            pipeline.step()
        pipeline.ingest_message(message)
        pipeline.step()
    pipeline.run_until_idle()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    machine_cpu, shard_cpu = busy_cpu_s() - machine_cpu, shards_cpu_s(pipeline) - shard_cpu
    result = {"shards": shards, "ticks": len(ticks), "seconds": seconds, "ticks_per_s": len(ticks) / seconds,
              "answers": pipeline.answers_out - answers_before, "front_door_cpu_s": cpu,
              "front_door_cpu_share": cpu / seconds, "shards_cores": shard_cpu / seconds,
              "others_cores": max(0.0, machine_cpu - cpu - shard_cpu) / seconds,
              "ticks_per_shard_cpu_s": len(ticks) / shard_cpu,
              "streams_per_shard": sorted(len(link.streams) for link in pipeline.links)}
    pipeline.close()
    return result


def moves(lengths: list[int], root: Path) -> list[dict]:
    """For each length: log that many ticks of a new stream (as the front door does), then time its move."""
    pipeline = ShardedPipeline(config(1, root / "moves"))
    pipeline.run_until_idle()
    link = pipeline.links[0]
    out = []
    for length in lengths:
        stream = f"MOVE{length}_0"
        encoders = pipeline.encoders
        for tick in market(1, seed=length, prefix=f"MOVE{length}_").next_batch(length):
            encoders.ingest(tick, pipeline.data.append)
        fresh = StreamEncoders(pipeline.codec, encoders.vocab_size, max_item_tokens=encoders.max_item_tokens)
        start = time.perf_counter()
        restores = ShardRestores(pipeline, accepted=False)  # what a lost shard's restore reads the log onto
        tail = pipeline.data.read_items({stream}, pipeline.data.log.next_record, fresh, restores)
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        logged = restores.logged({stream}, tail)
        items = restores.items.get(stream, [])
        reply = ray_module().get(link.handle.restore.remote("", [], logged))
        restore_s = time.perf_counter() - start
        ray_module().get(link.handle.drop.remote([stream]))
        out.append({"logged_ticks": length, "log_records": pipeline.data.log.next_record,
                    "tokens": sum(len(tokens) for _, tokens, _, _ in items), "read_log_s": read_s,
                    "restore_call_s": restore_s,
                    "shard_restore_s": reply["restored"]["s"], "rebuild_forwards": reply["restored"]["forwards"],
                    "total_s": read_s + restore_s})
        print(f"move of a stream with {length:>6} logged ticks: read {read_s:.3f} s + restore {restore_s:.3f} s "
              f"(shard-side {reply['restored']['s']:.3f} s, {reply['restored']['forwards']} forwards)", flush=True)
    pipeline.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--moves", type=int, nargs="+", default=[1000, 4000, 16000, 64000])
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    require_extra("ray", "ray")
    ray = ray_module()
    os.environ.setdefault("RAY_worker_niceness", "0")  # Ray starts workers at nice 15: a shared machine starves them
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    source = market(STREAMS, seed=0)
    warmup = source.next_batch(200)
    ticks = source.next_batch(args.ticks)
    runs: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for _ in range(args.repeats):
            for shards in (1, 2):
                run = throughput(shards, ticks, warmup, root)
                runs[shards].append(run)
                print(f"{shards} shard(s): {run['ticks_per_s']:8.0f} ticks/s ({run['answers']} answers; cores used: "
                      f"front door {run['front_door_cpu_share']:.2f}, shards {run['shards_cores']:.2f}, other "
                      f"processes {run['others_cores']:.2f}; streams per shard {run['streams_per_shard']})", flush=True)
        move_results = moves(args.moves, root)
    ray.shutdown()
    best = {n: max(r["ticks_per_s"] for r in rs) for n, rs in runs.items()}
    speedup = best[2] / best[1]
    path = write_json("shards", {
        "speedup_2_over_1": speedup, "ticks_per_s": {"1": best[1], "2": best[2]}, "runs": runs,
        "load": {"streams": STREAMS, "message_ticks": MESSAGE_TICKS, "ticks": args.ticks,
                 "backlog_tokens": BACKLOG_TOKENS, "queries": EXAMPLE_QUERIES.name,
                 "model": "built-in tick model", "torch_threads_per_shard": 1, "ray_cpus": 2,
                 "worker_niceness": os.environ["RAY_worker_niceness"]},
        "moves": move_results, "machine": machine(),
        "command": "python -m benchmarks.shards",
    }, output_dir(args))
    print(f"shards: {best[1]:.0f} ticks/s at 1 shard, {best[2]:.0f} at 2: speedup_2_over_1 = {speedup:.2f}x  [{path}]")


if __name__ == "__main__":
    main()
