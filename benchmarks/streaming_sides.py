"""The sides of the streaming workload (benchmarks/streaming.py): flashtick's engine loop, llama.cpp
as a careful user runs it, and transformers stateless, behind one small Driver interface."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import torch

from connectors.codec import BinnedCodec
from connectors.ticks import Tick
from engine.context_rolls import roll_points
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.probe_answers import CompiledQuery, answer_value, compile_query
from queries.registry import Registry

QUESTIONS = ("direction_20", "volatility_50", "move_bps_50")
QUERIES_YAML = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: vol50, streams: ["*"], question: volatility_50, kind: choice, trigger: batch}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: batch}
"""

KEEP_FRACTION = 0.5  # the scheduler's default: keep the most recent half of the window on a roll
QUESTION_ROOM = 4  # positions kept free for the (1-token) questions: the scheduler's probe_reserve


class Window(NamedTuple):
    """The context policy every side applies: roll when the next ticks would pass ``roll_at`` tokens,
    keeping the most recent ``keep`` (from a tick boundary); ``positions`` is the model's limit."""

    positions: int
    roll_at: int
    keep: int


# -- the sides ------------------------------------------------------------------------------------

class Driver(Protocol):
    name: str
    # "flashtick"; "stateful": a peer keeping each stream's KV between ticks and questions;
    # "conventional": a peer serving one request per question over the context, as engines are served
    kind: str

    def reset(self, history: dict[str, list[Tick]]) -> None:
        """Fresh state holding ``history`` for every stream (untimed)."""

    def step(self, ticks: list[Tick]) -> dict[str, float]:
        """Ingest ``ticks`` and answer every due question; returns, per stream answered, the seconds
        since the call began at which its answers were ready."""

    def answers(self) -> dict[tuple[str, str], dict]:
        """The latest answer per (query, stream)."""


class TokenLog:
    """One stream's committed tokens with the engine scheduler's window rule, for the peers
    (llama.cpp, stateless) that keep their own context: a roll keeps the tokens from the first tick
    boundary at or after ``len + incoming - keep`` and re-evaluates them, with the stream's own roll
    point and keep (engine.context_rolls.roll_points), so every side cuts where flashtick does."""

    def __init__(self, window: Window, stream: str, limit: int | None = None) -> None:
        first, self.keep = roll_points(stream, window.roll_at, window.keep)
        self.limit = min(window.roll_at, limit or window.roll_at)  # a side that needs room of its own rolls sooner
        self.window = min(first, self.limit)  # the first roll comes early, the later ones at the window's
        self.tokens: list[int] = []
        self.boundaries: list[int] = []

    def take(self, chunks: list[list[int]]) -> tuple[list[list[int]], bool]:
        """Split off the chunks the next advance takes (those that fit the window; the first always),
        rolling first when they overflow it. Returns (chunks taken, rolled)."""
        taken, room = [], self.window - len(self.tokens)
        while chunks and (not taken or len(chunks[0]) <= room):
            room -= len(chunks[0])
            taken.append(chunks.pop(0))
        incoming = sum(len(c) for c in taken)
        rolled = len(self.tokens) + incoming > self.window
        if rolled:
            target = len(self.tokens) + incoming - self.keep
            cut = next((b for b in self.boundaries if b >= target and b > 0), len(self.tokens))
            self.tokens = self.tokens[cut:]
            self.boundaries = [b - cut for b in self.boundaries if b >= cut]
            self.window = self.limit
        for chunk in taken:
            self.boundaries.append(len(self.tokens))
            self.tokens += chunk
        return taken, rolled


def compiled_queries(codec: BinnedCodec) -> list[CompiledQuery]:
    registry = Registry(questions=codec.questions)
    registry.register(QUERIES_YAML)
    return [compile_query(spec, codec) for spec in registry.list()]


