"""Quality report of the built-in tick model, on held-out synthetic data and the later slice of each real set.

    python -m benchmarks.tick_model_quality            # writes benchmarks/results/tick_model_quality.json

For each data set: next-token log-loss (nats/token) of the model vs unigram and
bigram baselines fitted on that set's training part; for each question, accuracy
and Brier score of the model vs naive baselines fitted on the training part:
`prior` (class frequencies; accuracy = majority class), `persistence` (the label
the last `horizon` ticks had, calibrated: P(label | last label)) and `same`
(literally repeat the last label, one-hot). The model's answer is its next-token
distribution at the question token restricted to the answer tokens, evaluated
with the exact serving layout (engine.service.train.pack_batch). Answer points have
64..126 ticks of context.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import add_data_dir_argument
from connectors.builtin import load_codec
from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from connectors.labels import label_series, marks_of, persistence_series
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.models import BUILTIN_MODEL_DIR
from engine.service.datasets import data_available, load_real
from engine.service.train import pack_batch
from queries.evaluate import calibrated_probs

SEED = 0
WINDOW = 127
MAX_WINDOWS = 120  # per data set: keeps the whole report to a few CPU minutes
BATCH = 4
RESULTS = Path(__file__).resolve().parent / "results" / "tick_model_quality.json"


class EvalSet:
    """One data set: train-part tokens/labels (for baselines) and held-out streams (for scoring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.train_tokens: list[np.ndarray] = []  # flat token arrays
        self.train_labels: list[np.ndarray] = []  # (n_ticks, Q) label index
        self.train_persist: list[np.ndarray] = []
        self.heldout: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # tokens, labels, persist, marks


def _labels(codec: BinnedCodec, marks: np.ndarray, regimes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    qs = list(codec.questions.values())
    lab = np.stack([label_series(q.spec, marks, regimes) for q in qs], axis=1)
    per = np.stack([persistence_series(q.spec, marks) for q in qs], axis=1)
    return lab, per


def build_sets(codec: BinnedCodec, data_dir: Path) -> list[EvalSet]:
    sets = []
    syn = EvalSet("synthetic")
    for seed, train in ((1, True), (2, False)):  # seed 1 = training market, seed 2 = held out
        data = SyntheticMarket(SyntheticConfig(seed=seed)).generate(100_000 if train else 40_000)
        for ticks, truths in data.by_stream().values():
            toks = np.array(codec.encode_stream(ticks), dtype=np.int64)
            marks = marks_of(ticks)
            lab, per = _labels(codec, marks, np.array([t.regime for t in truths]))
            if train:
                syn.train_tokens.append(toks), syn.train_labels.append(lab), syn.train_persist.append(per)
            else:
                syn.heldout.append((toks, lab, per, marks))
    sets.append(syn)
    for ds in load_real(data_dir):
        es = EvalSet(ds.name)
        cut = len(ds.split()[0])
        # Encode the whole series so the held-out slice starts with warm codec state, then split in time.
        toks = np.array(codec.encode_stream(ds.ticks), dtype=np.int64)
        marks = marks_of(ds.ticks)
        lab, per = _labels(codec, marks, None)
        # Training-part labels must not look past the cut.
        lab_tr, per_tr = _labels(codec, marks[:cut], None)
        es.train_tokens.append(toks[: cut * TOKENS_PER_TICK])
        es.train_labels.append(lab_tr)
        es.train_persist.append(per_tr)
        es.heldout.append((toks[cut * TOKENS_PER_TICK :], lab[cut:], per[cut:], marks[cut:]))
        sets.append(es)
    return sets


def ngram_logloss(train: list[np.ndarray], test_pairs: tuple[np.ndarray, np.ndarray], vocab: int) -> dict:
    """Add-0.5 smoothed unigram and bigram log-loss (nats/token) on (previous, next) token pairs."""
    uni = np.full(vocab, 0.5)
    bi = np.full((vocab, vocab), 0.5)
    for t in train:
        np.add.at(uni, t, 1)
        np.add.at(bi, (t[:-1], t[1:]), 1)
    uni /= uni.sum()
    bi /= bi.sum(axis=1, keepdims=True)
    prev, nxt = test_pairs
    return {"unigram": float(-np.log(uni[nxt]).mean()), "bigram": float(-np.log(bi[prev, nxt]).mean())}


@torch.no_grad()
def run_model(model, codec: BinnedCodec, es: EvalSet, rng: np.random.Generator, max_windows: int) -> dict:
    """Model next-token losses and answer distributions at answer points j in [W/2, W-2] of each window."""
    qs = list(codec.questions.values())
    q_tok = np.array([q.tokens[0] for q in qs])
    W, L = WINDOW, WINDOW * TOKENS_PER_TICK
    starts = [(s, st) for s, (toks, *_) in enumerate(es.heldout) for st in range(0, len(toks) // 4 - W, W // 2)]
    pick = sorted(rng.choice(len(starts), size=min(max_windows, len(starts)), replace=False))
    windows = [starts[i] for i in pick]
    lm_nll, pairs_prev, pairs_next = [], [], []
    answers: dict[str, list] = {q.name: [] for q in qs}
    for b0 in range(0, len(windows), BATCH):
        chunk = windows[b0 : b0 + BATCH]
        rows = []
        for s, st in chunk:
            toks, lab, per, _ = es.heldout[s]
            js = np.arange(W // 2, W - 1)
            jj, qq = np.repeat(js, len(qs)), np.tile(np.arange(len(qs)), len(js))
            keep = lab[st + jj, qq] >= 0
            rows.append((toks[st * 4 : st * 4 + L], jj[keep], qq[keep], lab[st + jj[keep], qq[keep]], per[st + jj[keep], qq[keep]]))
        K = max(len(r[1]) for r in rows)
        tick_ids = np.stack([r[0] for r in rows])
        q_ids, q_end = np.zeros((len(rows), K), dtype=np.int64), np.zeros((len(rows), K), dtype=np.int64)
        for b, r in enumerate(rows):
            q_ids[b, : len(r[1])] = q_tok[r[2]]
            q_end[b, : len(r[1])] = (r[1] + 1) * TOKENS_PER_TICK
        batch = pack_batch(tick_ids, q_ids, q_end, np.full((len(rows), K), -100, dtype=np.int64))
        logits = model(input_ids=batch.ids, attention_mask=batch.mask, position_ids=batch.pos).logits.float()
        logp = torch.log_softmax(logits[:, : L - 1], dim=-1)  # (B, L-1, V)
        tgt = batch.ids[:, 1:L]
        nll = -logp.gather(-1, tgt[..., None])[..., 0]
        lm_nll.append(nll[:, L // 2 :].reshape(-1).numpy())  # second half: >= 64 ticks of context
        pairs_prev.append(batch.ids[:, L // 2 : L - 1].reshape(-1).numpy())
        pairs_next.append(tgt[:, L // 2 :].reshape(-1).numpy())
        for b, (_, jj, qq, lab, per) in enumerate(rows):
            for k in range(len(jj)):
                q = qs[qq[k]]
                ans_ids = list(q.answers.values())
                p = calibrated_probs(logits[b, L + k, ans_ids], q.calibration.temperature, q.calibration.bias).numpy()
                answers[q.name].append((p, int(lab[k]), int(per[k])))
    return {
        "lm": float(np.concatenate(lm_nll).mean()),
        "pairs": (np.concatenate(pairs_prev), np.concatenate(pairs_next)),
        "answers": answers,
    }


def _brier(p: np.ndarray, y: np.ndarray) -> float:
    onehot = np.eye(p.shape[1])[y]
    return float(np.square(p - onehot).sum(axis=1).mean())


def score_question(q, answers: list, train_lab: np.ndarray, train_per: np.ndarray) -> dict:
    n_cls = len(q.labels)
    p = np.stack([a[0] for a in answers])
    y = np.array([a[1] for a in answers])
    last = np.array([a[2] for a in answers])
    prior = (np.bincount(train_lab[train_lab >= 0], minlength=n_cls) + 0.5)
    prior = prior / prior.sum()
    out = {"n": len(y), "model": {"acc": float((p.argmax(1) == y).mean()), "brier": _brier(p, y)}}
    out["prior"] = {"acc": float((prior.argmax() == y).mean()), "brier": _brier(np.tile(prior, (len(y), 1)), y)}
    if q.spec.kind != "regime":
        ok = (train_lab >= 0) & (train_per >= 0)
        table = np.full((n_cls, n_cls), 0.5)
        np.add.at(table, (train_per[ok], train_lab[ok]), 1)
        table /= table.sum(axis=1, keepdims=True)
        has = last >= 0
        cond = np.where(has[:, None], table[np.clip(last, 0, None)], prior)
        same = np.where(has[:, None], np.eye(n_cls)[np.clip(last, 0, None)], prior)
        out["persistence"] = {"acc": float((cond.argmax(1) == y).mean()), "brier": _brier(cond, y)}
        out["same"] = {"acc": float((same.argmax(1) == y).mean()), "brier": _brier(same, y)}
    if q.values:
        vals = np.array([q.values[label] for label in q.labels])
        mids = vals[y]
        out["model"]["mae_bps_vs_bucket_mid"] = float(np.abs(p @ vals - mids).mean())
        out["prior"]["mae_bps_vs_bucket_mid"] = float(np.abs(prior @ vals - mids).mean())
    base = [k for k in ("prior", "persistence", "same") if k in out]
    best_acc = max(base, key=lambda k: out[k]["acc"])
    best_brier = min(base, key=lambda k: out[k]["brier"])
    out["best_baseline"] = {"acc": out[best_acc]["acc"], "acc_by": best_acc,
                            "brier": out[best_brier]["brier"], "brier_by": best_brier}
    out["beats_acc"] = out["model"]["acc"] > out[best_acc]["acc"]
    out["beats_brier"] = out["model"]["brier"] < out[best_brier]["brier"]
    return out


def evaluate(model, codec: BinnedCodec, es: EvalSet, rng: np.random.Generator, max_windows: int) -> dict:
    run = run_model(model, codec, es, rng, max_windows)
    result = {"lm_nats_per_token": {"model": run["lm"], **ngram_logloss(es.train_tokens, run["pairs"], codec.vocab_size)}}
    tl, tp = np.concatenate(es.train_labels), np.concatenate(es.train_persist)
    result["questions"] = {}
    for qi, q in enumerate(codec.questions.values()):
        if run["answers"][q.name]:
            result["questions"][q.name] = score_question(q, run["answers"][q.name], tl[:, qi], tp[:, qi])
    return result


def markdown(results: dict) -> str:
    lines = ["| data set | measure | model | unigram / best naive | bigram | wins |", "|---|---|---|---|---|---|"]
    for name, r in results["datasets"].items():
        lm = r["lm_nats_per_token"]
        lines.append(f"| {name} | next-token log-loss (nats) | {lm['model']:.4f} | {lm['unigram']:.4f} | {lm['bigram']:.4f} "
                     f"| {'yes' if lm['model'] < min(lm['unigram'], lm['bigram']) else 'no'} |")
        for qn, s in r["questions"].items():
            b = s["best_baseline"]
            lines.append(f"| {name} | {qn} accuracy (n={s['n']}) | {s['model']['acc']:.4f} | {b['acc']:.4f} ({b['acc_by']}) | "
                         f"| {'yes' if s['beats_acc'] else 'no'} |")
            lines.append(f"| {name} | {qn} Brier | {s['model']['brier']:.4f} | {b['brier']:.4f} ({b['brier_by']}) | "
                         f"| {'yes' if s['beats_brier'] else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Quality report of the built-in tick model")
    parser.add_argument("--model-dir", type=Path, default=BUILTIN_MODEL_DIR)
    parser.add_argument("--max-windows", type=int, default=MAX_WINDOWS, help="per data set")
    parser.add_argument("--out", type=Path, default=RESULTS)
    add_data_dir_argument(parser)
    args = parser.parse_args(argv)
    if not data_available(args.data_dir):
        print(f"tick_model_quality: no real data in {args.data_dir} (pass --data-dir); scoring synthetic data only")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaForCausalLM

    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # shared CPU: one thread avoids OpenMP barrier stalls
    rng = np.random.default_rng(SEED)
    t0 = time.time()
    codec = load_codec(args.model_dir)  # with its calibration.json: answers as serving gives them
    model = LlamaForCausalLM.from_pretrained(args.model_dir, attn_implementation="sdpa").eval()
    model(input_ids=torch.zeros(1, 8, dtype=torch.long))  # warm-up
    results = {"seed": SEED, "model_dir": str(args.model_dir), "window_ticks": WINDOW,
               "max_windows": args.max_windows, "datasets": {}}
    for es in build_sets(codec, args.data_dir):
        results["datasets"][es.name] = evaluate(model, codec, es, rng, args.max_windows)
    results["wall_seconds"] = round(time.time() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    syn = results["datasets"]["synthetic"]["questions"]
    wins = sum(s["beats_acc"] and s["beats_brier"] for s in syn.values())
    print(f"tick_model_quality: synthetic questions won {wins}/{len(syn)}; wall {results['wall_seconds']} s; -> {args.out}")


if __name__ == "__main__":
    main()
