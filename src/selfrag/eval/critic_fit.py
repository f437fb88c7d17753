"""Fitting one model's critic (``selfrag critic fit``): the heads and the floor, from the readings
:mod:`selfrag.eval.critic_read` recorded.

**Fitting** (:mod:`selfrag.reflection.heads`): relevance from the passage
signals, support from the likelihood, sufficiency and confidence from the
answer's readings, each joined by one hidden state's principal directions
when cross-validation says it helps (every recorded layer and position is
tried, given :data:`MIN_PER_CLASS` examples of each label; one is kept only
when it adds at least :data:`HIDDEN_GAIN` to the cross-validated AUROC).
The confidence is fitted on the questions whose gold was kept (whether the
documents hold the answer is the sufficiency's to say) and also tries a probe
of each whole state (one direction fitted to its labels), by the same rule.
Whether a candidate is the joint one joins the support head by the same
rule, as do the two readings that cost a call each (P(True) and the lift,
:data:`~selfrag.methods.critique.signals.CALLED`); the critic asks for them
only when a head reads them.
The sufficiency floor is the out-of-fold probability below which
:data:`FLAGGED` of the answerable fitting questions fall. With ``balance``,
each kind of record (its ``kind``: the ``--data`` it came from) counts as
much as any other in every head and in the floor, however many questions it
holds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import DataError
from ..methods.critique.signals import ANSWER, CALLED, PASSAGE, SUPPORT, closed, support_values
from ..reflection.critic_fit import CriticFit
from ..reflection.heads import auroc, fit_head, out_of_fold, unpack_f16

HIDDEN_GAIN = 0.01  # a hidden state (or the readings that cost a call) join a head only at this much more CV AUROC
DIRECTIONS = 8  # principal directions of a hidden state a head reads
MIN_PER_CLASS = 5 * DIRECTIONS  # a hidden state is tried only with this many examples of each label
FLAGGED = 0.08  # the share of answerable fitting questions the sufficiency floor may flag
POSITIONS = ("prompt", "answer")


def recorded_state(record: dict[str, Any], where: str, layer: int) -> list[float] | None:
    """A reading's hidden state at ``where`` (``prompt`` or ``answer``) of ``layer``; None when not recorded."""
    packed = (record.get("states") or {}).get(where, {}).get(str(layer))
    return None if packed is None else unpack_f16(packed, (-1,)).tolist()


def passage_rows(records: Iterable[dict[str, Any]]) -> tuple[list[dict], list[bool]]:
    rows = [p for r in records for p in r.get("passages", ()) if p.get("relevant") is not None]
    return [{k: p.get(k) for k in PASSAGE} for p in rows], [bool(p["relevant"]) for p in rows]


def support_rows(records: Iterable[dict[str, Any]]) -> tuple[list[dict], list[bool]]:
    rows = [c for r in records for c in candidates_of(r) if c.get("likelihood") is not None and c.get("right") is not None]
    return [support_values(c["likelihood"], bool(c.get("joint")), bool(c.get("closed"))) for c in rows], \
        [bool(c["right"]) for c in rows]


