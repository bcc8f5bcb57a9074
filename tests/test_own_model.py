"""A user's own Hugging Face checkpoint, driven the way a new user drives it: a directory written by
save_pretrained, `flashtick serve`/`backtest --model DIR` or `model.path` in a config, queries registered and
asked over the control socket, ticks over the ingest socket, answers on PUB; and the errors such a user meets."""

from __future__ import annotations

import json
import re
import time

import polars as pl
import pytest
import torch

from conftest import serving, tiny_text_checkpoint
from connectors.feed import FeedClient
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.cli import build_parser, main
from engine.service.cmd_serve import _serve_config
from engine.service.client import AnswerSubscriber
from engine.service.config import ConfigError, ServiceConfig
from engine.service.pipeline import TickPipeline

LOCAL = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}
QUERIES = """
queries:
  - {name: up, streams: ["SYN.*"], kind: choice, question: "\\nWill the next trade print above the last one? Answer:",
     choices: [" yes", " no"], trigger: {ticks: 5}}
  - {name: move, streams: ["*"], kind: expectation, question: "\\nMove in bps:", values: {" -5": -5, " 0": 0, " +5": 5},
     trigger: batch}
  - {name: note, streams: ["*"], kind: generate, question: "\\nSummary of the last minute:", max_tokens: 8,
     trigger: on_demand}
  - {name: surprise, streams: ["*"], kind: surprise}
"""


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_text_checkpoint_served_over_the_sockets(tmp_path, capsys) -> None:
    """model.path relative to the config file; every text query kind registered, fed, published and asked."""
    tiny_text_checkpoint(tmp_path / "models" / "my-llama", "llama3")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "engine.yaml").write_text(
        f"model: {{path: ../models/my-llama}}\nkv: {{cells: 8192, block_size: 16}}\nendpoints: {json.dumps(LOCAL)}\n"
        f"limits: {{heartbeat_s: 0.2}}\nlog: {{enabled: false}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    config = ServiceConfig.load(tmp_path / "conf" / "engine.yaml")
    assert config.model.model_id == "my-llama"
    with serving(config) as server:
        control = ("--control", server.endpoints["control"])
        code, out, _ = run(capsys, "register", str(tmp_path / "q.yaml"), *control)
        assert code == 0 and out.startswith("registered up, move, note, surprise")
        code, out, _ = run(capsys, "list", *control)
        lines = out.splitlines()
        assert len(lines) == 5  # one line per query, whatever its question text holds
        assert lines[0].split()[:3] == ["up", "choice", '"\\nWill']
        with AnswerSubscriber(server.endpoints["answers"], ["up/", "move/", "surprise/"]) as answers:
            answers.wait_ready(timeout_s=10)
            with FeedClient(server.endpoints["ingest"]) as feed:
                feed.send(SyntheticMarket(SyntheticConfig(seed=1)).next_batch(40))
            seen = {}
            while len(seen) < 3:
                message = answers.recv(timeout_s=20)
                assert message is not None, f"answers so far: {seen}"
                seen[message[1]["query"]] = message[1]
        assert set(seen["up"]["value"]["probs"]) == {" yes", " no"} and seen["up"]["model"] == "my-llama"
        assert set(seen["move"]["value"]) == {"expected", "probs"} and seen["surprise"]["value"]["nll"] > 0
        code, out, _ = run(capsys, "ask", "SYN.A", "note", *control)
        value = json.loads(out)["value"]
        assert code == 0 and 1 <= len(value["tokens"]) <= 8 and isinstance(value["text"], str)
        code, _, err = run(capsys, "ask", "NOPE", "note", *control)  # a generate query drafts from the stream
        assert code == 2 and err == 'flashtick ask: error: stream "NOPE" has sent no data\n'
        code, out, _ = run(capsys, "stats", *control)
        assert code == 0 and json.loads(out)["ticks_in"] == 40 and json.loads(out)["rejected"] == {}
        assert json.loads(out)["named_questions"] == []
        # a text model's answers are scored only through scored_as (none here): said so, and how
        code, out, _ = run(capsys, "scores", *control)
        assert code == 0 and "(no answer scored: an answer is scored against what the ticks after it did, which " \
            "only the named questions (direction_5, ...) define; " in out, out
        assert "the model served, my-llama, is a text model, so only its scored_as queries are scored" in out, out
        assert len(out.splitlines()) == 1, out  # that line alone: no table header above no rows


def test_generation_ends_at_the_end_of_sequence_the_checkpoint_declares(tmp_path) -> None:
    """A model that emits its eos token has finished: the answer stops there (the token is not in the text),
    with eos_token_id from the tokenizer, config.json or generation_config.json (an int or a list)."""
    tiny_text_checkpoint(tmp_path, "mistral", eos=False)
    config_json = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config_json, "eos_token_id": None}))
    (tmp_path / "generation_config.json").unlink()
    config = ServiceConfig.from_dict({"model": {"path": str(tmp_path)}, "kv": {"cells": 8192, "block_size": 16}})

    def generated() -> list[int]:
        pipeline = TickPipeline(config)
        assert pipeline.codec.end_tokens == ends
        pipeline.registry.register("queries: [{name: note, streams: ['*'], kind: generate, question: 'Summary:',"
                                   " max_tokens: 12, trigger: on_demand}]")
        assert pipeline.ingest_message(encode(SyntheticMarket(SyntheticConfig(seed=2)).next_batch(30))) == []
        pipeline.run_until_idle()
        pipeline.ask(pipeline.registry.get("note"), "SYN.A", ticket=1)
        (outcome,) = pipeline.engine.run_until_idle()
        return outcome.answer.value["tokens"]

    ends: frozenset[int] = frozenset()  # no eos anywhere: max_tokens ends it
    plain = generated()
    assert len(plain) == 12
    cut = next(i for i in range(1, 12) if plain[i] not in plain[:i])
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [299, plain[cut]]}))
    ends = frozenset({299, plain[cut]})
    assert generated() == plain[:cut]


