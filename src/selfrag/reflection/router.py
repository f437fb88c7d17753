"""The ``adaptive_rag`` router: which strategy a question goes to, from features of its text alone.

Strategies, cheapest first (:data:`STRATEGIES`): ``no_retrieval`` (the model
alone), ``vanilla_rag`` (one retrieval) and ``ircot`` (retrieval interleaved
with reasoning). A :class:`Router` scores each strategy it knows with a
linear function of standardised question features (:func:`features`):

    z_c = b_c + Σ_i w_ci (x_i − mean_i) / scale_i

and sends the question to the strategy with the highest score (ties go to
the cheaper one). A fitted router's scores are one-vs-rest logistic
regressions (:func:`fit_router`, over the labels :func:`label` gives each
fitting question: the cheapest strategy that answered it right, else the one
with the best F1); a hand-written router (``fitted: false``) uses the same
form with weights chosen by hand and says its rule in words. A feature a
router names that the question does not have (a future reading) counts as
its mean: it moves nothing.

Everything here is plain numpy and pure: features, scoring, fitting, and the
JSON form of a fit file (:meth:`Router.read`, :meth:`Router.write`,
:func:`packaged`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .heads import L2_GRID, folds, logistic, sigmoid

STRATEGIES = ("no_retrieval", "vanilla_rag", "ircot")
FORMAT = 1
PACKAGED_DIR = "routers"
DEFAULT_ROUTER = "default.json"
# A strategy no fitting question was labelled with gets this score, so it is never chosen.
NEVER = -20.0

FEATURES = (
    "words", "entities", "comparison", "bridge", "quoted", "has_digits", "asks_number",
    "wh_who", "wh_what", "wh_which", "wh_when", "wh_where", "wh_how", "yes_no",
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F][\w'\u2019.\-&]*")
_WH = {"who": "wh_who", "whom": "wh_who", "whose": "wh_who", "what": "wh_what", "which": "wh_which",
       "when": "wh_when", "where": "wh_where", "how": "wh_how"}
_AUX = _words("is are was were do does did can could has have had will would should shall may might")
# Words that start a question without naming anything: a capital there is the sentence's, not a name's.
_OPENERS = frozenset([*_WH, *_AUX, "in", "on", "at", "by", "for", "from", "of", "to", "the", "a", "an", "this",
                      "that", "these", "those", "name", "why", "between", "during", "after", "before", "as"])
# Lower-case words that may sit inside a name ("Lord of the Rings"); not "and", which joins two names more often.
_CONNECTORS = _words("of the de la le du del da di von van der for")
_COMPARISON = _words(
    "both either neither same than compared comparison difference different older oldest younger youngest "
    "earlier earliest later latest first longer longest shorter shortest larger largest bigger biggest smaller "
    "smallest higher highest lower lowest more most fewer less greater greatest farther further")
_BRIDGE = _words("who whom whose which that where when")
_ASKS_NUMBER = re.compile(r"\b(how (many|much|old|long|far|tall|big)|what (year|percentage|number)|which year)\b",
                          re.IGNORECASE)


def _name_goes_on(words: list[str], i: int) -> bool:
    """Whether the connectors from ``words[i]`` on lead to another capitalised word."""
    while i < len(words) and words[i].lower() in _CONNECTORS:
        i += 1
    return i < len(words) and words[i][:1].isupper()


def _entities(words: list[str]) -> int:
    """Runs of capitalised words (joined across connectors such as "of the"), the first word skipped
    when it only opens the question."""
    count, inside, i = 0, False, 0
    while i < len(words):
        word = words[i]
        capital = word[:1].isupper() and not (i == 0 and word.lower() in _OPENERS)
        if capital:
            count += 0 if inside else 1
            inside = True
        elif inside and word.lower() in _CONNECTORS and _name_goes_on(words, i):
            pass  # "Lord of the Rings": the name goes on
        else:
            inside = False
        i += 1
    return count


def features(question: str) -> dict[str, float]:
    """The router's features of a question's text (see docs/methods.md, ``adaptive_rag``)."""
    words = _WORD.findall(question)
    lower = [w.lower().rstrip(".") for w in words]
    out = dict.fromkeys(FEATURES, 0.0)
    out["words"] = float(len(words))
    out["entities"] = float(_entities(words))
    out["comparison"] = float(any(w in _COMPARISON for w in lower) or " or " in f" {' '.join(lower)} ")
    out["bridge"] = float(sum(w in _BRIDGE for w in lower[1:]) + len(re.findall(r"\w['\u2019]s\b", question))
                          + len(re.findall(r"\bof the\b", question, re.IGNORECASE)))
    out["quoted"] = float(bool(re.search(r"[\"\u201c][^\"\u201d]+[\"\u201d]", question)))
    out["has_digits"] = float(bool(re.search(r"\d", question)))
    out["asks_number"] = float(bool(_ASKS_NUMBER.search(question)))
    if lower and lower[0] in _AUX:
        out["yes_no"] = 1.0
    else:
        wh = next((w for w in lower if w in _WH), None)
        if wh is not None:
            out[_WH[wh]] = 1.0
    return out


@dataclass(frozen=True)
class Router:
    """Scores per strategy from question features (see the module docstring)."""

    classes: tuple[str, ...]
    features: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: dict[str, tuple[float, ...]]
    intercepts: dict[str, float]
    fitted: bool = True
    rule: str = ""  # a hand-written router's rule, in words
    model: str = ""  # the model whose runs it was fitted on
    meta: dict[str, Any] = field(default_factory=dict)  # what it was fitted on, and how it did

    def scores(self, values: Mapping[str, float | None]) -> dict[str, float]:
        """Each strategy's linear score ``z_c`` for a question's feature values."""
        x = []
        for name, mean, scale in zip(self.features, self.means, self.scales, strict=True):
            value = values.get(name)
            x.append(0.0 if value is None or not math.isfinite(value) else (float(value) - mean) / scale)
        return {c: self.intercepts[c] + float(np.dot(self.weights[c], x)) for c in self.classes}

    def shares(self, values: Mapping[str, float | None]) -> dict[str, float]:
        """Each strategy's one-vs-rest probability, normalised to sum to 1 (what the trace shows)."""
        probs = {c: float(sigmoid(z)) for c, z in self.scores(values).items()}
        total = sum(probs.values()) or 1.0
        return {c: round(p / total, 4) for c, p in probs.items()}

    def choose(self, values: Mapping[str, float | None], allowed: Sequence[str] = STRATEGIES) -> str | None:
        """The allowed strategy with the best score (ties: the cheaper); None when it knows none of them."""
        scores = self.scores(values)
        known = [c for c in STRATEGIES if c in scores and c in allowed]
        return max(known, key=lambda c: (scores[c], -STRATEGIES.index(c))) if known else None

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": "selfrag router", "fitted": self.fitted, "rule": self.rule,
                "model": self.model, "classes": list(self.classes), "features": list(self.features),
                "means": list(self.means), "scales": list(self.scales),
                "weights": {c: list(w) for c, w in self.weights.items()}, "intercepts": dict(self.intercepts),
                "meta": self.meta}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> Router:
        try:
            if int(data.get("format", 0)) != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this selfrag reads {FORMAT}")
            classes = tuple(str(c) for c in data["classes"])
            unknown = [c for c in classes if c not in STRATEGIES]
            if not classes or unknown:
                raise ValueError(f"classes must be among {', '.join(STRATEGIES)}, got {list(classes)}")
            names = tuple(str(f) for f in data["features"])
            means = tuple(float(v) for v in data["means"])
            scales = tuple(float(v) for v in data["scales"])
            weights = {c: tuple(float(v) for v in data["weights"][c]) for c in classes}
            if any(len(v) != len(names) for v in (means, scales, *weights.values())):
                raise ValueError("means, scales and each class's weights need one value per feature")
            if any(not s > 0 for s in scales):
                raise ValueError("every scale must be above 0")
            intercepts = {c: float(data["intercepts"][c]) for c in classes}
            return cls(classes, names, means, scales, weights, intercepts, bool(data.get("fitted", True)),
                       str(data.get("rule") or ""), str(data.get("model") or ""), dict(data.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: not a router fit ({exc}); write one with `selfrag router fit`") from None

    @classmethod
    def read(cls, path: str | Path) -> Router:
        file = Path(path).expanduser()
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"router fit {file}: no such file; write one with `selfrag router fit`") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"router fit {file}: cannot be read ({exc.__class__.__name__})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"router fit {file}: not a router fit (not a JSON object)")
        return cls.from_dict(data, f"router fit {file}")

    def write(self, path: str | Path) -> None:
        """Write through a rename, so a kill leaves the old file or the new one."""
        file = Path(path).expanduser()
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(file.name + ".tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(file)


def packaged(name: str = DEFAULT_ROUTER) -> Router | None:
    """A router shipped in the package (``reflection/routers/NAME``), None when there is none."""
    item = resources.files(__package__).joinpath(PACKAGED_DIR, name)
    if not item.is_file():
        return None
    return Router.from_dict(json.loads(item.read_text(encoding="utf-8")), f"packaged router {name}")


# -- labels and fitting ---------------------------------------------------------------------


def label(results: Mapping[str, tuple[float, bool]]) -> str | None:
    """A fitting question's label from each strategy's (F1, right): the cheapest strategy that answered it
    right, else the one with the best F1 (ties: the cheaper); None when no strategy answered it right and
    all scored the same F1: such a question says nothing about which strategy helps (labelled "cheapest",
    a weak model's many unanswered questions would teach the router never to retrieve)."""
    ran = [s for s in STRATEGIES if s in results]
    if not ran:
        raise ValueError("no strategy's result to label the question with")
    right = [s for s in ran if results[s][1]]
    if right:
        return right[0]
    if len({results[s][0] for s in ran}) == 1:
        return None
    return max(ran, key=lambda s: (results[s][0], -STRATEGIES.index(s)))


def _standardise(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> tuple[np.ndarray, list[float], list[float]]:
    x = np.array([[float(r.get(n) or 0.0) for n in names] for r in rows], dtype=float).reshape(len(rows), len(names))
    means = x.mean(axis=0) if len(rows) else np.zeros(len(names))
    scales = x.std(axis=0) if len(rows) > 1 else np.ones(len(names))
    scales = np.where(scales > 1e-9, scales, 1.0)
    return (x - means) / scales, [float(m) for m in means], [float(s) for s in scales]


def _one_vs_rest(x: np.ndarray, y: np.ndarray, classes: Sequence[str], l2: float) -> dict[str, np.ndarray]:
    """Per class, the intercept and weights of a ridge logistic regression of "this class" on ``x``."""
    out = {}
    for c in classes:
        target = (y == c).astype(float)
        if target.sum() == 0 or target.sum() == len(target):  # one label only: a constant, not a regression
            out[c] = np.concatenate([[NEVER if target.sum() == 0 else -NEVER], np.zeros(x.shape[1])])
        else:
            out[c] = logistic(x, target, l2)
    return out


def _predict(betas: Mapping[str, np.ndarray], x: np.ndarray) -> list[str]:
    classes = list(betas)
    z = np.column_stack([betas[c][0] + x @ betas[c][1:] for c in classes])
    # The best score per question; ties go to the cheaper strategy.
    return [classes[max(range(len(classes)), key=lambda j: (row[j], -STRATEGIES.index(classes[j])))] for row in z]


def fit_router(rows: Sequence[Mapping[str, float]], labels: Sequence[str], names: Sequence[str] = FEATURES,
               *, seed: int = 0) -> tuple[Router, list[str]]:
    """Fit one-vs-rest ridge logistic regressions of each label on the features, the penalty chosen from
    :data:`~selfrag.reflection.heads.L2_GRID` by cross-validated accuracy (ties: the stronger penalty).
    Returns the router and each question's out-of-fold choice (what the router's quality is judged by)."""
    y = np.array(list(labels))
    if len(y) < 4:
        raise ValueError(f"fitting a router needs at least 4 labelled questions, got {len(y)}")
    unknown = sorted(set(labels) - set(STRATEGIES))
    if unknown:
        raise ValueError(f"unknown strategies among the labels: {', '.join(unknown)}")
    classes = [c for c in STRATEGIES if c in set(labels)]
    x, means, scales = _standardise(rows, names)
    parts = folds(len(y), min(5, len(y)), seed)

    def out_of_fold(l2: float) -> list[str]:
        chosen = [""] * len(y)
        for test in parts:
            train = np.setdiff1d(np.arange(len(y)), test)
            for i, c in zip(test.tolist(), _predict(_one_vs_rest(x[train], y[train], classes, l2), x[test]),
                            strict=True):
                chosen[i] = c
        return chosen

    tried = [(float(np.mean(np.array(out_of_fold(l2)) == y)), l2) for l2 in L2_GRID]
    accuracy, l2 = max(tried, key=lambda t: (t[0], t[1]))
    oof = out_of_fold(l2)
    betas = _one_vs_rest(x, y, classes, l2)
    counts = {c: int((y == c).sum()) for c in classes}
    report = {"n": int(len(y)), "labels": counts, "l2": l2, "cv_accuracy": round(accuracy, 4),
              "majority_accuracy": round(max(counts.values()) / len(y), 4)}
    router = Router(tuple(classes), tuple(names), tuple(means), tuple(scales),
                    {c: tuple(float(b) for b in betas[c][1:]) for c in classes},
                    {c: float(betas[c][0]) for c in classes}, meta={"report": report})
    return router, oof
