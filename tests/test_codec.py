"""Codecs: BinnedCodec determinism, bins decode back, Q/A tokens apart, spec round-trip;
TextCodec prefix stability with a locally trained BPE tokenizer."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from connectors.codec import TOKENS_PER_TICK, BinnedCodec, BinnedSpec
from connectors.text_codec import TextCodec, TextCodecConfig
from connectors.labels import MarkTracker, label_series
from connectors.questions import DEFAULT_QUESTIONS
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick, trade
from engine.basis_points import bps_moved


@pytest.fixture(scope="module")
def ticks() -> list[Tick]:
    data = SyntheticMarket(SyntheticConfig(seed=7)).generate(4000)
    return data.by_stream()["SYN.A"][0]


def test_binned_is_deterministic_with_fixed_tokens_per_tick(ticks: list[Tick]) -> None:
    codec = BinnedCodec()
    a, b = codec.encode_stream(ticks), BinnedCodec().encode_stream(ticks)
    assert a == b and len(a) == TOKENS_PER_TICK * len(ticks)
    state = codec.new_state()
    assert all(len(codec.encode(t, state)) == TOKENS_PER_TICK for t in ticks)
    assert all(codec.is_tick_token(t) for t in a)


def test_binned_tokens_decode_to_bins_containing_the_values(ticks: list[Tick]) -> None:
    codec = BinnedCodec()
    state, prev = codec.new_state(), None
    for tick in ticks:
        event, gap, move, size = (codec.describe(t) for t in codec.encode(tick, state))
        assert (event.slot, gap.slot, move.slot) == ("event", "gap", "move")
        if tick.kind == "trade":
            assert event.name == tick.side and size.slot == "size"
        else:
            assert event.name.startswith("q_") and size.slot == "imbalance"
            imb = tick.bid_size / (tick.bid_size + tick.ask_size)
            assert size.lo < imb <= size.hi
        if prev is None:
            assert gap.name == "start"
        else:
            assert gap.lo < tick.ts - prev[0] <= gap.hi
            mv = bps_moved(tick.price or tick.mid, prev[1])  # (as the decimal prices say it: 1 bp exactly is 1)
            lo, hi = (-move.hi, -move.lo) if move.name.startswith("-") else (move.lo, move.hi)  # (|move| binned)
            assert lo < abs(mv) <= hi or (move.name == "zero" and abs(mv) < 1e-6)
        prev = (tick.ts, tick.price or tick.mid)


def test_question_and_answer_tokens_are_disjoint_from_tick_tokens() -> None:
    codec = BinnedCodec()
    tick_ids = {i for i in range(codec.vocab_size) if codec.is_tick_token(i)}
    qa_ids: list[int] = []
    for q in codec.questions.values():
        qa_ids += q.tokens + list(q.answers.values())
        assert set(q.answers) == set(q.labels) and q.horizon >= 0 and q.description
    assert len(qa_ids) == len(set(qa_ids)) and not tick_ids & set(qa_ids)
    assert max(qa_ids) < codec.vocab_size and 0 not in qa_ids
    assert {"direction_20", "regime", "volatility_50", "move_bps_50"} <= set(codec.questions)
    move = codec.questions["move_bps_50"]
    assert move.values is not None and set(move.values) == set(move.answers)
    assert sorted(move.values.values()) == list(move.values.values())  # labelled with increasing midpoints


def test_spec_json_round_trip() -> None:
    codec = BinnedCodec()
    again = BinnedCodec.from_json(codec.to_json())
    assert again.names == codec.names and again.spec == codec.spec
    assert {k: (q.tokens, q.answers, q.values) for k, q in again.questions.items()} == {
        k: (q.tokens, q.answers, q.values) for k, q in codec.questions.items()
    }


def test_spec_validation_is_actionable() -> None:
    with pytest.raises(ValueError, match="move_edges_bps must increase"):
        BinnedSpec(move_edges_bps=(1.0, 0.5))
    with pytest.raises(ValueError, match="vocab_size 40 too small"):
        BinnedCodec(BinnedSpec(vocab_size=40))
    with pytest.raises(ValueError, match="unknown codec spec keys"):
        BinnedSpec.from_dict({"bogus": 1})


def test_mark_tracker_matches_codec_reference_on_quotes(ticks: list[Tick]) -> None:
    tracker = MarkTracker()
    for t in ticks:
        mark = tracker.update(t)
        if t.kind == "quote":  # (Tick.mid is written to the quote's decimals: within an ulp of the codec's)
            assert mark == 0.5 * (t.bid + t.ask) == pytest.approx(t.mid, rel=1e-15, abs=0)
    assert not math.isnan(tracker.mark)


def test_a_move_exactly_on_a_bin_edge_is_in_the_lower_bin_at_every_price_level() -> None:
    """Bins are (lo, hi] in bps: 1 bp is +6 and 0.5 bp is move_bps_50's (0.1, 0.5] bucket whether the price is
    100.00, 1.0000 or 1000.0 (review410 #6: float division made 100.00 -> 100.01 1.0000000000005 bps, +7, and 1.0 ->
    1.0001 0.9999999999999, +6), down moves alike; the move_bps_50 labels as the move slot."""
    codec = BinnedCodec()

    def move_token(before: float, after: float) -> str:
        state = codec.new_state()
        codec.encode(trade("E", 1, before, 1.0, "buy"), state)
        return codec.names[codec.encode(trade("E", 2, after, 1.0, "buy"), state)[2]]
    for name, moves in (("move:+6", [(100.0, 100.01), (1.0, 1.0001), (1000.0, 1000.1), (10.0, 10.001)]),
                        ("move:+4", [(1.0, 1.00001), (100.0, 100.001), (10.0, 10.0001)]),  # 0.1 bp
                        ("move:+7", [(100.0, 100.03), (1.0, 1.0003)]),  # 3 bp
                        ("move:-6", [(100.0, 99.99), (1.0, 0.9999), (1000.0, 999.9)])):
        assert [move_token(*move) for move in moves] == [name] * len(moves), name
    spec = replace(next(q for q in DEFAULT_QUESTIONS if q.name == "move_bps_50"), horizon=1)
    for label, moves in (("+0.3", [(100.0, 100.005), (1.0, 1.00005), (10.0, 10.0005)]),  # 0.5 bp
                         ("-1.25", [(100.0, 99.995), (1.0, 0.99995)]),  # -0.5 bp: (-2, -0.5]
                         ("+1.25", [(100.0, 100.02), (1.0, 1.0002)])):  # 2 bp
        assert [spec.labels[label_series(spec, np.array(move))[0]] for move in moves] == [label] * len(moves)


def _bpe(lines: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"], show_progress=False))
    return tok


def test_text_codec_prefix_is_stable(ticks: list[Tick]) -> None:
    # Rendering does not need a trained tokenizer; train the BPE on rendered lines, as a user would.
    renderer = TextCodec(_bpe(["0123456789"]))
    render_state = renderer.new_state()
    codec = TextCodec(_bpe([renderer.render(t, render_state) for t in ticks[:500]]))
    state = codec.new_state()
    per_tick = [codec.encode(t, state) for t in ticks[:200]]
    stream = [tok for toks in per_tick for tok in toks]
    # Encoding more data never changes what was already emitted.
    for n in (1, 17, 100, 200):
        prefix = codec.encode_stream(ticks[:n])
        assert prefix == stream[: len(prefix)] and prefix == [t for toks in per_tick[:n] for t in toks]
    line = codec.render(ticks[0], codec.new_state())
    assert line.endswith("\n") and line[:2] in ("Q ", "T ")
    assert codec.question_tokens("direction over the next 20 ticks?")
    assert codec.vocab_size == codec.tokenizer.get_vocab_size()


def test_text_codec_template_validation() -> None:
    with pytest.raises(ValueError, match="must end with a newline"):
        TextCodecConfig(trade_template="T {price}")
    with pytest.raises(ValueError, match="unknown fields"):
        TextCodecConfig(quote_template="Q {spread}\n")
    # a format spec the tick's values cannot take is refused when the config is read, not on every tick after
    # ... naming the field, its type and a spec that fits, never the wrapper class floats are written through
    with pytest.raises(ValueError, match=r'trade_template "T \{price:.2f\} \{size:d\}\\n" cannot write a tick: '
                                         r"\{size:d\}: size is a float, which that spec cannot write \(Unknown format "
                                         r"code 'd' for object of type 'float'\); write e.g. \{size:.2f\}$"):
        TextCodecConfig(trade_template="T {price:.2f} {size:d}\n")
    with pytest.raises(ValueError, match=r'quote_template "Q \{bid:d\} \{stream:x\}\\n" cannot write a tick: '
                                         r"\{bid:d\}: bid is a float, .*; write e.g. \{bid:.2f\}$"):
        TextCodecConfig(quote_template="Q {bid:d} {stream:x}\n")
    with pytest.raises(ValueError, match=r": \{stream:x\}: stream is text, .*; write e.g. \{stream:>8\}$"):
        TextCodecConfig(quote_template="Q {bid:.1f} {stream:x}\n")
    TextCodecConfig(trade_template="T {price:.2f} {size:.0f} {ts:d}\n")  # what the values can take
    with pytest.raises(ValueError, match=r"trade_template \"T \{price\\n\" is not a format string: expected '\}'"):
        TextCodecConfig(trade_template="T {price\n")


def test_text_codec_writes_a_missing_field_as_a_question_mark_not_none() -> None:
    """A quote file without sizes rendered `Q 100.0/100.25 NonexNone`: Python's None in the model's prompt."""
    from connectors.ticks import quote, trade

    codec = TextCodec(_bpe(["0123456789"]), TextCodecConfig(trade_template="T {price} {bid:.2f} {side}\n"))
    assert codec.render(quote("X", 1, 100.0, 100.25), codec.new_state()) == "Q 100.0/100.25 ?x? +0.0ms\n"
    assert codec.render(trade("X", 1, 100.5, 2.0, None), codec.new_state()) == "T 100.5 ? ?\n"


QUESTION = "\nWill the next trade print above the last one? Answer:"


def _lines(codec: TextCodec, ticks: list[Tick]) -> list[str]:
    """The text lines of a stream's ticks (each rendered against the state its predecessors left)."""
    state, lines = codec.new_state(), []
    for tick in ticks:
        lines.append(codec.render(tick, state))
        codec.encode(tick, state)
    return lines