def test_serve_without_queries_registers_none_for_a_text_model(tmp_path, capsys) -> None:
    tiny_text_checkpoint(tmp_path, "qwen2-tied")
    config = _serve_config(build_parser().parse_args(["serve", "--model", str(tmp_path), "--no-log"]))
    assert config.queries is None and config.model.path == str(tmp_path)
    assert "no standing queries; register yours while serving" in capsys.readouterr().err
    (tmp_path / "codec.json").write_text("{}")  # a tick checkpoint gets the tick model's examples
    config = _serve_config(build_parser().parse_args(["serve", "--model", str(tmp_path), "--no-log"]))
    assert config.queries.endswith("tick_model.yaml")


def test_backtest_a_sharded_bf16_checkpoint(tmp_path, capsys) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = tiny_text_checkpoint(tmp_path / "qwen", "qwen2-tied")
    AutoModelForCausalLM.from_pretrained(model).to(torch.bfloat16).save_pretrained(model, max_shard_size="40KB")
    assert (model / "model.safetensors.index.json").is_file()
    market = SyntheticMarket(SyntheticConfig(seed=3))
    rows = [{"timestamp": t.ts, "symbol": t.stream, "price": t.price or t.mid, "size": t.size or 1.0}
            for t in market.next_batch(80)]
    pl.DataFrame(rows).write_csv(tmp_path / "trades.csv")
    (tmp_path / "q.yaml").write_text(QUERIES.replace("on_demand", "{ticks: 10}"))
    code, out, err = run(capsys, "backtest", str(tmp_path / "trades.csv"), "--model", str(model), "--queries",
                         str(tmp_path / "q.yaml"), "--out", str(tmp_path / "answers.parquet"), "--quiet")
    assert code == 0, err
    answers = pl.read_parquet(tmp_path / "answers.parquet")
    assert set(answers["query"]) == {"up", "move", "note", "surprise"}
    assert answers.filter(pl.col("query") == "note")["text"].null_count() == 0


@pytest.mark.parametrize("case", ["no directory", "no --model directory", "no tokenizer", "foreign tokenizer", "gpt2",
                                  "pickle only", "binned codec", "header outside the vocabulary", "cuda without one"])