class FlashtickDriver:
    """flashtick's engine loop: TickPipeline.ingest per tick, engine.step() until idle (one batched
    forward advances every stream and evaluates all due questions as probes)."""

    name = "flashtick"
    kind = "flashtick"

    def __init__(self, checkpoint: Path, streams: int, window: Window, max_batch_tokens: int = 16384,
                 dtype: str = "float32", device: str = "cpu", weights: str | None = None) -> None:
        cells = streams * (window.positions + 64) + 256
        self.config = ServiceConfig.from_dict({
            # torch's default threads (2 here), as every side of this benchmark was measured with
            "model": {"path": str(checkpoint), "dtype": dtype, "device": device, "threads": None, "weights": weights},
            "kv": {"cells": cells, "block_size": 32},
            "scheduler": {"max_batch_tokens": max_batch_tokens, "max_batch_streams": 1024,
                          "window": window.positions, "probe_reserve": window.positions - window.roll_at,
                          "keep_fraction": window.keep / window.positions}})
        self.pipeline: TickPipeline | None = None

    def reset(self, history: dict[str, list[Tick]]) -> None:
        self.pipeline = None  # the last trial's, gone before the next one is built
        self.pipeline = TickPipeline(self.config)
        self.pipeline.registry.register(QUERIES_YAML)
        for ticks in history.values():
            for tick in ticks:
                self.pipeline.ingest(tick)
        self.pipeline.engine.run_until_idle()

    def step(self, ticks: list[Tick]) -> dict[str, float]:
        start = time.perf_counter()
        for tick in ticks:
            self.pipeline.ingest(tick)
        done: dict[str, float] = {}
        while (report := self.pipeline.engine.step()) is not None:
            elapsed = time.perf_counter() - start
            done.update((p.stream, elapsed) for p in report.advanced)
        return done

    def answers(self) -> dict[tuple[str, str], dict]:
        cache = self.pipeline.cache
        streams = self.pipeline.engine.scheduler.streams
        keys = [(spec.name, s) for spec in self.pipeline.registry.list() for s in streams]
        # the model's own distribution (answers.adapt mixes what is published with the stream's outcomes,
        # queries/adapt.py): the peers compute the model's, so that is what answers are compared on
        return {k: {**a.value, "probs": a.value.get("model_probs", a.value["probs"])}
                for k in keys if (a := cache.get(*k)) is not None}

    def read_latency_ns(self, reps: int = 200_000) -> dict[str, float]:
        """Cached-answer read: AnswerCache.get over every (query, stream), as a subscriber would."""
        cache = self.pipeline.cache
        keys = list(self.answers())
        get = cache.get
        for q, s in keys[:1000]:
            get(q, s)
        samples = []
        for _ in range(5):
            start = time.perf_counter_ns()
            for i in range(reps):
                q, s = keys[i % len(keys)]
                get(q, s)
            samples.append((time.perf_counter_ns() - start) / reps)
        return {"mean_ns": float(min(samples)), "reps": reps}


class _PerStreamDriver:
    """Shared by the peers that handle one stream at a time: encode, take chunks by the window rule,
    advance the stream's context, ask the 3 questions, in arrival order of the streams."""

    name = "peer"

    def __init__(self, codec: BinnedCodec, window: Window) -> None:
        self.codec, self.window = codec, window
        self.roll_limit: int | None = None  # positions a side's own needs leave for ticks, when fewer
        self.queries = compiled_queries(codec)
        self.latest: dict[tuple[str, str], dict] = {}
        self.logs: dict[str, TokenLog] = {}
        self.states: dict[str, object] = {}

    def reset(self, history: dict[str, list[Tick]]) -> None:
        self.latest.clear()
        self.logs = {s: TokenLog(self.window, s, self.roll_limit) for s in history}
        self.states = {s: self.codec.new_state() for s in history}
        for stream, ticks in history.items():
            chunks = [self.codec.encode(t, self.states[stream]) for t in ticks]
            while chunks:
                self.logs[stream].take(chunks)
            self.rebuild(stream)

    def _encode(self, ticks: list[Tick]) -> dict[str, list[list[int]]]:
        """Each tick's tokens, per stream in arrival order of the streams (a dict keeps it)."""
        pending: dict[str, list[list[int]]] = {}
        for tick in ticks:
            pending.setdefault(tick.stream, []).append(self.codec.encode(tick, self.states[tick.stream]))
        return pending

    def step(self, ticks: list[Tick]) -> dict[str, float]:
        start = time.perf_counter()
        pending = self._encode(ticks)
        done = {}
        for stream, chunks in pending.items():
            while chunks:
                before = len(self.logs[stream].tokens)
                taken, rolled = self.logs[stream].take(chunks)
                if rolled:
                    self.rebuild(stream)
                else:
                    self.append(stream, before, [t for c in taken for t in c])
                for query in self.queries:
                    self.latest[(query.spec.name, stream)] = answer_value(query, [self.ask(stream, query.question)])
            done[stream] = time.perf_counter() - start
        return done

    def answers(self) -> dict[tuple[str, str], dict]:
        return dict(self.latest)

    # the peer-specific part
    def rebuild(self, stream: str) -> None: ...
    def append(self, stream: str, before: int, tokens: list[int]) -> None: ...
    def ask(self, stream: str, question: tuple[int, ...]) -> torch.Tensor: ...  # (1, vocab) last row