def answered(records: Iterable[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return [r for r in records if r.get("answer") is not None and r.get(label) is not None]


def candidates_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A record's candidates, each with whether it is closed (read before candidates recorded it: as the
    record's answer is; a question with options has only closed answers)."""
    fallback = closed(record.get("answer") or "")
    return [c if "closed" in c else {**c, "closed": fallback} for c in record.get("candidates", ())]


def kind_weights(kinds: Sequence[Any], balance: bool = True) -> list[float] | None:
    """Weights under which each kind of example (each ``--data``) counts as much as any other: every
    kind's weights sum to the same, their mean is 1; None (each example once) with one kind or without
    ``balance``."""
    counts = Counter(kinds)
    if not balance or len(counts) < 2:
        return None
    return [len(kinds) / len(counts) / counts[k] for k in kinds]


def rows_with_kinds(records: Sequence[dict[str, Any]], rows_of: Callable) -> tuple[list[dict], list[bool], list]:
    """``rows_of(records)`` (:func:`passage_rows`, :func:`support_rows`) with each row's record's kind."""
    rows: list[dict] = []
    labels: list[bool] = []
    kinds: list = []
    for r in records:
        x, y = rows_of([r])
        rows.extend(x)
        labels.extend(y)
        kinds.extend([r.get("kind")] * len(y))
    return rows, labels, kinds


def fit_support_head(rows: Sequence[dict], labels: Sequence[bool], seed: int = 0,
                     weights: Sequence[float] | None = None) -> tuple[Any, dict[str, Any]]:
    """The support head over the likelihood, joined by the flags of :data:`SUPPORT` (``joint``: a joint
    candidate and a one-passage one sit at different likelihoods when right; ``closed``: so do a closed
    answer and a written one) by forward selection: the flag that adds most joins while it adds
    :data:`HIDDEN_GAIN` to the cross-validated AUROC; and what each measured."""
    best = fit_head("support", rows, labels, SUPPORT[:1], seed=seed, weights=weights)
    tried = {"likelihood": best.report["cv_auroc"]}
    left = list(SUPPORT[1:])
    while left:
        others = {flag: fit_head("support", rows, labels, (*best.features, flag), seed=seed, weights=weights)
                  for flag in left}
        tried.update({" and ".join(h.features): h.report["cv_auroc"] for h in others.values()})
        flag = max(others, key=lambda f: others[f].report["cv_auroc"] or 0)
        if (others[flag].report["cv_auroc"] or 0) < (best.report["cv_auroc"] or 0) + HIDDEN_GAIN:
            break
        best = others[flag]
        left.remove(flag)
    return best, tried


def fit_answer_head(name: str, records: Sequence[dict[str, Any]], label: str, layers: Sequence[int],
                    seed: int = 0, balance: bool = False) -> tuple[Any, dict[str, Any]]:
    """The head over the answer readings, with the hidden state that adds most, if one adds enough;
    and what each choice measured. Besides a state's principal directions the confidence tries a probe of
    the whole state (:func:`fit_head`'s ``probe``): what tells a right answer from a wrong one need not lie
    along the directions in which the states vary most."""
    rows = [r.get("readings") or {} for r in records]
    labels = [bool(r[label]) for r in records]
    weights = kind_weights([r.get("kind") for r in records], balance)
    # The readings that cost a call join only when they add what a hidden state must add.
    features = tuple(f for f in ANSWER if f not in CALLED)
    best = fit_head(name, rows, labels, features, seed=seed, weights=weights)
    tried = {"readings": best.report["cv_auroc"]}
    called = fit_head(name, rows, labels, ANSWER, seed=seed, weights=weights)
    tried["readings and calls"] = called.report["cv_auroc"]
    if (called.report["cv_auroc"] or 0) >= (best.report["cv_auroc"] or 0) + HIDDEN_GAIN:
        best, features = called, ANSWER
    if min(sum(labels), len(labels) - sum(labels)) < MIN_PER_CLASS:
        return best, tried  # too few of one label to fit directions of a hidden state
    for where in POSITIONS:
        for layer in layers:
            states = [recorded_state(r, where, layer) for r in records]
            if sum(s is not None for s in states) < len(states) // 2:
                continue
            for probe in (False, True) if name == "confidence" else (False,):
                head = fit_head(name, rows, labels, features, states=states, where=where, layer=layer,
                                k=DIRECTIONS, probe=probe, seed=seed, weights=weights)
                tried[("probe " if probe else "") + f"{where}@{layer}"] = head.report["cv_auroc"]
                if (head.report["cv_auroc"] or 0) >= (best.report["cv_auroc"] or 0) + HIDDEN_GAIN:
                    best = head
    return best, tried


def floor_for(head: Any, records: Sequence[dict[str, Any]], seed: int = 0,
              balance: bool = False) -> tuple[float, dict[str, Any]]:
    """The sufficiency floor: the out-of-fold probability below which :data:`FLAGGED` of the answerable
    questions fall (with ``balance``, of each kind's on average); with the shares of answerable and
    unanswerable questions it flags (weighted alike)."""
    rows = [r.get("readings") or {} for r in records]
    labels = [bool(r["sufficient"]) for r in records]
    part = head.hidden
    states = None if part is None else [recorded_state(r, part.where, part.layer) for r in records]
    weights = kind_weights([r.get("kind") for r in records], balance) or [1.0] * len(records)
    oof = out_of_fold(head.name, rows, labels, head.features, states=states,
                      where=part.where if part else "", layer=part.layer if part else -1,
                      k=len(part.directions) if part else 0, seed=seed, weights=weights,
                      probe=part is not None and part.fitted == "probe")
    answerable = [(p, w) for p, w, r in zip(oof, weights, records, strict=True) if r["answerable"]]
    other = [(p, w) for p, w, r in zip(oof, weights, records, strict=True) if not r["answerable"]]
    floor = _quantile(answerable, FLAGGED) if answerable else 0.5
    shares = {"flagged_answerable": _share(answerable, floor), "flagged_unanswerable": _share(other, floor),
              "oof_auroc_unanswerable": auroc([-p for p in oof], [not r["answerable"] for r in records])}
    return floor, shares


def _quantile(weighted: Sequence[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile of weighted values (with equal weights, numpy's linear quantile)."""
    values, weights = (np.array(x, dtype=float) for x in zip(*sorted(weighted), strict=True))
    at = np.cumsum(weights) - weights[0]  # each value's place, 0 .. total - first weight
    return float(np.interp(q * at[-1], at, values)) if at[-1] > 0 else float(values[0])


def _share(weighted: Sequence[tuple[float, float]], floor: float) -> float | None:
    total = sum(w for _, w in weighted)
    return None if not total else sum(w for v, w in weighted if v < floor) / total


def fit_critic(records: Sequence[dict[str, Any]], *, model: str, sha256: str, layers: Sequence[int],
               meta: dict[str, Any] | None = None, seed: int = 0, balance: bool = False) -> CriticFit:
    """The four heads and the sufficiency floor, from readings (see the module docstring); with
    ``balance``, each kind of record (its ``kind``: which data it came from) counts equally in every head
    and the floor."""
    heads, report = {}, {}
    rows, labels, kinds = rows_with_kinds(records, passage_rows)
    if len(set(labels)) == 2:
        heads["relevance"] = fit_head("relevance", rows, labels, PASSAGE, seed=seed,
                                      weights=kind_weights(kinds, balance))
    rows, labels, kinds = rows_with_kinds(records, support_rows)
    if len(set(labels)) == 2:
        heads["support"], report["support_tried"] = fit_support_head(rows, labels, seed, kind_weights(kinds, balance))
    for name, label in (("sufficiency", "sufficient"), ("confidence", "right")):
        chosen = answered(records, label)
        if name == "confidence":  # right when the documents hold it: whether they do is the sufficiency's
            chosen = [r for r in chosen if r.get("answerable", True)]
        if len({bool(r[label]) for r in chosen}) == 2 and len(chosen) >= 10:
            heads[name], report[f"{name}_tried"] = fit_answer_head(name, chosen, label, layers, seed, balance)
    floor = 0.5
    if "sufficiency" in heads:
        floor, report["floor"] = floor_for(heads["sufficiency"], answered(records, "sufficient"), seed, balance)
    if not heads:
        raise DataError("the readings hold no labelled example of any head: the questions need gold answers "
                        "and supporting_titles (see docs/methods.md, fitting a critic)")
    used = sorted({h.hidden.layer for h in heads.values() if h.reads_hidden}, key=lambda x: (x < 0, x))
    seconds = [r["seconds"] for r in records if isinstance(r.get("seconds"), (int, float))]
    info = {"questions": len(records), "seconds_per_question": round(sum(seconds) / len(seconds), 2)
            if seconds else None, **(meta or {}), **report}
    return CriticFit(heads, floor, model, sha256, tuple(used), info)


def summary_lines(fit: CriticFit) -> list[str]:
    """One line per head: what it reads, its examples, cross-validated AUROC and ECE; then the floor."""
    lines = []
    for name, head in fit.heads.items():
        r = head.report
        reads = ", ".join(head.features) + (f" + {hidden_name(head.hidden)}" if head.reads_hidden else "")
        lines.append(f"{name}: {r['n']} examples ({r['positives']} positive), cross-validated AUROC "
                     f"{_fmt(r.get('cv_auroc'))}, ECE {_fmt(r.get('cv_ece'))}; reads {reads}")
    floor = fit.meta.get("floor") or {}
    if "sufficiency" in fit.heads:
        lines.append(f"sufficiency floor {fit.threshold:.3f}: flags {_pct(floor.get('flagged_answerable'))} of "
                     f"answerable and {_pct(floor.get('flagged_unanswerable'))} of gold-removed fitting "
                     "questions (out of fold)")
    return lines


def hidden_name(part: Any) -> str:
    """What a head reads of a hidden state, in words."""
    what = "a probe of the" if part.fitted == "probe" else f"{len(part.directions)} directions of the"
    return f"{what} {part.where} state of layer {part.layer}"


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"
