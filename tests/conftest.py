"""Shared builders: tiny seeded Hugging Face models and engines over them (no downloads), the
location of the real market data beside the repository, and a server serving on a thread."""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import importlib.machinery
import os
import re
import signal
import sys
import threading
import time
import weakref
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# torch, transformers and the engine are imported where a helper needs them, not here: importing them took ~26 s
# of every test file's run at a loaded machine's pace, before its first test, even a file of CSV readers alone
if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from connectors.replay import FileReplay
    from engine.engine import Engine
    from engine.runner import ModelRunner
    from engine.scheduler import SchedulerConfig


# numpy's OpenBLAS starts a thread per core that spin-waits for work: beside the other worker on CI's two cores, an
# evaluate's logistic baselines (small Newton solves) cost ~25% more CPU for it (1.9-2.1 s of CPU against 1.5 s with
# one thread, measured on a loaded machine). Set before anything imports numpy (nothing above does); the CLI
# children and the fork server inherit it; a value the caller set is kept
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


class _OneTorchThread(importlib.abc.MetaPathFinder):
    """Tiny models are latency-bound: one thread avoids OpenMP spin-waits when CI's two cores are busy. torch gets
    it as soon as anything imports it (a test module, a helper, the CLI run in-process), as when this file imported
    it itself; a process that never imports torch never pays for it."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once: from here on torch is found as usual
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def load_with_one_thread(module) -> None:
            load(module)
            module.set_num_threads(1)

        spec.loader.exec_module = load_with_one_thread
        return spec


if "torch" in sys.modules:  # (a plugin imported it first)
    sys.modules["torch"].set_num_threads(1)
else:
    sys.meta_path.insert(0, _OneTorchThread())


@pytest.fixture(autouse=True, scope="session")
def _state_home(tmp_path_factory):
    """`serve` keeps its logs under $XDG_STATE_HOME by default: the tests' go to a temporary one, never the
    user's (subprocesses inherit it)."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))


@pytest.fixture(autouse=True, scope="session")
def _libraries_frozen():
    """The worker's heap as collection leaves it (pytest, torch, transformers, polars, the test modules: ~500k
    objects) exempt from the cyclic collector, as the fork server's children have it (forked_cli_zygote.py), and
    as an app that forks its workers has its own: every full collection after, a backtest's or a server's
    (freeze_heap leaves a frozen heap as it is) and Python's own, walks only what the tests made since (~0.3-0.6 s
    of CPU each otherwise: ~5% of a run's in-process time)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()  # (a heap left frozen at the exit made nanobind report leaks)


_heap_thawed = threading.Event()


def heap_thawed_for_this_test() -> None:
    """The session's frozen heap thawed until the test ends, for a test that watches a freeze of ours."""
    gc.unfreeze()
    _heap_thawed.set()


@pytest.fixture(autouse=True)
def _libraries_frozen_again():
    """The session's heap frozen again after a test that thawed it (``serving(freeze_first=False)``)."""
    yield
    if _heap_thawed.is_set():
        _heap_thawed.clear()
        gc.collect()
        gc.freeze()


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_at_a_terminal():
    """Tests send SIGINT to the CLI as a terminal's Ctrl-C would, and the CLI keeps a SIGINT it was started
    ignoring ignored (a background job's). A suite run in the background of a non-interactive shell (`make test &`)
    inherits SIGINT ignored, and so did every CLI it started: its Ctrl-C tests failed there alone. Children
    exec'd from a process that handles SIGINT get the default action."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """`--dist loadgroup` sends the tests of one `xdist_group` to one worker, so a module fixture they share (a
    trained model, a backtest, an interpreter worker) is built once. pytest-xdist 3.8 marks a grouped test by
    suffixing `item._nodeid` with `@GROUP`, which pytest 9 no longer reads (the id is `item._id`): every group was
    ignored and such fixtures were built on both workers. The suffix is given here, as xdist gives it, when xdist
    has not (on a worker under loadgroup only)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:  # (an xdist or pytest that still agree never gets here)
            from _pytest.nodeid import coerce_node_id  # pytest 9: no public way to rename a collected item

            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


