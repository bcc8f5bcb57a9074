"""queries/adapt.py: the online answer mix against the offline experiment's own vectorised code path."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pytest

from queries.adapt import EXPERTS, NO_LABEL, OnlineMix, adapt_series, simplex_weights

# -- a slice of the offline study's analysis code (sls4_r500, cold; docs/model.md), ported as it is: the reference --


def _cum_at(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    c = np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x, 0)])
    return c[r]


def _online_counts(labels, start, h, C, t):
    L = np.zeros((len(labels), C))
    ok = (labels >= 0) & (np.arange(len(labels)) >= start)
    L[np.nonzero(ok)[0], labels[ok]] = 1
    cum = np.vstack([np.zeros((1, C)), np.cumsum(L, 0)])
    return cum[np.clip(t - h + 1, 0, len(labels))]


def _decayed_counts(labels, start, h, C, t, half_life):
    lam = 0.5 ** (1.0 / half_life)
    L = np.zeros((len(labels), C))
    ok = (labels >= 0) & (np.arange(len(labels)) >= start)
    L[np.nonzero(ok)[0], labels[ok]] = 1
    D = np.empty_like(L)
    acc = np.zeros(C)
    for k in range(len(L)):
        acc = lam * acc + L[k]
        D[k] = acc
    D = np.vstack([np.zeros((1, C)), D])
    return D[np.clip(t - h + 1, 0, len(labels))]


def _simplex_ls(experts, y, r, lam, w0):
    E = np.stack(experts, 2)  # (n, C, K)
    n, C, K = E.shape
    Y = np.eye(C)[y]
    G = _cum_at(np.einsum("nck,ncj->nkj", E, E), r) + lam * np.eye(K)
    b = _cum_at(np.einsum("nck,nc->nk", E, Y), r) + lam * np.asarray(w0)
    best, best_obj = np.zeros((n, K)), np.full(n, np.inf)
    for m in range(1, K + 1):
        for S in combinations(range(K), m):
            S = list(S)
            A = np.zeros((n, m + 1, m + 1))
            A[:, :m, :m] = G[:, S][:, :, S]
            A[:, :m, m] = 1
            A[:, m, :m] = 1
            rhs = np.concatenate([b[:, S], np.ones((n, 1))], 1)
            sol = np.linalg.solve(A, rhs[..., None])[..., 0]
            w = np.zeros((n, K))
            w[:, S] = sol[:, :m]
            ok = (w[:, S] >= -1e-12).all(1)
            obj = np.einsum("nk,nkj,nj->n", w, G, w) - 2 * (w * b).sum(1)
            take = ok & (obj < best_obj)
            best[take], best_obj[take] = w[take], obj[take]
    best = np.clip(best, 0, None)
    best /= best.sum(1, keepdims=True)
    return np.einsum("nck,nk->nc", E, best), best


def reference_sls4(ii, p, labels, start, h):
    """The experiment's sls4_r500 on answers at sorted ticks ii with model answers p, counts from `start`."""
    C = p.shape[1]
    y = labels[ii]
    r = np.searchsorted(ii + h, ii, side="right")  # answers realised before each answer
    cnt = _online_counts(labels, start, h, C, ii)
    N = cnt.sum(1, keepdims=True)
    mbar = np.where(r[:, None] > 0, _cum_at(p, r) / np.maximum(r[:, None], 1), p)
    fm = (cnt + 20.0 * mbar) / (N + 20.0)
    sh = p * fm / np.maximum(mbar, 1e-6)
    sh = sh / sh.sum(1, keepdims=True)
    Dr = _decayed_counts(labels, start, h, C, ii, 500)
    fr = (Dr + 20.0 * fm) / (Dr.sum(1, keepdims=True) + 20.0)
    return _simplex_ls([p, sh, fm, fr], y, r, 10.0, [0.5, 0.5, 0, 0])


# -- a synthetic stream: labels with a shifted class balance, a model that knows a little of them ----------


