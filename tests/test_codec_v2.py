"""BinnedCodec spec version 2 (instrument-agnostic): v1 specs still load and encode exactly as before;
v2 measures gaps and moves against the stream's own running scales, deterministically and prefix-stably."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math

import pytest

from connectors.codec import TOKENS_PER_TICK, BinnedCodec, BinnedSpec
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick
from engine.models import BUILTIN_MODEL_DIR

V2 = BinnedSpec(version=2)
V1_JSON_SPEC = BinnedSpec()  # the default spec is version 1, as every v1 checkpoint's codec.json

# sha256 of the tokens the pre-v2 codec (commit fae73b1) gave for the market below: pins v1 encoding. Since review410
# #6 a move exactly on a bin edge is in the lower bin at every price level: 3 of its 4000 move tokens moved down one
# bin, each a move exactly on an edge as the decimal prices say it (fae73b1: b871e6e379760a6f730e2ed041a562b96fb7...).
V1_TOKENS_SHA256 = "41742e358a09c6ba7a22f01f6a0cb28539a80e87b02ff61f07b6739fba0e8af0"


@pytest.fixture(scope="module")
def market_ticks() -> list[Tick]:
    return SyntheticMarket(SyntheticConfig(seed=7)).generate(4000).ticks


def encode_per_stream(codec: BinnedCodec, ticks: list[Tick]) -> list[int]:
    states: dict[str, object] = {}
    return [tok for t in ticks for tok in codec.encode(t, states.setdefault(t.stream, codec.new_state()))]


def test_v1_spec_encodes_exactly_as_before_version_2(market_ticks: list[Tick]) -> None:
    tokens = encode_per_stream(BinnedCodec(V1_JSON_SPEC), market_ticks)
    assert hashlib.sha256(bytes(tokens)).hexdigest() == V1_TOKENS_SHA256


def test_v1_codec_json_round_trips_without_v2_fields() -> None:
    codec = BinnedCodec(V1_JSON_SPEC)
    text = codec.to_json()
    assert '"version"' not in text and "scale_alpha" not in text  # older readers reject unknown keys
    assert BinnedCodec.from_json(text).spec == V1_JSON_SPEC


def test_shipped_codec_json_loads_as_the_version_it_declares() -> None:
    text = (BUILTIN_MODEL_DIR / "codec.json").read_text()
    codec = BinnedCodec.from_json(text)
    assert codec.to_json() + "\n" == text  # a checkpoint's spec survives a load/save unchanged


def test_v2_round_trip_and_vocabulary_fits() -> None:
    codec = BinnedCodec(V2)
    again = BinnedCodec.from_json(codec.to_json())
    assert again.spec == V2 and again.names == codec.names
    assert codec.n_tick_tokens < codec.vocab_size and all(codec.is_tick_token(i) for i in range(1, codec.n_tick_tokens))
    with pytest.raises(ValueError, match="version must be one of"):
        BinnedSpec(version=3)
    with pytest.raises(ValueError, match="scale_alpha"):
        BinnedSpec(version=2, scale_alpha=0.0)


def test_v2_is_deterministic_and_prefix_stable(market_ticks: list[Tick]) -> None:
    codec = BinnedCodec(V2)
    ticks = [t for t in market_ticks if t.stream == market_ticks[0].stream]
    whole = codec.encode_stream(ticks)
    assert whole == BinnedCodec(V2).encode_stream(ticks) and len(whole) == TOKENS_PER_TICK * len(ticks)
    state = codec.new_state()
    for i, tick in enumerate(ticks):
        # An encoder may encode on a copy and drop it (a refused tick); the original must be unaffected.
        trial = copy.copy(state)
        assert codec.encode(tick, trial) == whole[TOKENS_PER_TICK * i : TOKENS_PER_TICK * (i + 1)]
        codec.encode(tick, state)
        assert state == trial


def _dilated(ticks: list[Tick], time_factor: int) -> list[Tick]:
    t0 = ticks[0].ts
    return [dataclasses.replace(t, ts=t0 + (t.ts - t0) * time_factor) for t in ticks]


def test_v2_gap_tokens_do_not_depend_on_the_clock_rate(market_ticks: list[Tick]) -> None:
    """The same market 8x slower: v1 gap tokens change, v2's stay (up to float rounding at bin edges)."""
    ticks = [t for t in market_ticks if t.stream == market_ticks[0].stream]
    slow = _dilated(ticks, 8)
    for spec, expect_same in ((V2, True), (V1_JSON_SPEC, False)):
        codec = BinnedCodec(spec)
        fast_gaps = codec.encode_stream(ticks)[1::TOKENS_PER_TICK]
        slow_gaps = codec.encode_stream(slow)[1::TOKENS_PER_TICK]
        same = sum(a == b for a, b in zip(fast_gaps, slow_gaps)) / len(fast_gaps)
        assert (same > 0.995) == expect_same, (spec.version, same)