# Full collections (the oldest generation) ten times rarer in the test processes: their heap is pytest's, the
# collected test items' and every library's, which serve's freeze_heap would exempt in a product process but a
# Server stopping in a test thaws (heap_memory.thaw_heap), so each automatic full collection walked it all again:
# 17 of them took 2.2 s of 26 s of CPU over test_server, test_query_limits and test_replay_symbol_columns (8%),
# 1 after this; test_durability 15 taking 2.8 s of 64 s, 2 taking 0.2 s after. Explicit gc.collect() calls
# (freeze_heap, return_memory, tests) are unchanged.
gc.set_threshold(gc.get_threshold()[0], gc.get_threshold()[1], 10 * gc.get_threshold()[2])

# Our client objects, whose socket a test must close (or leave to a `with`) before it returns: one left open with
# a monitor nobody read blocked libzmq's I/O thread and hung a later test of the same worker (session 32; the
# monitor drain made that harmless, an open client is still a leak)
OUR_CLIENTS = ("ControlClient", "AnswerSubscriber", "GaplessSubscriber", "FeedClient", "HandshakeMonitor",
               "RejectWatch")


@pytest.fixture(autouse=True)
def _no_client_left_open(request):
    """Fails the test that leaves one of our clients open after it returns. pyzmq's own registry of the process
    context's sockets (the WeakSet Context.destroy closes) gives the sockets opened by the test and still open,
    in ~35 us; only when there are some, the objects holding them are looked up (gc.get_referrers, costly), and a
    socket of something else (a server the test leaves to a fixture, a raw socket) is not this check's."""
    import zmq

    live = getattr(zmq.Context.instance(), "_sockets", None)  # (absent from another pyzmq: no check)
    before = weakref.WeakSet(live or ())
    yield
    opened = [sock for sock in list(live or ()) if sock not in before and not sock.closed]
    if not opened:
        return
    # (no gc.collect first: a client held in a reference cycle stays open, its monitor unread by its owner, until a
    # full collection comes, which a long test's heap may put off for minutes)
    leaked = {sock: ours for sock in opened if not sock.closed
              if (ours := [owner for owner in _owners(sock) if type(owner).__name__ in OUR_CLIENTS])}
    held = sorted({f"{type(owner).__name__} to {owner.endpoint}" for ours in leaked.values() for owner in ours
                   if hasattr(owner, "endpoint")})  # (a HandshakeMonitor goes with its client, named here)
    for sock in leaked:  # closed here, so the tests after it run as if it had closed them
        sock.close(linger=0)
    if leaked:
        pytest.fail(f"{request.node.nodeid} left {len(held)} client(s) open: {'; '.join(held) or 'a monitor'} (close "
                    f"it in a finally, or use `with`)", pytrace=False)


def _owners(sock: object) -> list[object]:
    """The objects whose attributes hold ``sock``: a client and, for a monitor socket, its HandshakeMonitor (an
    object whose attributes are kept inline refers to it itself, one with a dict of them through the dict)."""
    refs = gc.get_referrers(sock)
    return [ref for ref in refs if not isinstance(ref, dict)] + [
        owner for ref in refs if isinstance(ref, dict)
        for owner in gc.get_referrers(ref) if getattr(owner, "__dict__", None) is ref]


# Real market data is not part of the repository or the package: it sits beside the checkout.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real market data); the test is skipped when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real market data not found at {SHARED_DATA} (../shared/data)")
    return SHARED_DATA


TINY = dict(vocab_size=160, hidden_size=64, intermediate_size=112, num_hidden_layers=2, max_position_embeddings=1024)

# family -> (transformers config class, model class, config overrides); the classes by name (transformers is
# imported by tiny_hf_model, when a test builds one)
FAMILIES = {
    # llama3 RoPE scaling with a small original window so the scaling actually bites
    "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_attention_heads=8, num_key_value_heads=2,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 128})),
    "llama2-linear-rope": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_attention_heads=4, num_key_value_heads=4, rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                                                                      "factor": 2.0})),
    # Llama's attention_bias biases q, k, v and o; mlp_bias gate, up and down; head_dim apart from hidden/heads
    "llama-biases": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, attention_bias=True, mlp_bias=True)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(num_attention_heads=8, num_key_value_heads=1,
                                                       sliding_window=None)),
    "qwen2-tied": ("Qwen2Config", "Qwen2ForCausalLM", dict(num_attention_heads=4, num_key_value_heads=2,
                                                      tie_word_embeddings=True)),
}


