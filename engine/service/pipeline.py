"""TickPipeline: ticks in -> validated, tokenized per stream -> the engine; each step's answers returned.

The service glue shared by the ZeroMQ server and the in-process backtest, so
both run the very same path. Like server.py and cli.py it may import
connectors/ and queries/ (DESIGN: service glue sits above both); it is a file
of its own because two front ends use it.
"""

from __future__ import annotations

import ctypes
import gc
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from connectors.builtin import load_builtin_codec
from connectors.codec import BinnedCodec, Codec, TextCodec, TextCodecConfig
from connectors.encoder import EncodedTick, Ingested, StreamEncoders
from connectors.ticks import InvalidTick, Tick
from engine.engine import Engine
from engine.jobs import JobOutcome
from engine.models import load_model
from engine.runner import ModelRunner
from engine.scheduler import AdmissionRefused, StepReport
from engine.service.config import TORCH_DTYPES, ConfigError, ServiceConfig
from engine.service.durability import DataDir
from engine.service.ticklog import LogWriteError
from queries.cache import Answer, AnswerCache
from queries.evaluate import compile_query
from queries.flash import FlashQueries
from queries.limits import QueryLimits
from queries.registry import Registry
from queries.spec import dump_queries



def build_codec(config: ServiceConfig) -> Codec:
    """BinnedCodec for the built-in model (or a checkpoint that ships codec.json), else a TextCodec."""
    path = config.model.path
    kind = config.codec.kind
    if kind == "auto":
        kind = "binned" if path is None or (Path(path) / "codec.json").is_file() else "text"
    if kind == "binned":
        return load_builtin_codec() if path is None else BinnedCodec.from_json((Path(path) / "codec.json").read_text())
    if path is None:
        raise ConfigError("codec.kind: text needs model.path (a Hugging Face checkpoint with a tokenizer)")
    from transformers import AutoTokenizer  # local files only: no hub

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    defaults = TextCodecConfig()
    return TextCodec(tokenizer, TextCodecConfig(
        trade_template=config.codec.trade_template or defaults.trade_template,
        quote_template=config.codec.quote_template or defaults.quote_template,
    ))


