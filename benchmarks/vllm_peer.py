"""vLLM's side of workload 1, run by vLLM's own interpreter (its own virtualenv: it pins its own torch
and transformers), never imported by flashtick's. benchmarks/peers_latency.py starts it as a subprocess:

    /work/vllm-venv/bin/python benchmarks/vllm_peer.py SPEC.json OUT.json      # workload 1
    /work/vllm-venv/bin/python benchmarks/vllm_peer.py --serve CHECKPOINT THREADS   # workload 2 (see serve)
    /work/vllm-venv/bin/python benchmarks/vllm_peer.py --serve-sessions CHECKPOINT THREADS   # (serve_sessions)

SPEC: {"checkpoint", "contexts", "stream", "questions", "reps", "modes", "threads"}. For each mode
one engine is started:
  prefix     prefix caching on (block 32, the smallest on CPU): per context one untimed request holding
             the context (it fills the cache), then ``reps`` requests of context + question (distinct
             questions, cycled), ``max_tokens=1``, timed end to end as a client of ``LLM.generate`` sees them
  stateless  the same with caching off
  session    a StreamingInput session (``AsyncLLM.generate`` fed by an async generator): the context as
             the first chunk, then one chunk per question, timed from handing the chunk over to its
             output. vLLM keeps the session's KV, and each question (plus its sampled token) becomes
             context, so the context grows by up to 17 tokens per question (``reps // 4`` questions)
The first question's top-20 logprobs come back for the parity check.
Writes {mode: {context: {"samples_ms": [...], "top_logprobs": {id: logprob}}}}.
Keeps to the standard library and vLLM: nothing from this repository is imported.
"""

from __future__ import annotations

import json
import os
import sys
import time