def tiny_hf_model(family: str = "llama3", seed: int = 0, **overrides) -> PreTrainedModel:
    import torch
    import transformers

    config_name, model_name, extra = FAMILIES[family]
    config_cls, model_cls = getattr(transformers, config_name), getattr(transformers, model_name)
    torch.manual_seed(seed)
    model = model_cls(config_cls(**{**TINY, **extra, **overrides})).eval()
    if (getattr(model.config, "attention_bias", False) or getattr(model.config, "mlp_bias", False)
            or family.startswith("qwen2")):
        # transformers initialises biases to zero; random ones make the bias path count
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.data.normal_(0, 0.5)
    return model


def tiny_runner(hf_model: PreTrainedModel, cells: int = 4096, block_size: int = 16) -> ModelRunner:
    from engine.kv_cache import CacheSpec
    from engine.models import from_hf_model
    from engine.runner import ModelRunner

    return ModelRunner(from_hf_model(hf_model), CacheSpec(block_size=block_size, cells=cells))


def tiny_engine(hf_model: PreTrainedModel, cells: int = 4096, block_size: int = 16,
                scheduler: SchedulerConfig | None = None) -> Engine:
    """An engine over the model, for driving sessions directly (advance/probe/run)."""
    from engine.engine import Engine

    return Engine(tiny_runner(hf_model, cells, block_size), scheduler)


def hf_logits(hf_model: PreTrainedModel, tokens: list[int]) -> torch.Tensor:  # (T, vocab)
    import torch

    with torch.no_grad():
        return hf_model(torch.tensor([tokens])).logits[0].float()


def engine_dir(root: Path, queries: str, cells: int = 8192, checkpoint: Path | None = None) -> Path:
    """`root` with what a CLI backtest test runs on: engine.yaml (the tiny tick model, kv.cells ``cells``: built
    under `root`, or ``checkpoint``, e.g. shared_tiny_tick_checkpoint's) and q.yaml (``queries``)."""
    checkpoint = checkpoint or tiny_tick_checkpoint(root / "model")
    (root / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: {cells}, block_size: 16}}\n")
    (root / "q.yaml").write_text(queries)
    return root


def drain(replay: FileReplay) -> list:
    """Every tick of a file replay, read to its end in batches as the engine's loop reads them."""
    out = []
    while not replay.done:
        out += replay.next_batch(100)
    return out


def ns(text: str) -> int:
    """An ISO 8601 time with its offset as int ns since the epoch (microsecond precision, as datetime holds)."""
    stamp = datetime.fromisoformat(text)
    return int(stamp.timestamp()) * 10**9 + stamp.microsecond * 1000


def tiny_tick_checkpoint(directory, seed: int = 0, codec_version: int = 1, **overrides):
    """A seeded random Llama sized for the BinnedCodec (spec `codec_version`), saved with its codec.json:
    a stand-in for the built-in model that tests can build in a second."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from connectors.codec import BinnedCodec, BinnedSpec

    codec = BinnedCodec(BinnedSpec(version=codec_version))
    torch.manual_seed(seed)
    config = LlamaConfig(**{**TINY, "vocab_size": codec.vocab_size, "num_attention_heads": 4,
                            "num_key_value_heads": 2, **overrides})
    LlamaForCausalLM(config).save_pretrained(directory)
    (directory / "codec.json").write_text(codec.to_json())
    return directory


TEXT_LINES = ["T buy 101.25 x 3 +12.0ms", "T sell 99.5 x 0.02 +0.0ms", "Q 101.20/101.30 5x7 +3.5ms",
              "Will the next trade print above the last one? Answer: yes no", "Summary of the last minute:",
              "0123456789 ./x+-?:", "the price went up and then down"]


def tiny_spm_tokenizer(legacy: bool = False):
    """A SentencePiece-style tokenizer as transformers converts Llama 2 / Mistral ones: BPE with byte fallback (a
    newline is the byte token <0x0A>, as in those vocabularies) and a space written before the start of a text,
    by a Metaspace pre-tokenizer (prepend_scheme first) or, with ``legacy``, a Prepend("▁") normalizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    spm = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    # Trained split at spaces: SentencePiece's pieces never hold a "▁" past their first character
    spm.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    spm.train_from_iterator(TEXT_LINES * 10, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                                 show_progress=False))
    if legacy:
        spm.pre_tokenizer = pre_tokenizers.Sequence([])
        spm.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    spm.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=spm, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


# Llama 3's pre-tokenizer regex (Qwen2's has the same `\s*[\r\n]+` rule): a run of newlines is one piece
LLAMA3_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                r"""\s*[\r\n]+|\s+(?!\S)|\s+""")