@pytest.mark.parametrize("kind", ["byte-level", "metaspace", "legacy-prepend", "llama3"])
def test_text_codec_pieces_are_the_tokenizers_tokens_of_the_whole_prompt(ticks: list[Tick], kind: str) -> None:
    """Llama 2 / Mistral tokenizers write a space before the start of a text: tokenized on its own, every line
    after the first, the question and (legacy form) a label began with a "▁" that the same text inside the prompt does
    not have. Llama 3's (and Qwen2's) pre-tokenize a run of newlines as one piece: a question starting with "\n"
    after a line's "\n" was fed as "Ċ", "Ċ" where the prompt has one "ĊĊ" (review385 #1); its tokens now stand in
    for the line's last token (`question_overlap`). Lines, question and labels give exactly transformers' tokens of
    the concatenated text."""
    from conftest import TEXT_LINES, tiny_llama3_tokenizer, tiny_spm_tokenizer
    from transformers import PreTrainedTokenizerFast

    if kind == "byte-level":
        byte_level = _bpe(TEXT_LINES * 10)
        byte_level.decoder = decoders.ByteLevel()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=byte_level)
    elif kind == "llama3":
        tokenizer = tiny_llama3_tokenizer()
    else:
        tokenizer = tiny_spm_tokenizer(legacy=kind == "legacy-prepend")
    codec = TextCodec(tokenizer)
    assert codec.encoding == ("continuation" if kind in ("metaspace", "legacy-prepend") else "plain")
    assert codec.question_overlap == (1 if kind == "llama3" else 0)
    prompt = "".join(_lines(codec, ticks[:60])) + QUESTION
    whole = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    stream = codec.encode_stream(ticks[:60])
    kept = stream[: len(stream) - codec.question_overlap]  # what the question's probe is evaluated after
    assert kept + codec.question_tokens(QUESTION) == whole
    assert codec.encode_stream(ticks[:25]) == stream[: len(codec.encode_stream(ticks[:25]))]  # a stable prefix
    # (a label with no space after the question's colon is one piece with it in Llama 3's regex: not servable)
    for label in (" yes", " no") + (("yes",) if kind != "llama3" else ()):
        with_label = tokenizer(prompt + label, add_special_tokens=False)["input_ids"]
        assert with_label[: len(whole)] == whole and codec.label_tokens(label) == with_label[len(whole):]
        assert codec.decode(codec.label_tokens(label)) == label  # the text as it reads after the prompt
    if kind in ("metaspace", "legacy-prepend"):
        assert tokenizer.convert_ids_to_tokens(stream[:1]) == ["▁T"] or ticks[0].kind == "quote"
        assert "▁T" not in tokenizer.convert_ids_to_tokens(stream[1:])  # only the text's own start has its space
    if kind == "llama3":
        assert "ĊĊ" in tokenizer.convert_ids_to_tokens(whole)  # the merge this case is about is exercised
        plain_question = "Will the next trade print above the last one? Answer:"  # no newline: nothing merges
        whole = tokenizer("".join(_lines(codec, ticks[:60])) + plain_question, add_special_tokens=False)["input_ids"]
        assert kept + codec.question_tokens(plain_question) == whole


