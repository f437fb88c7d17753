"""A confidence for an answer: reflection signals combined by a rule fitted on development questions.

The signals of one answer (:class:`Signals`; each may be missing):

* ``seq``: the mean log-probability of the answer's tokens as the model wrote
  them (the sequence probability);
* ``p_true``: P(True) when the model is asked whether its answer is correct
  according to the passages (Kadavath et al., 2022);
* ``lift``: how much the passages raise the answer's likelihood, the mean
  token log-probability of the answer after the passages minus that after the
  question alone (a support reading that needs no label question);
* ``contained``: the share of the answer's words that occur in the passages
  it was written from;
* ``relevance``: the lexical evidence prior of the passages read (the mean of
  the best two: a two-hop question needs both);
* ``agreement``: how far other drafts of the answer, sampled from the same
  prompt, say the same thing (the mean token F1 between the answer and each
  draft): an answer the model would not write again is less sure.

:class:`ConfidenceModel` is a logistic regression over standardised signals
(a missing signal counts as its development mean): ``confidence = sigmoid(b +
Σ w_i (x_i - mean_i) / scale_i)``. The packaged fit (``confidence.json``
beside this module) says which questions and which model it was fitted on;
``selfrag confidence fit`` fits another from finished runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from ..errors import ConfigError
from ..normalize import token_overlap
from . import heads
from .heads import logistic

Signal = Literal["seq", "p_true", "lift", "contained", "relevance", "agreement"]
SIGNALS: tuple[str, ...] = get_args(Signal)
PACKAGED = "confidence.json"


@dataclass(frozen=True)
class Signals:
    seq: float | None = None
    p_true: float | None = None
    lift: float | None = None
    contained: float | None = None
    relevance: float | None = None
    agreement: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        return {k: (None if v is None else round(v, 4)) for k, v in asdict(self).items()}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Signals:
        return cls(**{k: _number(data.get(k)) for k in SIGNALS})


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def agreement(answer: str, drafts: Sequence[str]) -> float | None:
    """The ``agreement`` signal: the mean token F1 between ``answer`` and each draft (None: no draft)."""
    if not drafts:
        return None
    return sum(token_overlap(answer, draft)[0] for draft in drafts) / len(drafts)


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True)
class ConfidenceModel:
    """Weights over standardised signals; ``source`` says what it was fitted on."""

    features: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.features)
        if not (len(self.means) == len(self.scales) == len(self.weights) == n):
            raise ConfigError("a confidence model needs one mean, scale and weight per feature")
        unknown = set(self.features) - set(SIGNALS)
        if unknown:
            raise ConfigError(f"unknown confidence signal(s) {sorted(unknown)}; use: {', '.join(SIGNALS)}")

    def score(self, signals: Signals) -> float:
        z = self.intercept
        for name, mean, scale, weight in zip(self.features, self.means, self.scales, self.weights, strict=True):
            value = getattr(signals, name)
            x = mean if value is None else value
            z += weight * (x - mean) / scale
        return sigmoid(z)

    def as_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "means": list(self.means), "scales": list(self.scales),
                "weights": list(self.weights), "intercept": self.intercept, "source": self.source}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "confidence model") -> ConfidenceModel:
        try:
            return cls(tuple(data["features"]), tuple(map(float, data["means"])), tuple(map(float, data["scales"])),
                       tuple(map(float, data["weights"])), float(data["intercept"]), str(data.get("source", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: not a confidence model ({exc}); refit it with `selfrag confidence fit`") from None

    @classmethod
    def load(cls, path: str | Path | None = None) -> ConfidenceModel:
        """The model at ``path`` (a JSON file ``selfrag confidence fit`` wrote), or the packaged one."""
        if path is None:
            text = resources.files(__package__).joinpath(PACKAGED).read_text(encoding="utf-8")
            return cls.from_dict(json.loads(text), PACKAGED)
        file = Path(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"confidence model {file}: cannot be read ({exc.__class__.__name__})") from None
        return cls.from_dict(data, str(file))


def fit(rows: Sequence[Signals], right: Sequence[bool], features: Sequence[str] = SIGNALS, *,
        l2: float = 1.0, source: str = "") -> ConfidenceModel:
    """Logistic regression of ``right`` on the standardised ``features`` (L2 penalty ``l2`` on the
    weights, not the intercept), by Newton's method; a missing value counts as the feature's mean."""
    import numpy as np

    if len(rows) != len(right) or not rows:
        raise ConfigError("fitting a confidence model needs one label per row and at least one row")
    cols = []
    means, scales = [], []
    for name in features:
        values = [getattr(r, name) for r in rows]
        known = [v for v in values if v is not None]
        mean = float(np.mean(known)) if known else 0.0
        scale = float(np.std(known)) if len(known) > 1 else 1.0
        scale = scale if scale > 1e-9 else 1.0
        cols.append([((mean if v is None else v) - mean) / scale for v in values])
        means.append(mean)
        scales.append(scale)
    y = np.array([1.0 if r else 0.0 for r in right])
    beta = logistic(np.column_stack(cols) if cols else np.zeros((len(rows), 0)), y, l2)
    return ConfidenceModel(tuple(features), tuple(means), tuple(scales), tuple(float(b) for b in beta[1:]),
                           float(beta[0]), source)


def auroc(scores: Sequence[float], right: Sequence[bool]) -> float | None:
    """The probability that a right answer scores above a wrong one (ties count half); None without both."""
    return heads.auroc(scores, right)


def risk_coverage(scores: Sequence[float], quality: Sequence[float]) -> list[tuple[float, float]]:
    """(coverage, mean quality of the answers kept) when answering only the most confident first;
    one point per answer kept, most confident first (ties in the given order)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    out, total = [], 0.0
    for n, i in enumerate(order, start=1):
        total += quality[i]
        out.append((n / len(order), total / n))
    return out


def quality_at(curve: Sequence[tuple[float, float]], coverage: float) -> float | None:
    """The mean quality of the answers kept at the first point reaching ``coverage``."""
    for cov, q in curve:
        if cov >= coverage - 1e-9:
            return q
    return None


def area_under(curve: Sequence[tuple[float, float]]) -> float | None:
    """The mean of the kept answers' quality over every coverage step (higher is better)."""
    return sum(q for _, q in curve) / len(curve) if curve else None