def test_what_a_new_user_is_told(tmp_path, capsys, case: str) -> None:
    """`serve --model DIR` refuses before it binds anything, in one line that says what to do."""
    model = tmp_path / "model"
    tiny_text_checkpoint(model, "llama3")
    argv = ["serve", "--model", str(model), "--no-log"]
    if case == "no tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (model / name).unlink()
        expected = "no tokenizer files \\(tokenizer.json, .*needs the model's own tokenizer; copy them"
    elif case == "foreign tokenizer":
        config = json.loads((model / "config.json").read_text())
        tiny_text_checkpoint(model, "llama3", vocab_size=200)  # another model's weights beside this tokenizer
        expected = "the tokenizer has 300 tokens but the model's vocab_size is 200: it does not belong to this model"
        assert config["vocab_size"] == 300
    elif case == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2)).save_pretrained(model)
        expected = 'model_type "gpt2" \\(GPT2LMHeadModel\\) is not supported: .* "llama", "mistral" or "qwen2"'
    elif case == "pickle only":
        (model / "model.safetensors").rename(model / "pytorch_model.bin")
        expected = "pytorch_model.bin \\(pickle\\), which flashtick does not load.*save_pretrained"
    elif case == "no directory":  # model.path is read relative to the config file
        (tmp_path / "engine.yaml").write_text("model: {path: modle}\n")
        argv = ["serve", "--config", str(tmp_path / "engine.yaml"), "--queries", str(tmp_path / "engine.yaml"),
                "--no-log"]
        expected = f"{tmp_path / 'modle'}: no such directory"
    elif case == "no --model directory":
        argv = ["serve", "--model", str(tmp_path / "modle"), "--no-log"]
        expected = f"{tmp_path / 'modle'}: no such directory"
    elif case == "header outside the vocabulary":  # was torch's "index out of range in self"
        (tmp_path / "engine.yaml").write_text("model: {path: model}\nscheduler: {header: [1, 999]}\n")
        argv = ["serve", "--config", str(tmp_path / "engine.yaml"), "--queries", str(tmp_path / "engine.yaml"),
                "--no-log"]
        expected = r"scheduler.header: \[999\] is not a token id of this model \(ids 0..299; vocab_size 300\)"
    elif case == "cuda without one":  # was torch's "Torch not compiled with CUDA enabled"
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is visible here")
        (tmp_path / "engine.yaml").write_text("model: {path: model, device: cuda}\n")
        argv = ["serve", "--config", str(tmp_path / "engine.yaml"), "--queries", str(tmp_path / "engine.yaml"),
                "--no-log"]
        expected = 'model.device "cuda": this torch .* sees no CUDA device .*use model.device cpu'
    else:
        (tmp_path / "engine.yaml").write_text("model: {path: model}\ncodec: {kind: binned}\n")
        argv = ["serve", "--config", str(tmp_path / "engine.yaml"), "--queries", str(tmp_path / "engine.yaml"),
                "--no-log"]
        expected = "codec.kind: binned needs .*codec.json .*a text model takes codec.kind: text"
    capsys.readouterr()  # what building the checkpoint printed
    code, _, err = run(capsys, *argv)
    *notes, error = err.strip().splitlines()
    assert code == 2 and error.startswith("flashtick serve: ERROR: ") and re.search(expected, error), err
    assert not any("error" in note for note in notes), err