def tiny_llama3_tokenizer(more_texts: tuple[str, ...] = ()):
    """A byte-level BPE tokenizer as Llama 3's is built (its Split regex, then ByteLevel without its own regex),
    trained on lines with blank lines between them (and ``more_texts``), so "\n\n" is one token ("ĊĊ") as in
    Llama 3's vocabulary."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    texts = ["\n\n".join(TEXT_LINES)] * 10 + TEXT_LINES * 10 + list(more_texts)
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>")


def tiny_text_checkpoint(directory, family: str = "llama3", seed: int = 0, eos: bool = True, tokenizer=None,
                         **overrides):
    """A user's own Hugging Face text model, as save_pretrained writes it: a seeded random model of the family and
    ``tokenizer``, by default a small byte-level BPE tokenizer (with <s>/</s>/<pad> unless ``eos`` is false) trained
    on tick-like lines."""
    tokenizer = tokenizer or _tiny_byte_level_tokenizer(eos)
    tokenizer.save_pretrained(directory)
    tiny_hf_model(family, seed, **{"vocab_size": len(tokenizer), **overrides}).save_pretrained(directory)
    return directory


def _tiny_byte_level_tokenizer(eos: bool):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>"] if eos else []
    bpe = Tokenizer(models.BPE(unk_token="<unk>" if eos else None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(TEXT_LINES * 10, trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    names = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>") if eos else {}
    return PreTrainedTokenizerFast(tokenizer_object=bpe, **names)


def read_terminal(leader: int) -> tuple[threading.Thread, list[bytes]]:
    """Reads a pseudo-terminal's leader end as output comes (a full terminal buffer would block the writer) on a
    daemon thread, until the other end is closed; returns the thread and the chunks read so far (growing)."""
    seen: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end was closed
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    return reader, seen


_ray_env_before: set[str] | None = None  # os.environ's keys before this worker's local Ray started; None: none runs


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs for a module's tests (with `pytestmark = pytest.mark.usefixtures("local_ray")`). It runs
    on while the next test this process runs asks for it too, and is shut down after the last that does
    (pytest_runtest_teardown below): the modules of one xdist group (test_shards, test_shards_wire) share one start
    (~5 s of CPU, and its idle processes' while a module builds its fixtures)."""
    global _ray_env_before
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'flashtick[ray]')")
    from engine.service.config import ShardsSection
    from engine.service.ray_shards import set_ray_environment, start_local_ray

    if _ray_env_before is None:
        # Ray's settings as `serve --shards` gives its own local instance (CPU actors leave CUDA_VISIBLE_DEVICES be):
        # the shards at the tests' priority, not Ray's nice 15, which under `-n 2` gave a starting shard a few % of a
        # core beside the other worker's tests; no metrics agent; the shards' path inherited, as serve's are (no
        # runtime_env: the first shards take the workers Ray starts with it). Taken back when it is shut down
        before = set(os.environ)
        set_ray_environment(ShardsSection(), os.environ, sys.stderr)
        try:
            start_local_ray(num_cpus=2, log_to_driver=False)
        except BaseException:
            _forget_ray_environment(before)
            raise
        _ray_env_before = before
    assert ray.is_initialized()
    yield


def _forget_ray_environment(before: set[str]) -> None:
    for key in set(os.environ) - before:  # (set_ray_environment only sets what was not set)
        del os.environ[key]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """The local Ray (local_ray) shut down once the next test does not ask for it (or none follows)."""
    global _ray_env_before
    yield
    if _ray_env_before is not None and (nextitem is None or "local_ray" not in nextitem.fixturenames):
        import ray

        before, _ray_env_before = _ray_env_before, None
        try:
            ray.shutdown()
        finally:
            _forget_ray_environment(before)


_shared_checkpoints: dict[tuple, Path] = {}


def shared_tiny_tick_checkpoint(tmp_path_factory, **overrides) -> Path:
    """tiny_tick_checkpoint built once per worker process for the same ``overrides``, for modules that only read it
    (a module fixture each built its own, transformers imported for it)."""
    key = tuple(sorted(overrides.items()))
    if key not in _shared_checkpoints:
        _shared_checkpoints[key] = tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), **overrides)
    return _shared_checkpoints[key]