class LlamaCppDriver(_PerStreamDriver):
    """llama.cpp as a careful user runs it: one Llama per stream on the same mmap'd GGUF (weights
    shared), KV kept; new ticks are eval'd at the end of the context, each question is eval'd and
    rolled back (``n_tokens = k``); a roll re-evaluates the kept tokens."""

    name = "llama.cpp"
    kind = "stateful"

    def __init__(self, codec: BinnedCodec, window: Window, gguf_path: Path, n_ctx: int, n_threads: int = 2) -> None:
        super().__init__(codec, window)
        from benchmarks.gguf_export import open_llama

        self.open = lambda: open_llama(gguf_path, n_ctx=n_ctx, n_threads=n_threads)
        self.llms: dict[str, object] = {}

    def reset(self, history: dict[str, list[Tick]]) -> None:
        for stream in history:
            if stream not in self.llms:
                self.llms[stream] = self.open()
        super().reset(history)

    def rebuild(self, stream: str) -> None:
        llm = self.llms[stream]
        llm.n_tokens = 0
        llm.eval(self.logs[stream].tokens)

    def append(self, stream: str, before: int, tokens: list[int]) -> None:
        llm = self.llms[stream]
        llm.n_tokens = before
        llm.eval(tokens)

    def ask(self, stream: str, question: tuple[int, ...]) -> torch.Tensor:
        llm = self.llms[stream]
        base = llm.n_tokens
        llm.eval(list(question))
        row = last_logits(llm)
        llm.n_tokens = base  # roll the question back; the next eval overwrites its KV
        return row


class LlamaCppApiDriver(_PerStreamDriver):
    """llama.cpp as it is served: one completion request per question, ``create_completion(context +
    question, max_tokens=1)``, with llama-cpp-python's prompt cache (``LlamaRAMCache``). The request
    reuses the longest common prefix of the KV it holds (the context, after the previous question)
    and evaluates the rest: new ticks plus the question. One ``Llama`` per stream on the shared mmap'd
    GGUF, so no stream evicts another's prefix (the most favourable way to serve it)."""

    name = "llama.cpp completion API"
    kind = "conventional"

    def __init__(self, codec: BinnedCodec, window: Window, gguf_path: Path, n_ctx: int, n_threads: int = 2) -> None:
        super().__init__(codec, window)
        from benchmarks.gguf_export import open_llama

        self.open = lambda: open_llama(gguf_path, n_ctx=n_ctx, n_threads=n_threads)
        self.llms: dict[str, object] = {}

    def reset(self, history: dict[str, list[Tick]]) -> None:
        import llama_cpp

        for stream in history:  # a fresh prompt cache per run
            self.llms[stream] = self.open()
            self.llms[stream].set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=256 << 20))
        super().reset(history)

    def rebuild(self, stream: str) -> None:  # the next request finds no common prefix and prefills
        pass

    def append(self, stream: str, before: int, tokens: list[int]) -> None:  # the next request evaluates them
        pass

    def ask(self, stream: str, question: tuple[int, ...]) -> torch.Tensor:
        llm = self.llms[stream]
        llm.create_completion(self.logs[stream].tokens + list(question), max_tokens=1, temperature=0.0)
        return last_logits(llm)  # the prompt's last row: max_tokens=1 never evaluates the sampled token