def synthetic(seed: int = 0, ticks: int = 1500, C: int = 3, h: int = 5):
    rng = np.random.default_rng(seed)
    labels = rng.choice(C, size=ticks, p=[0.6, 0.3, 0.1][:C] / np.sum([0.6, 0.3, 0.1][:C]))
    labels[-h:] = NO_LABEL  # the last `horizon` points have no future
    logits = rng.normal(size=(ticks, C)) + 1.5 * np.eye(C)[np.maximum(labels, 0)] - np.array([0.0, 0.5, 1.0])[:C]
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    start = 100
    # answers in runs (as evaluate's chosen_ticks), not at every labelled tick, none without a label
    ii = np.array([t for t in range(start, ticks - h) if (t // 40) % 3 != 1])
    return labels, p, ii, start, h


def test_reproduces_the_experiments_numbers() -> None:
    labels, p, ii, start, h = synthetic()
    want, _ = reference_sls4(ii, p[ii], labels, start, h)
    got = adapt_series(ii, p[ii], labels, start, h)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    y = labels[ii]
    brier = lambda q: np.square(q - np.eye(3)[y]).sum(1).mean()  # noqa: E731
    assert brier(got) < brier(p[ii])  # the mix learns the stream's class balance the model lacks


def test_cold_start_is_the_models_answer() -> None:
    mix = OnlineMix(3, horizon=5, start=10)
    p = np.array([0.2, 0.5, 0.3])
    assert np.array_equal(mix.weights(), np.array([0.5, 0.5, 0.0, 0.0]))
    np.testing.assert_allclose(mix.answer(p, 10), p, rtol=0, atol=1e-15)


def test_weights_stay_on_the_simplex() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        E = rng.dirichlet(np.ones(3), size=(50, 4)).transpose(0, 2, 1)  # (n, C, K)
        y = rng.integers(0, 3, size=50)
        gram = np.einsum("nck,ncj->kj", E, E) + 10 * np.eye(4)
        target = np.einsum("nck,nc->k", E, np.eye(3)[y]) + 10 * np.array([0.5, 0.5, 0, 0])
        w, face = simplex_weights(gram, target)
        assert w.shape == (len(EXPERTS),) and (w >= 0).all() and abs(w.sum() - 1) < 1e-12
        # a guessed face is kept only where it is optimal: every guess gives the enumeration's weights
        for guess in [(0,), (1, 2), (0, 1, 2, 3), face]:
            warm, warm_face = simplex_weights(gram, target, guess)
            np.testing.assert_allclose(warm, w, rtol=0, atol=1e-12)
            assert warm_face == face or np.allclose(warm, w, atol=1e-12)


def test_labels_come_before_answers_that_need_them() -> None:
    mix = OnlineMix(3, horizon=5, start=0)
    with pytest.raises(ValueError, match="needs the labels up to 1"):
        mix.answer(np.full(3, 1 / 3), 6)
    with pytest.raises(ValueError, match="labels come in order"):
        mix.realise(1, 0)


def test_serialised_state_gives_bit_identical_answers() -> None:
    labels, p, ii, start, h = synthetic(seed=2)
    cut = len(ii) // 2

    def run(mix: OnlineMix, answers: np.ndarray) -> list[np.ndarray]:
        out = []
        for t in answers.tolist():
            for due in mix.labels_due(t):
                mix.realise(due, int(labels[due]))
            out.append(mix.answer(p[t], t))
        return out

    whole = OnlineMix(3, h, start)
    straight = run(whole, ii)
    first = OnlineMix(3, h, start)
    run(first, ii[:cut])
    state = json.loads(json.dumps(first.to_state()))  # through plain JSON, as a data directory keeps it
    resumed = run(OnlineMix.from_state(state), ii[cut:])
    assert all(np.array_equal(a, b) for a, b in zip(straight[cut:], resumed))
    assert whole.to_state() == OnlineMix.from_state(json.loads(json.dumps(whole.to_state()))).to_state()


def test_answers_refed_after_a_restart_leave_the_same_mix_without_publishing() -> None:
    # a restart re-feeds the answers published before it with publish=False (no weights solved for them):
    # the answers published after that are bit-identical to a run that published every one
    labels, p, ii, start, h = synthetic(seed=4)
    cut = len(ii) // 2
    published, refed = OnlineMix(3, h, start), OnlineMix(3, h, start)
    outputs = []
    for n, t in enumerate(ii.tolist()):
        for mix in (published, refed):
            for due in mix.labels_due(t):
                mix.realise(due, int(labels[due]))
        a = published.answer(p[t], t)
        b = refed.answer(p[t], t, publish=n >= cut)
        assert (b is None) == (n < cut)
        if b is not None:
            outputs.append((a, b))
    assert outputs and all(np.array_equal(a, b) for a, b in outputs)


def test_memory_is_bounded_by_the_horizon() -> None:
    labels, p, _, _, h = synthetic(seed=3, ticks=3000)
    mix = OnlineMix(3, h, start=0)
    for t in range(h, 3000 - h):
        for due in mix.labels_due(t):
            mix.realise(due, int(labels[due]))
        mix.answer(p[t], t)
        assert len(mix.pending) <= h
    assert mix.realised == 3000 - 3 * h