def run_mode(spec: dict, mode: str) -> dict:
    from vllm import LLM, SamplingParams

    llm = LLM(model=spec["checkpoint"], dtype="float32", max_model_len=max(spec["contexts"]) + 64,
              enable_prefix_caching=mode == "prefix", block_size=32, seed=0, enforce_eager=False,
              skip_tokenizer_init=True)
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=20, detokenize=False)
    out: dict = {}
    for n in spec["contexts"]:
        context = spec["stream"][:n]
        generate = lambda ids: llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)  # noqa: E731
        generate(context + [0])  # holds the context in the prefix cache (a different last token)
        first = generate(context + spec["questions"][0])
        reps = spec["reps"] if mode == "prefix" else max(3, spec["reps"] // 20)
        for q in spec["questions"][1:4]:  # warm-up
            generate(context + q)
        samples = []
        for i in range(reps):
            ids = context + spec["questions"][(i + 1) % len(spec["questions"])]
            start = time.perf_counter_ns()
            generate(ids)
            samples.append((time.perf_counter_ns() - start) / 1e6)
        top = first[0].outputs[0].logprobs[0]
        out[str(n)] = {"samples_ms": samples, "top_logprobs": {str(k): v.logprob for k, v in top.items()}}
        print(f"vllm {mode} @{n}: p50 {sorted(samples)[len(samples) // 2]:.2f} ms", file=sys.stderr, flush=True)
    return out


def run_session_mode(spec: dict) -> dict:
    import asyncio

    return asyncio.run(_sessions(spec))


async def _sessions(spec: dict) -> dict:
    import asyncio

    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.engine.protocol import StreamingInput
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(
        model=spec["checkpoint"], dtype="float32", max_model_len=8192, enable_prefix_caching=True, block_size=32,
        seed=0, skip_tokenizer_init=True))
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=20, detokenize=False,
                            output_kind=RequestOutputKind.DELTA)
    out: dict = {}
    try:
        for n in spec["contexts"]:
            chunks: asyncio.Queue = asyncio.Queue()

            async def inputs():
                while (chunk := await chunks.get()) is not None:
                    yield StreamingInput(prompt=TokensPrompt(prompt_token_ids=chunk), sampling_params=params)

            outputs = engine.generate(inputs(), params, request_id=f"session{n}")
            await chunks.put(spec["stream"][:n])
            await outputs.__anext__()  # the context is in
            samples, top = [], None
            for i in range(max(4, spec["reps"] // 4) + 3):
                start = time.perf_counter_ns()
                await chunks.put(spec["questions"][i % len(spec["questions"])])
                result = await outputs.__anext__()
                if i >= 3:  # after a warm-up of 3
                    samples.append((time.perf_counter_ns() - start) / 1e6)
                if i == 0:
                    top = result.outputs[0].logprobs[0]
            await chunks.put(None)
            async for _ in outputs:  # drain to the session's end
                pass
            out[str(n)] = {"samples_ms": samples, "top_logprobs": {str(k): v.logprob for k, v in top.items()}}
            print(f"vllm session @{n}: p50 {sorted(samples)[len(samples) // 2]:.2f} ms", file=sys.stderr, flush=True)
    finally:
        engine.shutdown()
    return out


def serve(checkpoint: str) -> None:
    """Workload 2's conventional vLLM: JSON lines on stdin, {"prompts": [[ids], ...]}, each answered in one
    ``LLM.generate`` call (vLLM batches them; prefix caching reuses every prompt's cached blocks); one
    line back per batch, "RESULT " + {"logprobs": [[one per vocab id], ...]} (the prompt's last row)."""
    from vllm import LLM, SamplingParams

    config = json.loads(open(os.path.join(checkpoint, "config.json")).read())
    vocab = config["vocab_size"]
    llm = LLM(model=checkpoint, dtype="float32", max_model_len=config["max_position_embeddings"],
              enable_prefix_caching=True, block_size=32, seed=0, skip_tokenizer_init=True, max_logprobs=vocab)
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=vocab, detokenize=False)
    print("READY", flush=True)
    for line in sys.stdin:
        prompts = json.loads(line)["prompts"]
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
        rows = []
        for out in outputs:
            top = out.outputs[0].logprobs[0]
            rows.append([top[i].logprob if i in top else float("-inf") for i in range(vocab)])
        print("RESULT " + json.dumps({"logprobs": rows}), flush=True)


def serve_sessions(checkpoint: str) -> None:
    """Workload 2's stateful vLLM: one StreamingInput session per stream. JSON lines on stdin,
    {"items": [{"stream", "new", "chunks": [[ids], ...]}, ...]}: per item (all items concurrently, so
    vLLM batches the sessions), a fresh session first when "new", then each chunk in turn, waiting for
    its output; one line back, "RESULT " + {"rows": [[[one log-prob per vocab id] per chunk] per item]}
    (each chunk's last row; each chunk and its sampled token stay in the session)."""
    import asyncio

    asyncio.run(_serve_sessions(checkpoint))


async def _serve_sessions(checkpoint: str) -> None:
    import asyncio

    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.engine.protocol import StreamingInput
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    config = json.loads(open(os.path.join(checkpoint, "config.json")).read())
    vocab = config["vocab_size"]
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(
        model=checkpoint, dtype="float32", max_model_len=config["max_position_embeddings"],
        enable_prefix_caching=True, block_size=32, seed=0, skip_tokenizer_init=True, max_logprobs=vocab))
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=vocab, detokenize=False,
                            output_kind=RequestOutputKind.DELTA)
    sessions: dict[str, tuple] = {}  # stream -> (its chunk queue, its output stream)
    opened = 0

    async def close(stream: str) -> None:
        chunks, outputs = sessions.pop(stream)
        await chunks.put(None)
        async for _ in outputs:  # drain to the session's end
            pass

    async def run_item(item: dict) -> list[list[float]]:
        nonlocal opened
        stream = item["stream"]
        if item["new"] or stream not in sessions:
            if stream in sessions:
                await close(stream)
            chunks: asyncio.Queue = asyncio.Queue()

            async def inputs(queue=chunks):
                while (chunk := await queue.get()) is not None:
                    yield StreamingInput(prompt=TokensPrompt(prompt_token_ids=chunk), sampling_params=params)

            opened += 1
            sessions[stream] = (chunks, engine.generate(inputs(), params, request_id=f"{stream}#{opened}"))
        chunks, outputs = sessions[stream]
        rows = []
        for chunk in item["chunks"]:
            await chunks.put(chunk)
            top = (await outputs.__anext__()).outputs[0].logprobs[0]
            rows.append([top[i].logprob if i in top else float("-inf") for i in range(vocab)])
        return rows

    loop = asyncio.get_running_loop()
    print("READY", flush=True)
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            items = json.loads(line)["items"]
            rows = await asyncio.gather(*(run_item(item) for item in items))
            print("RESULT " + json.dumps({"rows": rows}), flush=True)
        for stream in list(sessions):
            await close(stream)
    finally:
        engine.shutdown()


def main() -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if sys.argv[1] in ("--serve", "--serve-sessions"):
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0-1" if int(sys.argv[3]) > 1 else "0")
        (serve if sys.argv[1] == "--serve" else serve_sessions)(sys.argv[2])
        return
    spec = json.loads(open(sys.argv[1]).read())
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0-1" if spec.get("threads", 2) > 1 else "0")
    result = {mode: run_session_mode(spec) if mode == "session" else run_mode(spec, mode) for mode in spec["modes"]}
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":  # vLLM starts its workers with spawn
    main()
