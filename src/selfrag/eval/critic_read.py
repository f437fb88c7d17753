"""Reading labelled questions for a critic fit (``selfrag critic fit``): one JSON line per question.

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
candidate) to a choice question is right when its choice is the gold one,
as the evaluation scores it; to any other, when its F1 against a gold
answer is at least 0.5, or when it is a sentence or two that contains a
gold answer (Self-RAG's *match*): F1 alone calls "The museum is closed on
Mondays." wrong against "Mondays", and would teach a model that answers in
sentences that its right answers are wrong. A readings file written under
an earlier label rule (no ``labels`` of :data:`LABELS`) is read again, not
mixed in. The passages read are sufficient when the question kept its gold
paragraphs and the answer read one of them (a question over its own
abstract alone, ``gold_contexts: all``: when it kept its abstract). About
half the fitting questions lose their gold paragraphs (``remove_gold``), so
the heads see insufficient passages as often as sufficient ones.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..methods.catalog.self_rag.candidates import Write
from ..methods.core.answer_shape import finalize_answer
from ..methods.critique.fits import installed
from ..methods.critique.signals import closed
from ..reflection.critic_fit import CriticFit
from ..reflection.heads import pack_f16
from ..types import Question
from .metrics import best_over, f1_score, match
from .scoring import accuracy

RIGHT_F1 = 0.5  # an answer at least this close to a gold one counts as right
RIGHT_MATCH_WORDS = 40  # ... and so does one of at most this many words that contains a gold answer
LABELS = 2  # the label rule's version, recorded in every reading (1: F1 alone, unrecorded)


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
    """A choice question (yes/no/maybe, options): the choice read from ``text`` is the gold one, as the
    evaluation scores it. Any other: F1 of ``text`` against the best gold answer reaches :data:`RIGHT_F1`,
    or ``text`` has at most :data:`RIGHT_MATCH_WORDS` words and contains a gold answer (None: no gold)."""
    f1 = f1_of(question, text)
    if f1 is None:
        return None
    chosen = accuracy(question, text)
    if chosen is not None:
        return chosen >= 1
    answer = finalize_answer(question, text)
    return f1 >= RIGHT_F1 or (len(answer.split()) <= RIGHT_MATCH_WORDS and best_over(match, answer, question.answers) > 0)


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
    record: dict[str, Any] = {"id": question.id, "labels": LABELS,
                              "answerable": bool(question.metadata.get("answerable", True)),
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
    """The ids a readings file already holds under the current label rule (a torn last line, from a kill,
    and a record labelled by an earlier rule are dropped, the file rewritten, and read again)."""
    if not path.is_file():
        return set()
    ids, good, stale = set(), [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            if record.get("labels") != LABELS:
                stale += 1
                continue
            ids.add(str(record["id"]))
            good.append(line)
        except (ValueError, KeyError, TypeError, AttributeError):  # torn, or not a reading
            continue
    if stale:
        logging.getLogger("selfrag").warning("%s: %d readings were labelled by an earlier rule; reading them again",
                                             path, stale)
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