class _VllmSubprocess:
    """vLLM in its own virtualenv, as a subprocess (benchmarks/vllm_peer.py in a serving mode) fed JSON
    lines; our interpreter never imports it."""

    def _start(self, mode: str, checkpoint: Path, python: str, threads: int, cores: int | None = None) -> None:
        """``cores``: pin vLLM's whole process tree (frontend, engine core, workers) to the first that many
        CPUs, so it gets what the in-process sides get; None: the machine."""
        import os
        import subprocess

        script = Path(__file__).with_name("vllm_peer.py")
        pin = (lambda: os.sched_setaffinity(0, set(range(cores)))) if cores else None  # inherited by children
        self.proc = subprocess.Popen([python, str(script), mode, str(checkpoint), str(threads)], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     preexec_fn=pin)
        self._read("READY")

    def _call(self, message: dict) -> dict:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._read("RESULT "))

    def _read(self, prefix: str) -> str:
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix):]
        raise RuntimeError(f"the vLLM subprocess exited (code {self.proc.wait()}) before sending {prefix!r}")

    def helper_cpu_s(self) -> float:
        """CPU seconds used so far by the vLLM subprocess and its descendants (its engine core, workers),
        so that the benchmark does not count them as other processes' load."""
        return sum(_proc_cpu_s(pid) for pid in _descendants(self.proc.pid))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class VllmApiDriver(_VllmSubprocess, _PerStreamDriver):
    """vLLM as it is served: one request per question over the stream's retained context, prefix caching on
    (32-token blocks), and, as a server would get them, all of a batch's requests at once (one
    ``LLM.generate`` call: vLLM batches them)."""

    name = "vLLM prefix cache"
    kind = "conventional"

    def __init__(self, codec: BinnedCodec, window: Window, checkpoint: Path, python: str, threads: int = 2,
                 cores: int | None = None) -> None:
        _PerStreamDriver.__init__(self, codec, window)
        self._start("--serve", checkpoint, python, threads, cores)

    def reset(self, history: dict[str, list[Tick]]) -> None:
        """The untimed rebuild the other peers get: one request per stream holding its context fills vLLM's
        prefix cache (and warms its batch shapes) before the trial's first timed batch."""
        super().reset(history)
        self._ask([log.tokens + [0] for log in self.logs.values()])

    def _ask(self, prompts: list[list[int]]) -> list[list[float]]:
        return self._call({"prompts": prompts})["logprobs"]

    def step(self, ticks: list[Tick]) -> dict[str, float]:
        start = time.perf_counter()
        pending = self._encode(ticks)
        for stream, chunks in pending.items():
            while chunks:  # the window rule; a roll needs nothing here: the next requests carry the kept tokens
                self.logs[stream].take(chunks)
        asked = [(stream, query) for stream in pending for query in self.queries]
        prompts = [self.logs[stream].tokens + list(query.question) for stream, query in asked]
        rows = self._ask(prompts)
        for (stream, query), row in zip(asked, rows):
            self.latest[(query.spec.name, stream)] = answer_value(query, [torch.tensor([row])])
        elapsed = time.perf_counter() - start
        return {stream: elapsed for stream in pending}


