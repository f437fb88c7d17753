"""Fitting one model's critic (``selfrag critic fit``): read labelled questions, fit the heads, pick the floor.

**Reading.** Each question goes through the default ``self_rag`` up to its
conclusion (:meth:`~selfrag.methods.catalog.self_rag.method.SelfRAG.reflect`)
with a fit that has no heads yet, so nothing is judged and everything the
heads will read is recorded: every retrieved passage's evidence signals, the
answer with its sequence probability and the hidden states of its own call,
P(True), the likelihood after the question alone; on every
``candidates_every``-th question, the one-passage candidates too, with their
likelihood over the answer's passages. One JSON line per question is appended
to the readings file as soon as it is read, so a stopped fit resumes where it
stopped and never reads a question twice.

**Labels** come free with the data: a passage is relevant when its title is
one of the question's supporting titles; an answer (the selected one or a
candidate) is right when its F1 against a gold answer is at least 0.5; the
passages read are sufficient when the question kept its gold paragraphs and
the answer read one of them (a question over its own abstract alone,
``gold_contexts: all``: when it kept its abstract). About half the fitting questions lose their
gold paragraphs (``remove_gold``), so the heads see insufficient passages as
often as sufficient ones.

**Fitting** (:mod:`selfrag.reflection.heads`): relevance from the passage
signals, support from the likelihood, sufficiency and confidence from the
answer's readings, each joined by one hidden state's principal directions
when cross-validation says it helps (every recorded layer and position is
tried, given :data:`MIN_PER_CLASS` examples of each label; one is kept only
when it adds at least :data:`HIDDEN_GAIN` to the cross-validated AUROC).
Whether a candidate is the joint one joins the support head by the same
rule, as do the two readings that cost a call each (P(True) and the lift,
:data:`~selfrag.methods.critique.signals.CALLED`); the critic asks for them
only when a head reads them.
The sufficiency floor is the out-of-fold probability below which
:data:`FLAGGED` of the answerable fitting questions fall.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..methods.catalog.self_rag.candidates import Write
from ..methods.core.answer_shape import finalize_answer
from ..methods.critique.fits import installed
from ..methods.critique.signals import ANSWER, CALLED, PASSAGE, SUPPORT, closed, support_values
from ..reflection.critic_fit import CriticFit
from ..reflection.heads import auroc, ece, fit_head, out_of_fold, pack_f16, unpack_f16
from ..types import Question
from .metrics import best_over, f1_score

RIGHT_F1 = 0.5  # an answer at least this close to a gold one counts as right
HIDDEN_GAIN = 0.01  # a hidden state (or the readings that cost a call) join a head only at this much more CV AUROC
DIRECTIONS = 8  # principal directions of a hidden state a head reads
MIN_PER_CLASS = 5 * DIRECTIONS  # a hidden state is tried only with this many examples of each label
FLAGGED = 0.08  # the share of answerable fitting questions the sufficiency floor may flag
POSITIONS = ("prompt", "answer")


def hidden_layers(llm: Any) -> tuple[int, ...]:
    """The layers recorded while reading: the middle, three quarters up, the final normalised state
    (none where the backend cannot read hidden states)."""
    if not getattr(llm, "supports_hidden", False):
        return ()
    try:
        n = int(llm.n_layers)
    except (AttributeError, TypeError, ValueError):
        return ()
    return tuple(sorted({n // 2, (3 * n) // 4})) + (-1,)


def reading_config(spec: str | None, dataset: str, path: str, remove_gold: float, overrides: Sequence[Any] = ()):
    """The config questions are read with: the default ``self_rag`` retrieving each question's own ten
    passages (the joint reads the five with the best evidence), gold removed from ``remove_gold`` of them,
    no LLM cache (the readings file is what resumes)."""
    from ..config import load_config

    flags = [("architecture.name", "self_rag", "critic fit"), ("self_rag.top_k", 10, "critic fit"),
             ("self_rag.critic", "fitted", "critic fit"), ("data.dataset", dataset, "--data"),
             ("data.path", path, "--data"), ("data.remove_gold", remove_gold, "--remove-gold")]
    if spec:
        flags.append(("llm.spec", spec, "--llm"))
    return load_config(None, [*overrides, *flags], base={"cache": {"enabled": False}})


def gold_titles(question: Question) -> set[str]:
    return {str(t) for t in question.metadata.get("supporting_titles") or ()}


def is_right(question: Question, text: str) -> bool | None:
    """F1 of ``text`` against the best gold answer reaches :data:`RIGHT_F1` (None: no gold answer)."""
    f1 = f1_of(question, text)
    return None if f1 is None else f1 >= RIGHT_F1


def _states(hidden: dict | None) -> dict[str, dict[str, str]]:
    return {where: {str(layer): pack_f16(vector) for layer, vector in layers.items()}
            for where, layers in (hidden or {}).items()}


def f1_of(question: Question, text: str) -> float | None:
    return best_over(f1_score, finalize_answer(question, text), question.answers) if question.answers else None


def reading(question: Question, state: Any, seconds: float, steps: Sequence[Any]) -> dict[str, Any]:
    """One question's readings and labels (a JSON line of the readings file); ``steps``: the run's, whose
    actions and times say what each part of the reading cost."""
    gold = gold_titles(question)
    docs, best = state.docs, state.best
    passages = [{"title": d.title, **signals, "relevant": (d.title in gold) if gold else None}
                for d, signals in zip(docs, getattr(state.critic, "passages", []) or [], strict=False)]
    record: dict[str, Any] = {"id": question.id, "answerable": bool(question.metadata.get("answerable", True)),
                              "passages": passages, "seconds": round(seconds, 3),
                              "calls": sum(s.llm_calls for s in steps),
                              "steps": [[s.action, round(s.latency_ms / 1000, 3), s.llm_calls] for s in steps]}
    if best is None or not best.text.strip():
        return {**record, "answer": None}
    read = [i for i in best.indices if 0 < i <= len(docs)]
    sufficient = None if not gold else record["answerable"] and any(docs[i - 1].title in gold for i in read)
    if question.metadata.get("gold_contexts") == "all":  # every passage is its own abstract's, or none is
        sufficient = record["answerable"] and bool(read)
    candidates = [c for c in [state.joint, *state.candidates] if c is not None and c.text.strip()]
    return {**record, "answer": best.text, "joint": best.joint, "read": read, "f1": f1_of(question, best.text),
            "right": is_right(question, best.text),
            "sufficient": sufficient,
            "readings": dict(state.assessment.readings) if state.assessment is not None else {},
            "states": _states(best.states),
            "candidates": [{"joint": c.joint, "likelihood": c.seq if c.joint else c.details.get("evidence_likelihood"),
                            "right": is_right(question, c.text), "closed": closed(c.text, question)}
                           for c in candidates]}


@dataclass
class Reader:
    """Reads fitting questions with ``method`` (a ``self_rag``), recording ``layers``."""

    method: Any
    layers: tuple[int, ...]
    # One question in four gets its one-passage candidates (the support head's examples), as the lab's
    # fits were read: enough for the support head, and the embedded model's default fit under 30 minutes.
    candidates_every: int = 4

    def __post_init__(self) -> None:
        plan = self.method.write.plan
        self.all_candidates = Write(replace(plan, on_demand=False))
        self.on_demand = self.method.write

    async def read(self, question: Question, number: int) -> dict[str, Any]:
        method = self.method
        method.write = self.all_candidates if self.candidates_every and number % self.candidates_every == 0 \
            else self.on_demand
        started = time.perf_counter()
        run = method.start(question)
        with installed(CriticFit({}, 0.5, layers=self.layers), "reading for a fit"):
            state = await method.reflect(question, run)
        return reading(question, state, time.perf_counter() - started, run.steps())


def done_ids(path: Path) -> set[str]:
    """The ids a readings file already holds (a torn last line, from a kill, is dropped and rewritten)."""
    if not path.is_file():
        return set()
    ids, good = set(), []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            ids.add(str(record["id"]))
            good.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    text = "".join(f"{line}\n" for line in good)
    if text != path.read_text(encoding="utf-8"):
        path.write_text(text, encoding="utf-8")
    return ids


async def read_all(reader: Reader, questions: Sequence[Question], path: Path,
                   tick: Callable[[int, int, dict[str, Any] | None], None] | None = None) -> int:
    """Read every question not yet in ``path``, appending each line as it is read; the number read now."""
    seen = done_ids(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    read = 0
    if tick:
        tick(len(seen & {q.id for q in questions}), len(questions), None)
    with path.open("a", encoding="utf-8") as out:
        for number, question in enumerate(questions):
            if question.id in seen:
                continue
            record = await reader.read(question, number)
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            read += 1
            if tick:
                tick(len(seen) + read, len(questions), record)
    return read


def load_readings(path: Path) -> list[dict[str, Any]]:
    try:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the readings ({exc.__class__.__name__}); delete it to read again") \
            from None
    return [_unknown_containment(r) for r in records]


def _unknown_containment(record: dict[str, Any]) -> dict[str, Any]:
    """A record read before closed answers had no containment: theirs is unknown, not 0."""
    readings = record.get("readings")
    known = not readings or readings.get("contained") is None or not closed(record.get("answer") or "")
    return record if known else {**record, "readings": {**readings, "contained": None}}


# -- fitting ---------------------------------------------------------------------------------------


def _state(record: dict[str, Any], where: str, layer: int) -> list[float] | None:
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


def fit_support_head(rows: Sequence[dict], labels: Sequence[bool], seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """The support head over the likelihood, joined by the flags of :data:`SUPPORT` (``joint``: a joint
    candidate and a one-passage one sit at different likelihoods when right; ``closed``: so do a closed
    answer and a written one) by forward selection: the flag that adds most joins while it adds
    :data:`HIDDEN_GAIN` to the cross-validated AUROC; and what each measured."""
    best = fit_head("support", rows, labels, SUPPORT[:1], seed=seed)
    tried = {"likelihood": best.report["cv_auroc"]}
    left = list(SUPPORT[1:])
    while left:
        others = {flag: fit_head("support", rows, labels, (*best.features, flag), seed=seed) for flag in left}
        tried.update({" and ".join(h.features): h.report["cv_auroc"] for h in others.values()})
        flag = max(others, key=lambda f: others[f].report["cv_auroc"] or 0)
        if (others[flag].report["cv_auroc"] or 0) < (best.report["cv_auroc"] or 0) + HIDDEN_GAIN:
            break
        best = others[flag]
        left.remove(flag)
    return best, tried


def fit_answer_head(name: str, records: Sequence[dict[str, Any]], label: str, layers: Sequence[int],
                    seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """The head over the answer readings, with the hidden state that adds most, if one adds enough;
    and what each choice measured."""
    rows = [r.get("readings") or {} for r in records]
    labels = [bool(r[label]) for r in records]
    # The confidence is calibrated on the questions whose gold was kept: the gold-removed half (there
    # for the sufficiency head) would pull every probability down; the sufficiency line covers those.
    calibrate_on = [bool(r.get("answerable", True)) for r in records] if name == "confidence" else None
    # The readings that cost a call join only when they add what a hidden state must add.
    features = tuple(f for f in ANSWER if f not in CALLED)
    best = fit_head(name, rows, labels, features, seed=seed, calibrate_on=calibrate_on)
    tried = {"readings": best.report["cv_auroc"]}
    called = fit_head(name, rows, labels, ANSWER, seed=seed, calibrate_on=calibrate_on)
    tried["readings and calls"] = called.report["cv_auroc"]
    if (called.report["cv_auroc"] or 0) >= (best.report["cv_auroc"] or 0) + HIDDEN_GAIN:
        best, features = called, ANSWER
    if min(sum(labels), len(labels) - sum(labels)) < MIN_PER_CLASS:
        return best, tried  # too few of one label to fit directions of a hidden state
    for where in POSITIONS:
        for layer in layers:
            states = [_state(r, where, layer) for r in records]
            if sum(s is not None for s in states) < len(states) // 2:
                continue
            head = fit_head(name, rows, labels, features, states=states, where=where, layer=layer, k=DIRECTIONS,
                            seed=seed, calibrate_on=calibrate_on)
            tried[f"{where}@{layer}"] = head.report["cv_auroc"]
            if (head.report["cv_auroc"] or 0) >= (best.report["cv_auroc"] or 0) + HIDDEN_GAIN:
                best = head
    return best, tried


def floor_for(head: Any, records: Sequence[dict[str, Any]], seed: int = 0) -> tuple[float, dict[str, Any]]:
    """The sufficiency floor: the out-of-fold probability below which :data:`FLAGGED` of the answerable
    questions fall; with the shares of answerable and unanswerable questions it flags."""
    rows = [r.get("readings") or {} for r in records]
    labels = [bool(r["sufficient"]) for r in records]
    part = head.hidden
    states = None if part is None else [_state(r, part.where, part.layer) for r in records]
    oof = out_of_fold(head.name, rows, labels, head.features, states=states,
                      where=part.where if part else "", layer=part.layer if part else -1,
                      k=len(part.directions) if part else 0, seed=seed)
    answerable = [p for p, r in zip(oof, records, strict=True) if r["answerable"]]
    other = [p for p, r in zip(oof, records, strict=True) if not r["answerable"]]
    floor = float(np.quantile(answerable, FLAGGED)) if answerable else 0.5
    shares = {"flagged_answerable": _share(answerable, floor), "flagged_unanswerable": _share(other, floor),
              "oof_auroc_unanswerable": auroc([-p for p in oof], [not r["answerable"] for r in records])}
    return floor, shares


def _share(values: Sequence[float], floor: float) -> float | None:
    return None if not values else sum(v < floor for v in values) / len(values)


def fit_critic(records: Sequence[dict[str, Any]], *, model: str, sha256: str, layers: Sequence[int],
               meta: dict[str, Any] | None = None, seed: int = 0) -> CriticFit:
    """The four heads and the sufficiency floor, from readings (see the module docstring)."""
    heads, report = {}, {}
    rows, labels = passage_rows(records)
    if len(set(labels)) == 2:
        heads["relevance"] = fit_head("relevance", rows, labels, PASSAGE, seed=seed)
    rows, labels = support_rows(records)
    if len(set(labels)) == 2:
        heads["support"], report["support_tried"] = fit_support_head(rows, labels, seed)
    for name, label in (("sufficiency", "sufficient"), ("confidence", "right")):
        chosen = answered(records, label)
        if len({bool(r[label]) for r in chosen}) == 2 and len(chosen) >= 10:
            heads[name], report[f"{name}_tried"] = fit_answer_head(name, chosen, label, layers, seed)
    floor = 0.5
    if "sufficiency" in heads:
        floor, report["floor"] = floor_for(heads["sufficiency"], answered(records, "sufficient"), seed)
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
        reads = ", ".join(head.features) + (f" + {head.hidden.where} state of layer {head.hidden.layer}"
                                            if head.reads_hidden else "")
        lines.append(f"{name}: {r['n']} examples ({r['positives']} positive), cross-validated AUROC "
                     f"{_fmt(r.get('cv_auroc'))}, ECE {_fmt(r.get('cv_ece'))}; reads {reads}")
    floor = fit.meta.get("floor") or {}
    if "sufficiency" in fit.heads:
        lines.append(f"sufficiency floor {fit.threshold:.3f}: flags {_pct(floor.get('flagged_answerable'))} of "
                     f"answerable and {_pct(floor.get('flagged_unanswerable'))} of gold-removed fitting "
                     "questions (out of fold)")
    return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


# -- measuring a fit on other questions (the lab's reports) ----------------------------------------


def scored(fit: CriticFit, records: Sequence[dict[str, Any]]) -> dict[str, list[tuple[float, bool]]]:
    """Each head's (probability, label) pairs over ``records`` read like the fitting ones."""
    out: dict[str, list[tuple[float, bool]]] = {name: [] for name in fit.heads}
    if head := fit.head("relevance"):
        rows, labels = passage_rows(records)
        out["relevance"] = [(head.probability(r), y) for r, y in zip(rows, labels, strict=True)]
    if head := fit.head("support"):
        rows, labels = support_rows(records)
        out["support"] = [(head.probability(r), y) for r, y in zip(rows, labels, strict=True)]
    for name, label in (("sufficiency", "sufficient"), ("confidence", "right")):
        if head := fit.head(name):
            for r in answered(records, label):
                states = None
                if head.reads_hidden:
                    states = {head.hidden.where: {head.hidden.layer: _state(r, head.hidden.where, head.hidden.layer)}}
                out[name].append((head.probability(r.get("readings") or {}, states), bool(r[label])))
    return out


def measures(pairs: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    probs, labels = [p for p, _ in pairs], [y for _, y in pairs]
    return {"n": len(pairs), "positives": sum(labels), "auroc": auroc(probs, labels), "ece": ece(probs, labels)}