def test_v2_move_tokens_do_not_depend_on_the_move_scale() -> None:
    """One path of tick moves on two instruments whose tick is 1 bp and 0.01 bp: identical move tokens
    under v2 (the path is the same in units of its own moves); v1 sees different bps bins."""
    def stream(price: float, tick_size: float) -> list[Tick]:
        steps = [0, 1, 1, -1, 0, 2, -1, 0, 0, 1, -3, 1, 0, 1, 1, -1, 0, 0, 2, -2] * 20
        ticks, level = [], 0
        for i, step in enumerate(steps):
            level += step
            mid = price + level * tick_size
            ticks.append(Tick(stream="X", ts=1_000_000 * (i + 1), kind="quote", bid=mid - tick_size / 2,
                              ask=mid + tick_size / 2, bid_size=1.0, ask_size=1.0))
        return ticks

    coarse, fine = stream(100.0, 0.01), stream(10_000.0, 0.01)  # 1 bp vs 0.01 bp per tick
    v2 = BinnedCodec(V2)
    moves = [v2.encode_stream(s)[2::TOKENS_PER_TICK] for s in (coarse, fine)]
    assert moves[0] == moves[1]
    v1 = BinnedCodec(V1_JSON_SPEC)
    assert v1.encode_stream(coarse)[2::TOKENS_PER_TICK] != v1.encode_stream(fine)[2::TOKENS_PER_TICK]
    # The scale tag (event slot) is what still tells the two apart: it carries the absolute RMS move.
    tags = [{v2.names[t].split("/")[1] for t in v2.encode_stream(s)[TOKENS_PER_TICK * 50 :: TOKENS_PER_TICK]}
            for s in (coarse, fine)]
    assert tags[0] != tags[1]


def test_v2_gap_token_bins_contain_the_relative_gap(market_ticks: list[Tick]) -> None:
    codec = BinnedCodec(V2)
    ticks = [t for t in market_ticks if t.stream == market_ticks[0].stream]
    state = codec.new_state()
    for tick in ticks:
        before = copy.copy(state)
        gap_bin = codec.describe(codec.encode(tick, state)[1])
        if before.last_ts is None:
            assert gap_bin.name == "start"
        elif tick.ts == before.last_ts:
            assert gap_bin.name == "zero"
        elif before.gap_log2_mean is not None:
            rel = math.log2(tick.ts - before.last_ts) - before.gap_log2_mean
            assert gap_bin.lo < rel <= gap_bin.hi


def test_a_codec_json_version_in_the_wrong_place_or_out_of_range_is_refused_naming_the_file(tmp_path, capsys
                                                                                            ) -> None:
    """review226 #7: the docs said `"version": 2` in codec.json, the loader reads spec.version: a top-level
    `"version": 3` was ignored (the checkpoint ran as v1), and `spec.version: 3` was refused as "codec spec version
    must be one of (1, 2), got 3", naming neither the file nor the key."""
    import json
    import shutil

    from engine.service.cli import main

    (tmp_path / "ticks.csv").write_text("ts,symbol,price,size,side\n1717236000,ES,5300,1,buy\n")
    for name, change, said in (
            ("top", lambda d: d.update(version=3), "unknown codec.json key version; known keys: format, spec, "
                                                   "vocab (version belongs under spec: spec.version)"),
            ("spec", lambda d: d["spec"].update(version=3), "spec.version must be one of 1 or 2 (the codec "
                                                            "spec's version), got 3")):
        model = tmp_path / name
        shutil.copytree(BUILTIN_MODEL_DIR, model)
        codec = json.loads((model / "codec.json").read_text())
        change(codec)
        (model / "codec.json").write_text(json.dumps(codec))
        assert main(["evaluate", str(model), str(tmp_path / "ticks.csv"), "--threads", "1"]) == 2
        err = capsys.readouterr().err
        assert f"error: {model / 'codec.json'}: {said}" in err, err