def test_text_codec_warns_when_no_encoding_gives_the_whole_prompts_tokens() -> None:
    """A template whose line ends in a missing field's `?` before its newline: Llama 3's regex makes ` ?\n\n` one
    piece with the question's newline, and where the vocabulary merges `?` with newlines no piece-by-piece
    encoding reproduces it: said at load, not silently."""
    from conftest import tiny_llama3_tokenizer

    tokenizer = tiny_llama3_tokenizer(("T ? ?\n\nWill", "T ? ?\n") * 50)
    with pytest.warns(UserWarning, match="other tokens than any piece-by-piece encoding"):
        codec = TextCodec(tokenizer, TextCodecConfig(trade_template="T {price} {side}\n"))
    assert (codec.encoding, codec.question_overlap) == ("plain", 0)


def test_a_label_the_tokenizer_merges_with_the_question_is_warned_about() -> None:
    """Llama 3's regex reads "Answer:up" as one piece: a label without its leading space is scored by tokens the
    whole prompt never has (review of review385 #1); said when the query compiles, and a spaced label is quiet."""
    import warnings

    from conftest import tiny_llama3_tokenizer
    from queries.probe_answers import compile_query
    from queries.spec import QuerySpec

    codec = TextCodec(tiny_llama3_tokenizer(("Answer:up", "Answer:down") * 50))
    question = "\nWill the price rise? Answer:"
    with pytest.warns(UserWarning, match=r'label\(s\) "up", "down" otherwise after its question .* \(" up"\)'):
        compile_query(QuerySpec("q", ("*",), "choice", question, choices=("up", "down")), codec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile_query(QuerySpec("q", ("*",), "choice", question, choices=(" up", " down")), codec)


def test_text_codec_writes_floats_positionally_unless_the_template_gives_a_format_spec() -> None:
    """Real BTC trades of 0.00009 read `x 9e-05` to a text model (Python's str(float)): without a format spec a
    float is now written as a trader reads it, with the shortest digits; a template's own spec is kept."""
    from connectors.ticks import quote, trade

    codec = TextCodec(_bpe(["0123456789"]))
    small = trade("X", 1, 61837.63, 0.00009, "sell")
    assert codec.render(small, codec.new_state()) == "T sell 61837.63 x 0.00009 +0.0ms\n"
    assert codec.render(trade("X", 1, 100.5, 2.0, "buy"), codec.new_state()) == "T buy 100.5 x 2.0 +0.0ms\n"
    assert (codec.render(quote("X", 1, 1.23e-05, 1.24e-05, 1e16, 2.5e-07), codec.new_state())
            == "Q 0.0000123/0.0000124 10000000000000000.0x0.00000025 +0.0ms\n")
    template = "T {price:.2f} {size:e} {size:>6} {size}\n"
    explicit = TextCodec(_bpe(["0123456789"]), TextCodecConfig(trade_template=template))
    assert explicit.render(trade("X", 1, 61837.634, 0.00009, "buy"), explicit.new_state()) == (
        "T 61837.63 9.000000e-05  9e-05 0.00009\n")
    # a quote's mid with the quote's decimals, one more for a half step (review410 #5: 1.0849799999999998); `level`
    # (`streams`' last_price) is the mid
    mids = TextCodec(_bpe(["0123456789"]), TextCodecConfig(quote_template="{mid}\n"))
    for bid, ask, mid in ((1.08497, 1.08499, "1.08498"), (1.08495, 1.08497, "1.08496"), (150.256, 150.259, "150.2575"),
                          (0.1, 0.2, "0.15"), (6e-08, 7e-08, "0.000000065")):
        assert mids.render(quote("X", 1, bid, ask, 1.0, 1.0), mids.new_state()) == f"{mid}\n", (bid, ask)
        assert quote("X", 1, bid, ask, 1.0, 1.0).level == float(mid)
    # the same float back, up to the largest size a tick may carry (connectors/ticks.py MAX_SIZE)
    for value in (0.00009, 1.23e-05, 61837.63, 1e16, 1e-300, 5e-324, 9.99e17):
        line = codec.render(trade("X", 1, 100.0, value, "buy"), codec.new_state())
        assert "e" not in line.split(" x ")[1] and float(line.split(" x ")[1].split()[0]) == value


def test_positional_writes_every_digit_a_price_has() -> None:
    """`flashtick streams` wrote last_price with :g, 6 significant digits: BRK.A's 600000.04 read 600000 and a USDJPY
    mid of 150.2575 read 150.257 (review410 #2). It writes the digits --json has, positionally."""
    from connectors.text_templates import positional

    assert [positional(v) for v in (600000.04, 150.2575, 1.245e-05, 2.0, 1e16)] == [
        "600000.04", "150.2575", "0.00001245", "2.0", "10000000000000000.0"]
