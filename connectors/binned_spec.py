"""`BinnedSpec`: everything that defines a `BinnedCodec` (its bin edges, scale weights, questions, vocabulary size
and version), checked when built, and its serialisation as codec.json's `spec` (a version-1 spec writes exactly the
keys v1 checkpoints ship; unknown keys are refused by name).

Apart from connectors/codec.py because a spec is a value read from and written to checkpoints, while the codec is
what encodes ticks with it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from connectors.questions import DEFAULT_QUESTIONS, QuestionSpec
from engine.quoting import quoted_choices, quoted_list

SPEC_FORMAT = "flashtick.binned_codec/1"
SPEC_VERSIONS = (1, 2)
# Fields only version 2 reads; a version-1 spec serialises without them, exactly as before they existed.
_V2_FIELDS = ("move_log2_edges", "gap_log2_edges", "scale_alpha", "scale_tag_edges_bps")
CODEC_JSON_KEYS = ("format", "spec", "vocab")  # codec.json's top level (BinnedCodec.to_json)


def _check_increasing(name: str, edges: tuple[float, ...], positive: bool) -> None:
    if not edges:
        raise ValueError(f"{name} must not be empty")
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{name} must increase strictly, got {quoted_list(edges)}")
    if positive and edges[0] <= 0:
        raise ValueError(f"{name} must be > 0, got {quoted_list(edges)}")


@dataclass(frozen=True)
class BinnedSpec:
    """Everything that defines a BinnedCodec; ships as codec.json beside the model."""

    gap_edges_ns: tuple[int, ...] = (
        100_000, 1_000_000, 10_000_000, 50_000_000, 200_000_000, 1_000_000_000, 5_000_000_000, 30_000_000_000,
    )
    move_edges_bps: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    size_log2_edges: tuple[float, ...] = (-3.0, -1.5, -0.5, 0.5, 1.5, 3.0)
    imbalance_edges: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
    size_ewma_alpha: float = 0.05
    questions: tuple[QuestionSpec, ...] = DEFAULT_QUESTIONS
    vocab_size: int = 128
    version: int = 1  # 1: absolute bps / ns bins (the v1 built-in model); 2: relative to the stream's own scales
    # Version 2 only (see the module docstring):
    move_log2_edges: tuple[float, ...] = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.5, 5.0)
    gap_log2_edges: tuple[float, ...] = (-7.0, -4.5, -2.5, -1.0, 0.0, 1.0, 2.5, 4.5)
    # ~200 observations: slow enough that a volatile spell still shows as big moves and short gaps
    scale_alpha: float = 0.005
    # per-tick RMS move, bps: the volatility_50 edges (0.3, 1, 3, 10) over sqrt(50)
    scale_tag_edges_bps: tuple[float, ...] = (0.042, 0.14, 0.42, 1.4)

    def __post_init__(self) -> None:
        if self.version not in SPEC_VERSIONS:
            raise ValueError(f"spec.version must be one of {quoted_choices(SPEC_VERSIONS)} (the codec spec's "
                             f"version), got {self.version}")
        _check_increasing("move_log2_edges", self.move_log2_edges, positive=False)
        _check_increasing("gap_log2_edges", self.gap_log2_edges, positive=False)
        _check_increasing("scale_tag_edges_bps", self.scale_tag_edges_bps, positive=True)
        if not 0 < self.scale_alpha <= 1:
            raise ValueError(f"scale_alpha must be in (0, 1], got {self.scale_alpha}")
        _check_increasing("gap_edges_ns", self.gap_edges_ns, positive=True)
        _check_increasing("move_edges_bps", self.move_edges_bps, positive=True)
        _check_increasing("size_log2_edges", self.size_log2_edges, positive=False)
        _check_increasing("imbalance_edges", self.imbalance_edges, positive=True)
        if self.imbalance_edges[-1] >= 1:
            raise ValueError(f"imbalance_edges must lie in (0, 1), got {self.imbalance_edges}")
        if not 0 < self.size_ewma_alpha <= 1:
            raise ValueError(f"size_ewma_alpha must be in (0, 1], got {self.size_ewma_alpha}")
        names = [q.name for q in self.questions]
        if len(set(names)) != len(names):
            raise ValueError(f"question names must be unique, got {quoted_list(names)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["questions"] = [q.to_dict() for q in self.questions]
        if self.version == 1:  # byte-for-byte the codec.json v1 checkpoints ship
            for name in ("version", *_V2_FIELDS):
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> BinnedSpec:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown codec spec keys: {', '.join(f'spec.{key}' for key in sorted(unknown))}")
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k != "questions"}
        kw["questions"] = tuple(QuestionSpec.from_dict(q) for q in d.get("questions", []))
        return cls(**kw)
