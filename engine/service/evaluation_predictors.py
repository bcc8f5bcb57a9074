"""The predictors `evaluate` compares on a question's scored answer points, and what each is fed.

The checkpoint's answers in each form serving could publish (`model`: calibrated and headed; `alone`: without its
answer head; `raw`: uncalibrated; `adapted` and `adapted_history`: mixed online with the stream's realised labels,
queries/adapt.py, from its test part's start or fed the train part first) and the baselines, fitted on the train
part: each stream's class frequencies (`prior`) and most frequent class (`majority`), a logistic regression on
microstructure features (`logistic`), and the test part's own class frequencies, known only afterwards
(`hindsight`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from connectors.codec import BinnedCodec
from connectors.questions import Question
from engine.service.evaluation_answers import answer_logits, answer_probs, headed_probs
from engine.service.evaluation_options import EvalOptions
from engine.service.evaluation_points import chosen_ticks
from engine.service.features import QuestionHead, fit_logistic
from engine.service.splits import StreamData
from queries.adapt import adapt_series


def history_answers(model: Any, codec: BinnedCodec, sd: StreamData, W: int, options: EvalOptions,
                    advance: Callable[[int], None] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, list[torch.Tensor]] | None:
    """For `adapted_history`: the model's answers on up to `adapt_history` ticks of the train part (ticks, question
    indices, logits), fed to the adaptation first; None without adapt_history."""
    if not (options.adapt and options.adapt_history > 0):
        return None
    hi, hq = sd.points("train")
    kept = np.isin(hi, chosen_ticks(np.unique(hi), W - W // 2, options.adapt_history))
    hi, hq = hi[kept], hq[kept]
    return hi, hq, answer_logits(model, codec, sd, hi, hq, options, advance)


def scored_entries(codec: BinnedCodec, sd: StreamData, x: np.ndarray, ii: np.ndarray, qq: np.ndarray,
                   logits: list[torch.Tensor], history: tuple | None, heads: dict[str, QuestionHead],
                   options: EvalOptions) -> list[tuple]:
    """Per question, one stream's scored test points: (features, labels, logits, adapted, adapted_history, stream
    name, ticks); adapted and adapted_history are None where not scored."""
    entries = []
    for qi, q in enumerate(codec.questions.values()):
        sel = np.nonzero(qq == qi)[0]
        z = [logits[k] for k in sel]
        adaptable = options.adapt and len(sel) and q.spec.kind != "regime"
        head = heads.get(q.name)
        adapted = (adapt_series(ii[sel], headed_probs(codec, qi, z, x[ii[sel]], head), sd.labels[:, qi],
                                sd.parts[2].start, q.spec.horizon) if adaptable else None)
        warm = None
        if adaptable and history is not None:
            hi, hq, history_logits = history
            hsel = np.nonzero(hq == qi)[0]
            points = np.concatenate([hi[hsel], ii[sel]])  # train answers, then the test part's
            probs = headed_probs(codec, qi, [history_logits[k] for k in hsel] + z, x[points], head)
            warm = adapt_series(points, probs, sd.labels[:, qi], 0, q.spec.horizon)[len(hsel):]
        entries.append((x[ii[sel]], sd.labels[ii[sel], qi], z, adapted, warm, sd.name, ii[sel]))
    return entries


def predictor_probs(codec: BinnedCodec, qi: int, q: Question, train_x: list[np.ndarray], train_y: list[np.ndarray],
                    test: list[tuple], options: EvalOptions, heads: dict[str, QuestionHead]
                    ) -> tuple[dict[str, np.ndarray], np.ndarray, list[np.ndarray]]:
    """Each predictor's (len(y), C) answers to question `qi` on the test points (``test``: each stream's
    scored_entries), the baselines fitted on the train parts (``train_x``, ``train_y``: each stream's); with the
    pooled train class frequencies and each stream's own."""
    ty = np.concatenate(train_y)
    n_cls = len(q.labels)
    prior = np.bincount(ty, minlength=n_cls) / len(ty)
    # The naive forecasts are each stream's own (its train part's class frequencies; the pooled ones for a
    # stream with no train answers): pooled over instruments whose classes differ, they look worse than any
    # one instrument's own, and the model beside them better than it is
    own = [np.bincount(sty, minlength=n_cls) / len(sty) if len(sty) else prior
           for sty, t in zip(train_y, test)]
    priors = np.concatenate([np.tile(p, (len(t[1]), 1)) for p, t in zip(own, test)])  # (len(y), C)
    # each stream's classes as its test part turned out (a constant per stream, known only afterwards): the
    # best Brier any forecast blind to each answer's own ticks can score, so a model that beats it calls answers,
    # while one that only leaned into the test part's drift (a random walk's, say) does not (review 190)
    hindsight = np.concatenate([np.tile(np.bincount(t[1], minlength=n_cls) / len(t[1]), (len(t[1]), 1))
                                for t in test if len(t[1])])  # (len(y), C)
    tx = np.concatenate(train_x)
    fit_rows = chosen_ticks(np.arange(len(ty)), 1000, options.max_fit_points)
    logistic = fit_logistic(tx[fit_rows], ty[fit_rows], n_cls)
    z = [p for t in test for p in t[2]]
    test_x = np.concatenate([t[0] for t in test])
    probs = {"model": headed_probs(codec, qi, z, test_x, heads.get(q.name)),
             **({"alone": answer_probs(codec, qi, z)} if q.name in heads else {}),
             **({} if q.calibration.identity else {"raw": answer_probs(codec, qi, z, calibrated=False)}),
             **({"adapted": np.concatenate([t[3] for t in test if len(t[1])])}
                if all(t[3] is not None for t in test if len(t[1])) else {}),
             **({"adapted_history": np.concatenate([t[4] for t in test if len(t[1])])}
                if all(t[4] is not None for t in test if len(t[1])) else {}),
             "prior": priors,
             "majority": np.eye(n_cls)[priors.argmax(axis=1)],
             "logistic": logistic.predict_proba(test_x),
             "hindsight": hindsight}
    return probs, prior, own