class VllmSessionDriver(_VllmSubprocess, _PerStreamDriver):
    """vLLM's stateful API: one StreamingInput session per stream (``AsyncLLM.generate`` fed by an async
    generator), vLLM keeping the session's KV between chunks. A batch's new ticks and its first question
    go in as one chunk, each further question as its own; every stream's session runs concurrently, so
    vLLM batches them. vLLM cannot roll a chunk back: each question and its sampled token stay in the
    session's context (6 tokens per batch here), so a session fills its window sooner than the tick log
    says and is reopened with the kept ticks when the next chunks would not fit (its tick log rolls 6
    positions early, so that the kept ticks and a batch's questions always fit a fresh one); and its
    answers after a session's first differ from the other sides' (their context holds the questions).
    ``answers`` therefore returns none for the cross-check; ``logit_check`` compares each fresh session's
    first answer, the one over exactly the ticks, with transformers' on the same tokens."""

    name = "vLLM StreamingInput session"
    kind = "stateful"

    def __init__(self, codec: BinnedCodec, window: Window, checkpoint: Path, python: str, threads: int = 2,
                 cores: int | None = None) -> None:
        _PerStreamDriver.__init__(self, codec, window)
        # a session must hold its ticks plus every question and sampled token of a batch: its tick log rolls
        # that much sooner than the other sides' (at 506 instead of 508 of 512 positions for 3 questions)
        self.extra = sum(len(q.question) + 1 for q in self.queries)
        self.roll_limit = window.positions - self.extra
        self.checkpoint = checkpoint
        self.session_tokens: dict[str, int] = {}  # tokens in each stream's open session, questions included
        self.first_rows: dict[str, tuple[list[int], list[float]]] = {}  # a fresh session's exact first answer
        self._start("--serve-sessions", checkpoint, python, threads, cores)

    def reset(self, history: dict[str, list[Tick]]) -> None:
        super().reset(history)
        self.session_tokens = {}
        self._run({stream: 0 for stream in history})

    def step(self, ticks: list[Tick]) -> dict[str, float]:
        start = time.perf_counter()
        new: dict[str, int] = {}
        for stream, chunks in self._encode(ticks).items():
            before = len(self.logs[stream].tokens)
            while chunks:
                _, rolled = self.logs[stream].take(chunks)
                before = 0 if rolled else before
            new[stream] = len(self.logs[stream].tokens) - before
        self._run(new)
        elapsed = time.perf_counter() - start
        return {stream: elapsed for stream in new}

    def _run(self, new: dict[str, int]) -> None:
        """Per stream, its ``new`` latest tokens then the questions, in its session (reopened with the
        whole kept context when they would not fit or the tick log rolled); one round trip for all."""
        questions = [list(q.question) for q in self.queries]
        extra = self.extra  # each question and its sampled token stay in the session
        items = []
        for stream, count in new.items():
            tokens = self.logs[stream].tokens
            reopen = (stream not in self.session_tokens or count >= len(tokens)
                      or self.session_tokens[stream] + count + extra > self.window.positions)
            head = tokens if reopen else tokens[len(tokens) - count:]
            self.session_tokens[stream] = (0 if reopen else self.session_tokens[stream]) + len(head) + extra
            items.append({"stream": stream, "new": reopen, "chunks": [head + questions[0]] + questions[1:]})
        rows = self._call({"items": items})["rows"]
        for item, stream_rows in zip(items, rows):
            stream = item["stream"]
            for query, row in zip(self.queries, stream_rows):
                self.latest[(query.spec.name, stream)] = answer_value(query, [torch.tensor([row])])
            if item["new"]:
                self.first_rows[stream] = (item["chunks"][0], stream_rows[0])

    def answers(self) -> dict[tuple[str, str], dict]:
        return {}  # over contexts holding earlier questions: not comparable with the other sides'

    def logit_check(self, streams: int = 4) -> float:
        """Largest |log-prob difference| between vLLM's first answer of a fresh session and transformers'
        log-softmax over the same tokens, on ``streams`` streams' latest fresh sessions."""
        from transformers import LlamaForCausalLM

        hf = LlamaForCausalLM.from_pretrained(self.checkpoint, dtype=torch.float32).eval()
        worst = 0.0
        for tokens, row in list(self.first_rows.values())[:streams]:
            with torch.inference_mode():
                logits = hf(torch.tensor([tokens]), logits_to_keep=1).logits[0, -1].float()
            ours = torch.log_softmax(logits, dim=-1)
            theirs = torch.tensor(row)
            finite = torch.isfinite(theirs)  # vLLM returns the top log-probs; the rest are -inf here
            worst = max(worst, float((ours[finite] - theirs[finite]).abs().max()))
        return worst


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from /proc (Linux; elsewhere just ``pid``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo += children.get(out[-1], [])
    return out


def _proc_cpu_s(pid: int) -> float:
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def last_logits(llm) -> torch.Tensor:  # (1, vocab) fp32, a copy
    import llama_cpp

    pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return torch.from_numpy(np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy())[None]


class StatelessDriver(_PerStreamDriver):
    """transformers, stateless: every answer re-prefills the stream's whole retained context plus the
    question (what a request-per-answer engine without a prefix cache computes)."""

    name = "transformers stateless"
    kind = "conventional"

    def __init__(self, codec: BinnedCodec, window: Window, checkpoint: Path, dtype: torch.dtype = torch.float32,
                 device: str = "cpu") -> None:
        super().__init__(codec, window)
        from transformers import LlamaForCausalLM

        self.hf = LlamaForCausalLM.from_pretrained(checkpoint, dtype=dtype).to(device).eval()
        self.device = device

    def ask(self, stream: str, question: tuple[int, ...]) -> torch.Tensor:
        ids = torch.tensor([self.logs[stream].tokens + list(question)], device=self.device)
        with torch.inference_mode():
            return self.hf(ids, logits_to_keep=1).logits[0].float().cpu()


