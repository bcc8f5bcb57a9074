"""TickPipeline: ticks in -> validated, tokenized per stream -> the engine; answers out through a callback.

The service glue shared by the ZeroMQ server and the in-process backtest, so
both run the very same path. Like server.py and cli.py it may import
connectors/ and queries/ (DESIGN: service glue sits above both); it is a file
of its own because two front ends use it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from connectors.builtin import load_builtin_codec
from connectors.codec import BinnedCodec, Codec, TextCodec, TextCodecConfig
from connectors.ticks import InvalidTick, OrderingGuard, Tick, decode
from engine.service.config import TORCH_DTYPES, ConfigError, ServiceConfig
from engine.engine import Engine
from engine.models import load_model
from engine.runner import ModelRunner
from engine.scheduler import AdmissionRefused
from queries.cache import Answer, AnswerCache
from queries.flash import FlashQueries
from queries.registry import Registry



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
    def __init__(self, config: ServiceConfig, publish: Callable[[Answer], None] | None = None) -> None:
        self.config = config
        model = load_model(config.model.path, TORCH_DTYPES[config.model.dtype], config.model.device)
        self.codec = build_codec(config)
        if self.codec.vocab_size > model.config.vocab_size:
            raise ConfigError(f"codec vocabulary ({self.codec.vocab_size}) exceeds the model's ({model.config.vocab_size})")
        self.runner = ModelRunner(model, config.kv.spec())
        self.registry = Registry(questions=self.codec.questions)
        self.cache = AnswerCache()
        self.flash = FlashQueries(self.registry, self.cache, self.codec, config.model.model_id, publish)
        self.engine = Engine(self.runner, config.scheduler, self.flash)
        self.guard = OrderingGuard()
        self.codec_states: dict[str, Any] = {}
        self.ticks_in = 0
        self.rejected: Counter[str] = Counter()
        if config.queries:
            self.registry.register_file(config.queries)

    def ingest(self, tick: Tick) -> None:
        """Accept one validated tick: ordering check, codec, queue for its session. Raises InvalidTick."""
        self.guard.check(tick)
        state = self.codec_states.get(tick.stream)
        if state is None:
            state = self.codec_states[tick.stream] = self.codec.new_state()
        try:
            self.engine.submit(tick.stream, self.codec.encode(tick, state), tick.ts)
        except AdmissionRefused as e:
            raise InvalidTick("stream_refused", str(e)) from None
        self.ticks_in += 1

    def ingest_message(self, data: bytes) -> list[dict[str, Any]]:
        """Decode a wire message (one tick or a list) and ingest the good ticks; returns the rejections."""
        limit = self.config.limits.max_message_bytes
        if len(data) > limit:
            rejections = [{"index": -1, "reason": "oversize", "error": f"message of {len(data)} bytes > {limit}"}]
        else:
            decoded = decode(data, max_bytes=limit)
            rejections = [{"index": i, "reason": r, "error": r} for i, r in decoded.errors]
            bad = {i for i, _ in decoded.errors}
            good_indices = (i for i in range(len(decoded.ticks) + len(bad)) if i not in bad)
            for index, tick in zip(good_indices, decoded.ticks):
                try:
                    self.ingest(tick)
                except InvalidTick as e:
                    rejections.append({"index": index, "reason": e.reason, "error": str(e), "stream": tick.stream})
        for r in rejections:
            self.rejected[r["reason"]] += 1
        return rejections

    def ingest_tokenized(self, data: bytes) -> list[dict[str, Any]]:
        """Already-tokenized ticks from an out-of-process connector: a msgpack list of
        ``{stream: str, ts: int ns, tokens: [int], ticks: int}``."""
        try:
            items = msgpack.unpackb(data, raw=False, strict_map_key=True)
        except Exception:  # msgpack raises several unrelated types on garbage
            items = None
        if not isinstance(items, list):
            self.rejected["bad_msgpack"] += 1
            return [{"index": -1, "reason": "bad_msgpack", "error": "tokenized message must be a msgpack list"}]
        rejections = []
        vocab = self.runner.config.vocab_size
        for index, item in enumerate(items):
            problem = _tokenized_problem(item, vocab)
            if problem is None and (last := self.guard.last_ts.get(item["stream"])) is not None and item["ts"] < last:
                problem = "ts_backwards"
            if problem:
                rejections.append({"index": index, "reason": problem, "error": problem})
                self.rejected[problem] += 1
                continue
            self.guard.last_ts[item["stream"]] = item["ts"]
            self.engine.submit(item["stream"], item["tokens"], item["ts"], item.get("ticks", 1))
            self.ticks_in += item.get("ticks", 1)
        return rejections

    def stats(self) -> dict[str, Any]:
        scheduler = self.engine.scheduler
        return {
            "ticks_in": self.ticks_in,
            "rejected": dict(self.rejected),
            "answers_out": self.flash.stats.answers,
            "freshness_ms": self.flash.freshness_ms(),
            "pending_tokens": scheduler.pending_tokens(),
            **scheduler.kv_summary(),
            "scheduler": vars(scheduler.stats),
            "runner": vars(self.runner.stats),
            "queries": len(self.registry.list()),
            "model": self.config.model.model_id,
        }


def _tokenized_problem(item: Any, vocab: int) -> str | None:
    if not isinstance(item, dict) or set(item) - {"stream", "ts", "tokens", "ticks"}:
        return "unknown_field" if isinstance(item, dict) else "not_a_map"
    if not isinstance(item.get("stream"), str) or not item["stream"]:
        return "missing_stream"
    if "/" in item["stream"]:
        return "bad_stream"
    if type(item.get("ts")) is not int:
        return "ts_not_int"
    tokens = item.get("tokens")
    if not isinstance(tokens, list) or not tokens or any(type(t) is not int or not 0 <= t < vocab for t in tokens):
        return "bad_tokens"
    if type(item.get("ticks", 1)) is not int or item.get("ticks", 1) < 1:
        return "wrong_type"
    return None