def test_a_data_directory_remembers_the_tokenizer(tmp_path) -> None:
    """Logged ticks are tokens: a restart with another tokenizer of the same size (another model in a folder of
    the same name, a tokenizer.json swapped in place) is refused; a directory from before the tokenizer was
    recorded is accepted and gets it."""
    model = tiny_text_checkpoint(tmp_path / "model", "llama3")
    config = ServiceConfig.from_dict({"model": {"path": str(model)}, "kv": {"cells": 8192, "block_size": 16},
                                      "log": {"dir": str(tmp_path / "data")}})
    pipeline = TickPipeline(config)
    assert pipeline.ingest_message(encode(SyntheticMarket(SyntheticConfig(seed=4)).next_batch(10))) == []
    pipeline.data.close()
    meta_file = tmp_path / "data" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({"model": meta["model"], "codec": meta["codec"]}))  # an earlier version's
    TickPipeline(config).data.close()
    assert json.loads(meta_file.read_text()) == meta
    tokenizer = json.loads((model / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    first, second = list(vocab)[-2:]
    vocab[first], vocab[second] = vocab[second], vocab[first]  # same size, other ids
    (model / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ConfigError, match="written by another model, weights or codec \\(tokenizer: "):
        TickPipeline(config)


def test_a_data_directory_remembers_how_the_text_codec_encodes(tmp_path, capsys) -> None:
    """The tokenizer's digest did not cover how flashtick encodes with it: a directory written by a version that
    tokenized each line of a SentencePiece model on its own (before lines became continuations), restarted under
    this one, re-encoded its logged ticks into other tokens with nothing said. meta.json records text_encoding; a
    restart that encodes otherwise is refused naming it; a directory from before the key opens, is told so, and
    gets the key."""
    from conftest import tiny_spm_tokenizer
    from connectors.text_codec import TextCodec

    tokenizer = tiny_spm_tokenizer()
    model = tiny_text_checkpoint(tmp_path / "model", "llama3", tokenizer=tokenizer)
    config = ServiceConfig.from_dict({"model": {"path": str(model)}, "kv": {"cells": 8192, "block_size": 16},
                                      "log": {"dir": str(tmp_path / "data")}})
    pipeline = TickPipeline(config)
    assert pipeline.codec.encoding == "continuation"
    assert pipeline.ingest_message(encode(SyntheticMarket(SyntheticConfig(seed=4)).next_batch(10))) == []
    pipeline.data.close()
    meta_file = tmp_path / "data" / "meta.json"
    meta = json.loads(meta_file.read_text())
    assert meta["text_encoding"] == pipeline.codec.encoding_record()

    each_line_alone = TextCodec(tokenizer)
    each_line_alone.encoding = "plain"  # what a flashtick that tokenized every line on its own wrote with it
    assert each_line_alone.encoding_record().startswith("plain:")
    meta_file.write_text(json.dumps(meta | {"text_encoding": each_line_alone.encoding_record()}))
    with pytest.raises(ConfigError) as refused:
        TickPipeline(config)
    assert f'(text_encoding: "{each_line_alone.encoding_record()}" -> "{meta["text_encoding"]}")' in str(refused.value)
    assert "the same ticks now encode to other tokens" in str(refused.value)
    assert "Use another --data-dir" in str(refused.value)

    meta_file.write_text(json.dumps({k: v for k, v in meta.items() if k != "text_encoding"}))  # an earlier version's
    capsys.readouterr()
    restarted = TickPipeline(config)
    assert restarted.data.recovered_ticks == 10
    restarted.data.close()
    assert json.loads(meta_file.read_text()) == meta
    assert "does not say how its text codec encoded ticks" in capsys.readouterr().err
    TickPipeline(config).data.close()  # recorded: said once
    assert "text codec" not in capsys.readouterr().err


def test_a_question_longer_than_probe_reserve_is_refused_at_registration(tmp_path) -> None:
    """A probe past the positions a session keeps free (scheduler.probe_reserve) fails whenever the stream's window
    is nearly full, so such a query would miss answers with nothing said: it is refused, naming the key and the
    size it needs; raised to that size, the same query registers."""
    from queries.spec import QuerySpecError
    from queries.yaml_loader import load_queries

    tiny_text_checkpoint(tmp_path, "llama3")
    long = "queries: [{name: long, streams: ['*'], kind: choice, choices: [' yes', ' no'], question: '" + \
        " Is the next trade higher than this one?" * 12 + "'}]"
    base = {"model": {"path": str(tmp_path)}, "kv": {"cells": 8192, "block_size": 16}}
    pipeline = TickPipeline(ServiceConfig.from_dict(base))
    with pytest.raises(QuerySpecError, match=r"its question takes (\d+) tokens, more than scheduler.probe_reserve "
                                             r"\(64\)") as e:
        pipeline.registry.register(long)
    with pytest.raises(QuerySpecError, match=r'^q.yaml:1: query "long": its question takes'):  # as `register` reads it
        load_queries(long, "q.yaml", pipeline.registry.questions, answerable=pipeline.registry.answerable)
    need = int(re.search(r"at least (\d+)", str(e.value)).group(1))
    window = pipeline.engine.scheduler.window
    assert f"(the window of {window} positions fits up to {window - window // 2 - 1} beside" in str(e.value)
    roomy = TickPipeline(ServiceConfig.from_dict({**base, "scheduler": {"probe_reserve": need}}))
    assert roomy.registry.register(long)
    # review432 #1: a window too small for that reserve beside the kept half said "raise probe_reserve", which the
    # start then refused ("lower probe_reserve"): it names the keep_fraction that makes room, and that config starts
    small = 2 * need
    narrow = TickPipeline(ServiceConfig.from_dict({**base, "scheduler": {"window": small}}))
    with pytest.raises(QuerySpecError, match=rf"the window of {small} positions fits a reserve of {need - 1} at most "
                                             rf"beside the {need} tokens a roll keeps: shorten the question to "
                                             rf"{need - 1} tokens, or set scheduler.probe_reserve: {need} with "
                                             r"keep_fraction: (0\.\d+)") as e:
        narrow.registry.register(long)
    fraction = float(re.search(r"keep_fraction: (0\.\d+)", str(e.value)).group(1))
    advised = {"window": small, "probe_reserve": need, "keep_fraction": fraction}
    assert TickPipeline(ServiceConfig.from_dict({**base, "scheduler": advised})).registry.register(long)
    tight = TickPipeline(ServiceConfig.from_dict({**base, "scheduler": {"window": need, "probe_reserve": 8}}))
    with pytest.raises(QuerySpecError, match=rf"the window of {need} positions cannot hold it beside a stream's "
                                             rf"context: shorten the question to {need - need // 2 - 1} tokens"):
        tight.registry.register(long)
    note = "queries: [{name: note, streams: ['*'], kind: generate, question: 'Summary:', max_tokens: 70}]"
    with pytest.raises(QuerySpecError, match="its question and answer take"):
        pipeline.registry.register(note)


@pytest.mark.parametrize("kind", ["metaspace", "legacy-prepend", "llama3"])
def test_a_model_answers_what_transformers_gives_for_the_whole_prompt(tmp_path, kind) -> None:
    """A Llama 2 / Mistral-style tokenizer: the choice and generate answers are transformers' over
    tokenizer(ticks' lines + question), not over lines that each began with a spurious "▁". A Llama 3-style one
    (review385 #1): not over the last line's "Ċ" and the question's own "Ċ" where the prompt has one "ĊĊ"."""
    from transformers import AutoModelForCausalLM

    from conftest import tiny_llama3_tokenizer, tiny_spm_tokenizer

    tokenizer = tiny_llama3_tokenizer() if kind == "llama3" else tiny_spm_tokenizer(kind == "legacy-prepend")
    tiny_text_checkpoint(tmp_path, "llama3", tokenizer=tokenizer)
    config = ServiceConfig.from_dict({"model": {"path": str(tmp_path)}, "kv": {"cells": 8192, "block_size": 16}})
    pipeline = TickPipeline(config)
    question = "\\nWill the next trade print above the last one? Answer:"
    pipeline.registry.register(f"""queries:
      - {{name: up, streams: ['*'], kind: choice, question: "{question}", choices: [" yes", " no"], trigger: on_demand}}
      - {{name: note, streams: ['*'], kind: generate, question: "{question}", max_tokens: 6, trigger: on_demand}}
    """)
    ticks = [t for t in SyntheticMarket(SyntheticConfig(seed=3)).next_batch(60) if t.stream == "SYN.A"]
    assert pipeline.ingest_message(encode(ticks)) == []
    pipeline.run_until_idle()
    answers = {}
    for name in ("up", "note"):
        pipeline.ask(pipeline.registry.get(name), "SYN.A", ticket=name)
        (outcome,) = pipeline.engine.run_until_idle()
        answers[name] = outcome.answer.value

    codec, state, lines = pipeline.codec, pipeline.codec.new_state(), []
    for tick in ticks:
        lines.append(codec.render(tick, state))
        codec.encode(tick, state)
    prompt = "".join(lines) + question.replace("\\n", "\n")
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(prompt_ids).count("▁T") <= 1  # only the text's start has the space
    assert ("ĊĊ" in tokenizer.convert_ids_to_tokens(prompt_ids)) == (kind == "llama3")  # its merge is exercised
    reference = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    with torch.no_grad():
        last = reference(torch.tensor([prompt_ids])).logits[0, -1]
        label_ids = [tokenizer(prompt + label, add_special_tokens=False)["input_ids"][len(prompt_ids):]
                     for label in (" yes", " no")]
        assert [len(ids) for ids in label_ids] == [1, 1]
        probs = torch.softmax(last[[ids[0] for ids in label_ids]], dim=0).tolist()
        generated = []
        for _ in range(6):
            generated.append(int(reference(torch.tensor([prompt_ids + generated])).logits[0, -1].argmax()))
            if generated[-1] in codec.end_tokens:  # the end of sequence ends the answer, outside it
                generated.pop()
                break
    assert answers["up"]["probs"] == pytest.approx(dict(zip((" yes", " no"), probs)), abs=1e-5)
    assert answers["note"]["tokens"] == generated
    full_text = tokenizer.decode(prompt_ids + generated)
    assert answers["note"]["text"] == full_text[len(tokenizer.decode(prompt_ids)):]


def test_ask_a_free_text_question_from_the_command_line(tmp_path, capsys) -> None:
    """`flashtick ask` could ask only registered queries and the codec's questions; a text model's free-text
    question needed Python's ControlClient. `--question TEXT` with `--choices` or `--generate` is the op's `spec`."""
    from engine.service.client import ControlClient

    tiny_text_checkpoint(tmp_path / "model", "llama3")
    config = ServiceConfig.from_dict({"model": {"path": str(tmp_path / "model")}, "endpoints": LOCAL,
                                      "kv": {"cells": 8192, "block_size": 16}, "log": {"enabled": False}})
    question = "\nWill the next trade print above the last one? Answer:"
    with serving(config) as server:
        control = ("--control", server.endpoints["control"])
        ticks = SyntheticMarket(SyntheticConfig(seed=1)).next_batch(40)
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(ticks)
        with ControlClient(server.endpoints["control"]) as client:  # every tick accepted before the asks
            deadline = time.monotonic() + 60
            while (client.call("streams", streams=["SYN.A"])["streams"].get("SYN.A") or {}).get("ticks") != sum(
                    t.stream == "SYN.A" for t in ticks):
                assert time.monotonic() < deadline, "the ticks were not accepted"
                time.sleep(0.05)
        code, out, err = run(capsys, "ask", "SYN.A", "--question", question, "--choices", " yes", " no", *control)
        assert code == 0, err
        chosen = json.loads(out)
        with ControlClient(server.endpoints["control"]) as client:  # the same ask through the op, by hand
            by_hand = client.call("ask", stream="SYN.A", spec={"name": "ask", "question": question, "kind": "choice",
                                                               "choices": [" yes", " no"]})["answer"]
        assert chosen["query"] == "ask" and chosen["version"] == by_hand["version"] > 0
        assert chosen["value"]["probs"] == pytest.approx(by_hand["value"]["probs"], abs=1e-6)
        code, out, err = run(capsys, "ask", "SYN.A", "--question", question, "--generate", "5", *control)
        value = json.loads(out)["value"]
        assert code == 0 and 1 <= len(value["tokens"]) <= 5 and isinstance(value["text"], str), err
        code, _, err = run(capsys, "ask", "NOPE", "--question", question, "--generate", "5", *control)
        assert code == 2 and err == 'flashtick ask: error: stream "NOPE" has sent no data\n'
        for argv, said in [
            (["--question", question], "--question needs how it is answered: --choices A B ..."),
            (["dir5", "--question", question, "--generate", "3"], 'give a query name ("dir5") or --question, not'),
            (["--choices", " yes", " no"], "--choices goes with --question TEXT"),
            ([], "give a query name (a registered query, or a question of the model's own) or --question TEXT"),
            (["--question", question, "--generate", "3", "--max-stale", "5"], "--max-stale takes a registered"),
            (["--question", question, "--generate", "3", "--kind", "choice"], "--kind is for a question of the"),
        ]:  # usage errors, said as the line is parsed, with where the help is
            with pytest.raises(SystemExit) as usage:
                main(["ask", "SYN.A", *argv, *control])
            out, err = capsys.readouterr()
            assert usage.value.code == 2 and out == "" and said in err, (argv, err)
            assert err.endswith("\nsee flashtick ask --help\n"), (argv, err)
        with pytest.raises(SystemExit) as usage:  # argparse's own: one or the other
            main(["ask", "SYN.A", "--question", question, "--choices", " yes", "--generate", "3", *control])
        assert usage.value.code == 2 and "argument --generate: not allowed with argument --choices" in (
            capsys.readouterr().err)
        code, _, err = run(capsys, "ask", "SYN.A", "--question", question, "--choices", " yes", *control)
        assert code == 2 and 'one choice (" yes") is always the answer' in err, err  # the spec's rules, the service's