@contextlib.contextmanager
def serving(config, freeze_first: bool = True):
    """A Server bound and serving on its own thread; stopped (and checked stopped) on exit. ``freeze_first``: False
    for a test that watches serve's own freeze (the session's frozen heap, _libraries_frozen, thawed meanwhile)."""
    from engine.service.server import Server

    if not freeze_first:
        heap_thawed_for_this_test()
    server = Server(config)
    server.bind()
    thread, died = serve_on_a_thread(server)
    # generous bounds: they only catch a hang. A stop computes what was accepted first (limits.drain_s, 7 s by
    # default), which on a loaded 2-core machine is well past a few seconds (a 5 s join flaked there)
    server.ready.wait(60)
    try:
        yield server
    finally:
        server.stop()
        thread.join(60)
        assert not thread.is_alive()
    if died:  # (a loop that raised closed its sockets: a test sending to it waits on a peer that is gone)
        raise AssertionError(f"the server's loop died: {died[0]!r}") from died[0]


def serving_unlogged(checkpoint, kv_cells: int = 2048):
    """``serving`` the model at ``checkpoint`` with no tick log, every socket on an ephemeral 127.0.0.1 port: a real
    service for tests of what a feed or client does against it (their own restarts are not what they check)."""
    from engine.service.config import ServiceConfig

    endpoints = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}
    return serving(ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": kv_cells},
                                            "endpoints": endpoints, "log": {"enabled": False}}))


def serve_on_a_thread(server) -> tuple[threading.Thread, list[BaseException]]:
    """``server.serve_forever`` on a daemon thread, started; and the list that holds what it raised, if it did
    (a thread's exception is otherwise only a warning at the end of the run, however the test then went)."""
    died: list[BaseException] = []

    def serve() -> None:
        try:
            server.serve_forever()
        except BaseException as e:
            died.append(e)
            raise

    thread = threading.Thread(target=serve, name="serve_forever", daemon=True)
    thread.start()
    return thread, died


def send_while_served(push, server, message: bytes, timeout_s: float = 120.0) -> None:
    """``push.send(message)``, failing with what happened rather than blocking forever: a PUSH whose server is
    gone (stopped, or its loop died: either closes its sockets) queues up to its HWM, then waits for a peer that
    never comes back. The bound only catches a hang: a loaded machine's server may read one message a forward."""
    import zmq

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            push.send(message, zmq.NOBLOCK)
            return
        except zmq.Again:
            pass  # (no room in its queue: the server has not read enough yet)
        if not server._sockets:  # (close() at the end of serve_forever, whatever ended it)
            raise AssertionError("the server stopped serving (its sockets are closed) with messages still to send")
        if time.monotonic() > deadline:
            raise AssertionError(f"the server read nothing for {timeout_s:g} s: its loop is stuck")
        push.poll(1000, zmq.POLLOUT)


def assert_owed_as_uninterrupted(owed: list, uninterrupted: list, tol: float) -> None:
    """The answers a restart owed are those a run that never stopped published (query, stream, version, seq, data
    time), a `batch` query's at every message's group, with the same probabilities (named queries, within ``tol``)."""
    key = lambda a: (a.query, a.stream, a.version, a.seq, a.data_ts)  # noqa: E731
    assert sorted(map(key, owed)) == sorted(map(key, uninterrupted))
    assert len({a.version for a in owed if a.query == "dir"}) > 100  # every message's group, not just the last
    by_key = {key(a): a for a in uninterrupted}
    for answer in owed:
        if answer.query != "nll":
            assert answer.value["probs"] == pytest.approx(by_key[key(answer)].value["probs"], abs=tol)


NESTED_STATS = ("scheduler", "runner", "speculation", "log")  # the `stats` reply's maps the docs' table names


def documented_nested_stats() -> dict[str, set[str]]:
    """docs/wire-protocol.md's Stats nested maps table: map -> its keys (`log`'s `answers` map as `answers.KEY`)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "wire-protocol.md").read_text()
    section = text.split("### Stats nested maps", 1)[1].split("\n#", 1)[0]
    keys: dict[str, set[str]] = {}
    for group, key in re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", section, re.M):
        keys.setdefault(group, set()).add(key)
    return keys


def nested_stats_keys(stats: dict) -> dict[str, set[str]]:
    """A live `stats` reply's keys of those maps, as documented_nested_stats() gives them (`log` with a data dir)."""
    return {group: set().union(*({f"{key}.{inner}" for inner in value} if isinstance(value, dict) else {key}
                                 for key, value in stats[group].items()))
            for group in NESTED_STATS}