class TickPipeline:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        if config.model.threads is not None:
            torch.set_num_threads(config.model.threads)
        model = load_model(config.model.path, TORCH_DTYPES[config.model.dtype], config.model.device, config.model.weights)
        self.codec = build_codec(config)
        if self.codec.vocab_size > model.config.vocab_size:
            raise ConfigError(f"codec vocabulary ({self.codec.vocab_size}) exceeds the model's ({model.config.vocab_size})")
        self.runner = ModelRunner(model, config.kv.spec())
        limits = config.limits
        self.registry = Registry(self.codec.questions, QueryLimits(
            limits.max_yaml_bytes, limits.max_yaml_nodes, limits.max_queries, limits.max_topic_bytes),
            answerable=lambda spec: compile_query(spec, self.codec))
        self.cache = AnswerCache()
        self.flash = FlashQueries(self.registry, self.cache, self.codec, config.model.model_id)
        self.engine = Engine(self.runner, config.scheduler, self.flash)
        self.encoders = StreamEncoders(self.codec, self.runner.config.vocab_size, config.limits.max_message_bytes,
                                       max_item_tokens=self.engine.scheduler.max_chunk_tokens,
                                       max_stream_bytes=config.limits.max_stream_bytes)
        self.ticks_in = 0
        self.rejected: Counter[str] = Counter()
        self.data = DataDir(config.log) if config.log.dir else None
        if self.data is not None and self.data.queries_path.is_file():  # what was registered before a restart
            self.registry.register_file(self.data.queries_path)
        elif config.queries:
            self.registry.register_file(config.queries)
        if self.data is not None:
            self.save_queries()
            self.ticks_in = self.data.replay(self.encoders, self.engine, self._enqueue)

    def ingest(self, tick: Tick) -> None:
        """Accept one validated tick: ordering check, codec, queue for its session. Raises InvalidTick,
        and then the stream's ordering and codec state are as they were."""
        self.encoders.ingest(tick, self._submit)
        self.ticks_in += 1

    def ingest_message(self, data: bytes) -> list[dict[str, Any]]:
        """Decode a wire message (one tick or a list) and ingest the good ticks; returns the rejections."""
        return self._counted(self.encoders.ingest_message(data, self._submit))

    def ingest_tokenized(self, data: bytes) -> list[dict[str, Any]]:
        """Already-tokenized ticks from an out-of-process connector: a msgpack list of
        ``{stream: str, ts: int ns, tokens: [int], ticks: int}``; returns the rejections."""
        return self._counted(self.encoders.ingest_tokenized(data, self._submit))

    def _submit(self, item: EncodedTick) -> None:
        """Every check, then the log, then the engine: the log holds exactly the accepted items."""
        if self.behind and self.config.limits.when_behind == "shed":
            raise InvalidTick("overloaded", f"the engine is behind: {self.engine.scheduler.pending_tokens()} tokens "
                                            f"pending (limits.max_backlog_tokens, when_behind: shed)", item.stream)
        if self.data is not None:
            problem = self.engine.scheduler.admission_problem(item.stream)
            if problem is not None:
                raise InvalidTick("stream_refused", problem, item.stream)
            try:
                self.data.append(item)
            except LogWriteError as e:
                raise InvalidTick("log_unavailable", f"{e} (the tick was not accepted)", item.stream) from None
        self._enqueue(item)

    def _enqueue(self, item: EncodedTick) -> None:
        try:
            self.engine.submit(item.stream, item.tokens, item.ts, item.ticks)
        except AdmissionRefused as e:
            raise InvalidTick("stream_refused", str(e), item.stream) from None

    def _counted(self, result: Ingested) -> list[dict[str, Any]]:
        self.ticks_in += result.ticks
        for r in result.rejections:
            self.rejected[r.reason] += 1
        return [r.to_wire() for r in result.rejections]

    @property
    def behind(self) -> bool:
        """More accepted tokens wait for a forward than limits.max_backlog_tokens."""
        return self.engine.scheduler.pending_tokens() > self.config.limits.max_backlog_tokens

    def expire_idle(self) -> list[str]:
        """Drop streams idle past scheduler.stream_idle_s from every layer; returns their names."""
        expired = self.engine.scheduler.expire_idle()
        for stream in expired:
            self.encoders.drop(stream)
            self.registry.drop_stream(stream)
            self.cache.drop_stream(stream)
        if expired:
            _return_memory()
        return expired

    def save_queries(self) -> None:
        """Keep the registered queries in the data directory (after every register/unregister)."""
        if self.data is not None:
            self.data.save_queries(dump_queries(self.registry.list()))

    def close(self) -> None:
        if self.data is not None:
            self.data.close()

    def step(self) -> StepReport | None:
        """One engine forward; its answers (and failed jobs, counted here) are the caller's to publish."""
        report = self.engine.step()
        if report is not None:
            self._count_failures(report.outcomes)
        return report

    def run_until_idle(self) -> list[Answer]:
        """Step until nothing is pending; the answers produced, in order."""
        outcomes = self.engine.run_until_idle()
        self._count_failures(outcomes)
        return [o.answer for o in outcomes if o.answer is not None]

    def _count_failures(self, outcomes: list[JobOutcome]) -> None:
        self.flash.stats.errors += sum(1 for o in outcomes if o.error is not None)

    def stats(self) -> dict[str, Any]:
        scheduler = self.engine.scheduler
        return {
            "ticks_in": self.ticks_in,
            "rejected": dict(self.rejected),
            "answers_out": self.flash.stats.answers,
            "query_errors": self.flash.stats.errors,
            "freshness_ms": self.flash.freshness_ms(),
            "pending_tokens": scheduler.pending_tokens(),
            "behind": self.behind,
            **scheduler.kv_summary(),
            "scheduler": vars(scheduler.stats),
            "runner": vars(self.runner.stats),
            "queries": len(self.registry.list()),
            "model": self.config.model.model_id,
            **({"log": self.data.stats()} if self.data is not None else {}),
        }


def _return_memory() -> None:
    """Hand freed heap back to the OS after streams expire (glibc keeps it otherwise; elsewhere a no-op)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
