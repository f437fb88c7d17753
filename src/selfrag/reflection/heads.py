"""Reflection heads: small fitted readers that turn what a model read into a calibrated probability.

A :class:`Head` is a logistic regression over standardised scalar readings
(a passage's evidence prior, an answer's sequence probability, P(True), ...)
and, optionally, over a model's hidden state projected on a few fitted
directions (:class:`HiddenPart`: the principal components of the fitting
states, or one direction a probe fitted to the labels over the whole state),
followed by Platt calibration fitted on out-of-fold scores:

    p = sigmoid(a · (b0 + Σ w_i (x_i − mean_i) / scale_i + Σ v_j c_j·(h − μ) / s_j) + c)

A missing reading counts as its fitting mean (it moves nothing); a missing
hidden state, as the mean state. Everything here is plain numpy and pure:
fitting (:func:`fit_head`, ridge-penalised Newton steps with the penalty chosen
by cross-validation), scoring, the measures a fit is judged by (:func:`auroc`,
:func:`ece`) and the JSON form a fit file stores (hidden directions as base64
float16).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

L2_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
FOLDS = 5
# A probe's penalty over a whole standardised state (hundreds to thousands of dimensions, hundreds of
# examples): fixed and strong, since choosing it by cross-validation on every fit costs minutes.
PROBE_L2 = 300.0


def sigmoid(z: np.ndarray | float) -> np.ndarray | float:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z))) if isinstance(z, np.ndarray) else 0.5 * (1 + math.tanh(0.5 * z))


def logistic(x: np.ndarray, y: np.ndarray, l2: float, w: np.ndarray | None = None) -> np.ndarray:
    """Weights (intercept first) of a logistic regression of ``y`` on ``x`` (without its column of ones),
    the L2 penalty ``l2`` on every weight but the intercept, each example counted ``w`` times (default
    once); Newton's method."""
    x1 = np.column_stack([np.ones(len(x)), x])
    w = np.ones(len(y)) if w is None else np.asarray(w, dtype=float)
    beta = np.zeros(x1.shape[1])
    penalty = np.diag([0.0] + [l2] * x.shape[1])
    for _ in range(100):
        p = sigmoid(x1 @ beta)
        grad = x1.T @ (w * (y - p)) - penalty @ beta
        hess = x1.T @ (x1 * (w * p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(x1.shape[1])
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return beta


def folds(n: int, k: int = FOLDS, seed: int = 0) -> list[np.ndarray]:
    """``k`` disjoint index sets covering ``range(n)`` (a seeded shuffle)."""
    order = np.random.default_rng(seed).permutation(n)
    return [order[i::k] for i in range(k)]


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """P(a positive scores above a negative), ties counting half (Mann-Whitney); None without both."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if not pos or not neg:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def ece(probs: Sequence[float], labels: Sequence[bool], bins: int = 10) -> float | None:
    """Expected calibration error: the mean |accuracy − confidence| over equal-width bins, weighted by size."""
    p = np.asarray(probs, dtype=float)
    y = np.asarray(labels, dtype=float)
    if not len(p):
        return None
    which = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            total += inside.sum() * abs(y[inside].mean() - p[inside].mean())
    return float(total / len(p))


def pack_f16(array: np.ndarray | Sequence[float]) -> str:
    """An array as base64 float16 (how fit and readings files store hidden states and directions)."""
    return base64.b64encode(np.asarray(array, dtype="<f2").tobytes()).decode("ascii")


def unpack_f16(text: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f2").astype(float).reshape(shape)


@dataclass(frozen=True)
class HiddenPart:
    """A hidden state (``where``: ``prompt`` or ``answer``, of ``layer``) projected on fitted directions."""

    where: str
    layer: int
    mean: np.ndarray  # (d,)
    directions: np.ndarray  # (k, d), each scaled so its projection has unit variance on the fitting states
    fitted: str = "pca"  # "pca": the states' principal directions; "probe": one direction fitted to labels

    @property
    def label(self) -> str:
        """Which state it reads and how, in short: ``prompt@14``, ``probe answer@21``."""
        return ("probe " if self.fitted == "probe" else "") + f"{self.where}@{self.layer}"

    def project(self, state: Sequence[float] | None) -> np.ndarray:
        if state is None or len(state) != len(self.mean):
            return np.zeros(len(self.directions))
        return self.directions @ (np.asarray(state, dtype=float) - self.mean)

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "layer": self.layer, "dims": list(self.directions.shape),
                "mean": pack_f16(self.mean), "directions": pack_f16(self.directions), "fitted": self.fitted}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HiddenPart:
        k, d = (int(x) for x in data["dims"])
        return cls(str(data["where"]), int(data["layer"]), unpack_f16(data["mean"], (d,)),
                   unpack_f16(data["directions"], (k, d)), str(data.get("fitted", "pca")))

    @classmethod
    def fit(cls, where: str, layer: int, states: np.ndarray, k: int) -> HiddenPart:
        """The first ``k`` principal directions of ``states`` (rows), scaled to unit variance."""
        mean = states.mean(axis=0)
        centred = states - mean
        _, sing, vt = np.linalg.svd(centred, full_matrices=False)
        k = min(k, len(sing))
        sd = sing[:k] / math.sqrt(max(len(states) - 1, 1))
        return cls(where, layer, mean, vt[:k] / np.where(sd > 1e-9, sd, 1.0)[:, None])

    @classmethod
    def probe(cls, where: str, layer: int, states: np.ndarray, labels: np.ndarray,
              weights: np.ndarray | None = None, l2: float = PROBE_L2) -> HiddenPart:
        """One direction fitted to ``labels``: a ridge logistic regression over the whole state, each
        dimension standardised (a probe), scaled so its projection has unit variance on ``states``."""
        mean = states.mean(axis=0)
        sd = states.std(axis=0)
        sd = np.where(sd > 1e-9, sd, 1.0)
        direction = logistic((states - mean) / sd, labels, l2, weights)[1:] / sd
        spread = float(np.std((states - mean) @ direction))
        return cls(where, layer, mean, (direction / (spread if spread > 1e-12 else 1.0))[None, :], "probe")


@dataclass(frozen=True)
class Head:
    """A fitted reader (see the module docstring); ``report`` says how it was fitted and how it did."""

    name: str
    features: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    calibration: tuple[float, float] = (1.0, 0.0)  # Platt's a, c
    hidden: HiddenPart | None = None
    hidden_weights: tuple[float, ...] = ()
    report: dict[str, Any] = field(default_factory=dict)

    def logit(self, values: Mapping[str, float | None], states: Mapping[str, Mapping[int, Sequence[float]]] | None
              = None) -> float:
        z = self.intercept
        for name, mean, scale, weight in zip(self.features, self.means, self.scales, self.weights, strict=True):
            value = values.get(name)
            if value is not None and math.isfinite(value):
                z += weight * (value - mean) / scale
        if self.hidden is not None and self.hidden_weights:
            state = (states or {}).get(self.hidden.where, {}).get(self.hidden.layer)
            z += float(np.dot(self.hidden_weights, self.hidden.project(state)))
        return z

    def probability(self, values: Mapping[str, float | None],
                    states: Mapping[str, Mapping[int, Sequence[float]]] | None = None) -> float:
        a, c = self.calibration
        return float(sigmoid(a * self.logit(values, states) + c))

    @property
    def reads_hidden(self) -> bool:
        return self.hidden is not None and bool(self.hidden_weights)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "features": list(self.features), "means": list(self.means),
                "scales": list(self.scales), "weights": list(self.weights), "intercept": self.intercept,
                "calibration": list(self.calibration),
                "hidden": None if self.hidden is None else self.hidden.as_dict(),
                "hidden_weights": list(self.hidden_weights), "report": self.report}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Head:
        hidden = data.get("hidden")
        return cls(
            str(data["name"]), tuple(data["features"]), tuple(map(float, data["means"])),
            tuple(map(float, data["scales"])), tuple(map(float, data["weights"])), float(data["intercept"]),
            tuple(map(float, data.get("calibration", (1.0, 0.0)))),  # type: ignore[arg-type]
            None if hidden is None else HiddenPart.from_dict(hidden),
            tuple(map(float, data.get("hidden_weights", ()))), dict(data.get("report") or {}),
        )


def _standardise(rows: Sequence[Mapping[str, float | None]], features: Sequence[str]
                 ) -> tuple[np.ndarray, list[float], list[float]]:
    cols, means, scales = [], [], []
    for name in features:
        values = [r.get(name) for r in rows]
        known = [float(v) for v in values if v is not None and math.isfinite(v)]
        mean = float(np.mean(known)) if known else 0.0
        scale = float(np.std(known)) if len(known) > 1 else 1.0
        scale = scale if scale > 1e-9 else 1.0
        cols.append([0.0 if v is None or not math.isfinite(v) else (float(v) - mean) / scale for v in values])
        means.append(mean)
        scales.append(scale)
    x = np.column_stack(cols) if cols else np.zeros((len(rows), 0))
    return x, means, scales


def _cv_logits(x: np.ndarray, y: np.ndarray, l2: float, seed: int, w: np.ndarray) -> np.ndarray:
    """Out-of-fold logits of a ridge logistic regression."""
    out = np.zeros(len(y))
    for test in folds(len(y), min(FOLDS, len(y)), seed):
        train = np.setdiff1d(np.arange(len(y)), test)
        if len(set(y[train])) < 2:
            continue
        beta = logistic(x[train], y[train], l2, w[train])
        out[test] = beta[0] + x[test] @ beta[1:]
    return out


def _log_loss(logits: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    p = np.clip(sigmoid(logits), 1e-9, 1 - 1e-9)
    return float(-np.average(y * np.log(p) + (1 - y) * np.log(1 - p), weights=w))


def fit_head(name: str, rows: Sequence[Mapping[str, float | None]], labels: Sequence[bool],
             features: Sequence[str], *, states: Sequence[Sequence[float] | None] | None = None,
             where: str = "", layer: int = -1, k: int = 0, seed: int = 0,
             weights: Sequence[float] | None = None, probe: bool = False) -> Head:
    """Fit a head on ``rows`` (readings by name) and ``labels``: the L2 penalty chosen from
    :data:`L2_GRID` by cross-validated log loss, Platt calibration on the out-of-fold logits; with
    ``states`` and ``k`` > 0, the hidden state's first ``k`` principal directions join the readings; with
    ``states`` and ``probe``, one direction a probe fits to the labels instead (:func:`_probe`);
    ``weights``: how much each example counts in every fit and loss (default: once each)."""
    y = np.array([1.0 if v else 0.0 for v in labels])
    if len(y) < 4 or len(set(y)) < 2:
        raise ValueError(f"fitting the {name} head needs both labels among at least 4 examples")
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    x, means, scales = _standardise(rows, features)
    part = None
    if states is not None and probe:
        part, column = _probe(where, layer, states, y, w, seed)
        if part is not None:
            x = np.column_stack([x, column])
    elif states is not None and k > 0:
        known = np.array([s for s in states if s is not None], dtype=float)
        if len(known) >= 4:
            part = HiddenPart.fit(where, layer, known, k)
            x = np.column_stack([x, np.array([part.project(s) for s in states])])
    scored = [(_log_loss(_cv_logits(x, y, l2, seed, w), y, w), l2) for l2 in L2_GRID]
    l2 = min(scored)[1]
    oof = _cv_logits(x, y, l2, seed, w)
    platt = logistic(oof[:, None], y, 1e-6, w)
    if platt[1] < 0:
        # Scores that rank backwards out of fold are noise (cross-validation anti-correlates a fit that
        # learned nothing with the labels it left out): the base rate, not the scores turned around.
        rate = float(np.clip(np.average(y, weights=w), 1e-6, 1 - 1e-6))
        platt = np.array([math.log(rate / (1 - rate)), 0.0])
    beta = logistic(x, y, l2, w)
    n_scalar = len(features)
    report = {"n": int(len(y)), "positives": int(y.sum()), "l2": l2,
              "cv_auroc": auroc(oof.tolist(), y.astype(bool).tolist()),
              "cv_ece": ece(sigmoid(platt[1] * oof + platt[0]).tolist(), y.astype(bool).tolist())}
    return Head(name, tuple(features), tuple(means), tuple(scales), tuple(float(b) for b in beta[1:n_scalar + 1]),
                float(beta[0]), (float(platt[1]), float(platt[0])), part,
                tuple(float(b) for b in beta[n_scalar + 1:]) if part is not None else (), report)


def _probe(where: str, layer: int, states: Sequence[Sequence[float] | None], y: np.ndarray, w: np.ndarray,
           seed: int) -> tuple[HiddenPart | None, np.ndarray]:
    """A probe fitted on the examples that have a state, and its cross-fitted projection of every
    example: each fold's by a probe fitted without that fold, so the head learns its weight from
    projections as honest as a new question's (the probe's own fitting examples would overstate it)."""
    dims = next((len(s) for s in states if s is not None), 0)
    full = np.array([s if s is not None else np.zeros(dims) for s in states], dtype=float)
    usable = np.array([s is not None for s in states])

    def fitted(keep: np.ndarray) -> HiddenPart | None:
        if keep.sum() < 4 or len(set(y[keep])) < 2:
            return None
        return HiddenPart.probe(where, layer, full[keep], y[keep], w[keep])

    column = np.zeros(len(y))
    for test in folds(len(y), min(FOLDS, len(y)), seed + 2):
        keep = usable.copy()
        keep[test] = False
        if (part := fitted(keep)) is not None:
            column[test] = [part.project(states[i])[0] for i in test.tolist()]
    return fitted(usable), column


def out_of_fold(name: str, rows: Sequence[Mapping[str, float | None]], labels: Sequence[bool],
                features: Sequence[str], *, states: Sequence[Sequence[float] | None] | None = None,
                where: str = "", layer: int = -1, k: int = 0, seed: int = 0,
                weights: Sequence[float] | None = None, probe: bool = False) -> list[float]:
    """Each example's probability from a head fitted without its fold (what a threshold is chosen on)."""
    n = len(labels)
    out = [float(np.mean(labels))] * n
    for test in folds(n, min(FOLDS, n), seed + 1):
        train = [i for i in range(n) if i not in set(test.tolist())]
        if len({bool(labels[i]) for i in train}) < 2 or len(train) < 4:
            continue
        head = fit_head(name, [rows[i] for i in train], [labels[i] for i in train], features,
                        states=None if states is None else [states[i] for i in train],
                        where=where, layer=layer, k=k, seed=seed, probe=probe,
                        weights=None if weights is None else [weights[i] for i in train])
        for i in test.tolist():
            seen = None if states is None or states[i] is None else {where: {layer: states[i]}}
            out[i] = head.probability(rows[i], seen)
    return out
