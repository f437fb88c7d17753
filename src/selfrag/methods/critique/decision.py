"""Self-RAG's retrieval decision: one call, read as a probability where the backend allows it.

A small instruction model asked "do you need documents?" answers with a
strong prior that has little to do with the question (it may say "no" to
every multi-hop question). Its next-token probabilities still order the
questions: P(yes) is higher for a question about specific people and events
than for "what is 9 times 8?". So where the backend returns log-probabilities
the decision is ``P(yes) / (P(yes) + P(no)) >= threshold`` (the threshold:
:data:`DEFAULT_THRESHOLD`, docs/methods.md); otherwise the written yes/no is
used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

from ...errors import ConfigError
from ...llm.base import chat
from ...prompts import load_prompt, load_prompt_file, placeholders, render
from ...reflection import score as S
from ...reflection.parse import parse_retrieval_decision
from ...reflection.tokens import LABEL_GROUPS
from ...types import Question
from ..core.trace import Run, StepRecord, shorten
from . import calibration_store

# Used only if the packaged prompts/self_rag.txt is missing.
FALLBACK_DECISION_PROMPT = (
    "Decide whether you need to look up external documents to answer the question "
    "accurately.\n\nQuestion: {question}\n\n"
    'Do you need to retrieve documents? Reply with exactly "yes" or "no".\n'
)
SYSTEM = "You decide whether a question needs facts looked up in reference documents."
TOP_LOGPROBS = 20
# Where P(yes) falls differs widely from model to model, so no fixed threshold serves
# every model. "auto" asks the
# model about these written anchor questions once and puts the threshold halfway
# between the mean P(yes) of the two groups (docs/methods.md, "The retrieval decision").
DEFAULT_THRESHOLD = "auto"


class RetrievalMode(StrEnum):
    """Whether a method asks before it retrieves."""

    # With documents: retrieve first (cheap), decide from what was found (steps/look_first.py);
    # with none to look at, as adaptive.
    LOOK_FIRST = "look_first"
    ADAPTIVE = "adaptive"  # the model decides from the question alone (one call; the paper's)
    ALWAYS = "always"  # retrieve for every question, no call (the paper's forced retrieval)
    NEVER = "never"  # retrieve for none, no call
FALLBACK_THRESHOLD = 0.5
# Below this separation of the anchor groups (difference of means over the pooled standard
# deviation) the model's P(yes) is not trusted and the lexical rule below decides instead.
MIN_SEPARATION = 1.5
# A capitalised word that is not the first of its sentence: the question names something.
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'’-]*")
_PRONOUNS = {"I", "I'm", "I've", "I'd", "I'll"}
# An opening word is a name only by its shape (D1NZ, McCartney, Suicide's), and a year names a time.
_NAMED_OPENING = re.compile(r"^(?:[A-Z]\w*[A-Z0-9]\w*|[A-Z]\w*['’]s)\b")
_YEAR = re.compile(r"\b(?:1[5-9]\d\d|20\d\d)s?\b")
ANCHORS_RETRIEVE = (
    "Who was the first president of the football club founded in Barcelona in 1899?",
    "In what year did the architect of the Sydney Opera House die?",
    "Which band released the album that includes the song 'Wonderwall'?",
    "What is the population of the town where the Peace of Westphalia was signed?",
    "Which university did the director of the film 'Inception' attend?",
    "What instrument did the founder of the Berlin Philharmonic play?",
)
ANCHORS_SKIP = (
    "What is 7 plus 6?",
    "What does the word 'quick' mean?",
    "Hello there!",
    "Write a sentence using the word 'blue'.",
    "What is 100 divided by 4?",
    "Thanks, see you later.",
)


def decision_template(path: str | None) -> str:
    """The retrieval-decision template: ``path``, else the packaged file, else the inline fallback."""
    if path:
        template = load_prompt_file(path)
    else:
        try:
            template = load_prompt("self_rag")
        except ConfigError:
            template = FALLBACK_DECISION_PROMPT
    try:
        fields = placeholders(template)
    except ValueError as exc:
        raise ConfigError(
            f"retrieval-decision prompt {path or 'self_rag'}: bad braces ({exc})"
        ) from None
    if fields != {"question"}:
        raise ConfigError(
            f"retrieval-decision prompt {path or 'self_rag'} must use the placeholder {{question}} "
            f"and no other (found {sorted(fields) or 'none'})"
        )
    return template


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _var(values: list[float]) -> float:
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1) if m is not None and len(values) > 1 else 0.0


def names_something(text: str) -> bool:
    """True when the text names a specific person, place, work or organisation.

    The fallback decision for a model whose P(yes) cannot tell a question about
    the world from arithmetic or small talk: a capitalised word that does not
    open a sentence ("Uranus", "Berlin Philharmonic", "Spanish"), an opening
    word shaped like a name ("D1NZ", "Suicide's") or a year is the mark of a
    question about specific things. It is a lexical rule, not understanding:
    "who discovered the planet closest to the sun?" names nothing and skips.
    """
    stripped = text.strip()
    if _NAMED_OPENING.match(stripped) or _YEAR.search(stripped):
        return True
    return any(m.group(0) not in _PRONOUNS for m in _NAME.finditer(stripped))


@dataclass(frozen=True)
class Decision:
    needed: bool
    p_yes: float | None  # None: read from the text
    source: str  # "label_probs", "text" or "names" (the lexical fallback)


async def read_p_yes(run: Run, template: str, text: str, *, action: str, thought: str) -> tuple[float | None, StepRecord]:
    """P(yes) / (P(yes) + P(no)) of the decision prompt for ``text`` (None without log-probabilities)."""
    step = await run.generate(
        chat(SYSTEM, render(template, question=text)), action=action, thought=thought,
        action_input=text, max_tokens=1, top_logprobs=TOP_LOGPROBS,
    )
    gen = step.gen
    if gen is None or not gen.logprobs:
        return None, step
    return S.p_retrieve(S.group_probs(gen.logprobs[0].top, LABEL_GROUPS["retrieve"])), step


class Calibration:
    """The "auto" threshold of one backend, measured once on the anchor questions."""

    def __init__(self) -> None:
        self.value: float | None = None
        # True when the anchors did not separate: the lexical rule decides instead of P(yes).
        self.untrusted = False

    async def threshold(self, run: Run, template: str) -> float:
        if self.value is not None:
            return self.value
        key = calibration_store.calibration_key(run.llm, template, (*ANCHORS_RETRIEVE, *ANCHORS_SKIP))
        kept = calibration_store.load(key)
        if kept is not None:
            self.value, self.untrusted = float(kept["threshold"]), bool(kept.get("untrusted"))
            run.note(
                "calibrate_decision",
                thought="The threshold this model and prompt were calibrated to before (no call).",
                action_input=f"kept in {calibration_store.store_path()}",
                observation=f"threshold={self.value:.4f}: {kept.get('why', 'calibrated before')}",
                details={"threshold": round(self.value, 4), "kept": True, "separation": kept.get("separation")},
            )
            return self.value
        groups: dict[str, list[float]] = {"retrieve": [], "skip": []}
        for name, anchors in (("retrieve", ANCHORS_RETRIEVE), ("skip", ANCHORS_SKIP)):
            for text in anchors:
                p, step = await read_p_yes(run, template, text, action="calibrate_decision",
                                      thought=f"Calibrate the retrieval threshold: a '{name}' anchor.")
                step.observation = f"P(yes)={p if p is None else round(p, 4)} ({name} anchor)"
                if p is not None:
                    groups[name].append(p)
        hi, lo = _mean(groups["retrieve"]), _mean(groups["skip"])
        spread = math.sqrt((_var(groups["retrieve"]) + _var(groups["skip"])) / 2)
        separation = (hi - lo) / spread if hi is not None and lo is not None and spread > 0 else None
        if hi is None or lo is None:
            self.value, why = FALLBACK_THRESHOLD, "no probabilities for the anchors"
        elif separation is None or separation < MIN_SEPARATION:
            # The model cannot tell the two kinds apart; its P(yes) is noise, so a lexical
            # rule decides (names_something). The threshold is kept for the record only.
            self.value, self.untrusted = (hi + lo) / 2, True
            why = (f"the anchors do not separate (d'={separation or 0:.2f} < {MIN_SEPARATION}): "
                   "retrieve when the question names something")
        else:
            self.value, why = (hi + lo) / 2, f"halfway between the anchor means (d'={separation:.2f})"
        sep = None if separation is None else round(separation, 3)
        if hi is not None and lo is not None:  # a calibration that read no probability is not worth keeping
            calibration_store.save(key, {"threshold": self.value, "untrusted": self.untrusted, "why": why,
                                         "separation": sep, "anchor_means": [hi, lo]})
        run.note(
            "calibrate_decision",
            thought="Threshold halfway between the mean P(yes) of the two anchor groups, if they separate.",
            action_input=f"{len(ANCHORS_RETRIEVE)} + {len(ANCHORS_SKIP)} anchors",
            observation=f"threshold={self.value:.4f}: {why}",
            details={"threshold": round(self.value, 4), "anchor_means": [hi, lo], "separation": sep},
        )
        return self.value


async def decide_retrieval(
    run: Run, template: str, question: Question, *, threshold: float | str, max_tokens: int,
    calibration: Calibration | None = None,
) -> Decision:
    """Ask once whether to retrieve; read P(yes) when the backend gives log-probabilities."""
    action, thought = "retrieval_decision", "Decide whether retrieval is needed."
    if run.llm.supports_logprobs:
        p_yes, step = await read_p_yes(run, template, question.text, action=action, thought=thought)
    else:
        p_yes = None
        step = await run.generate(
            chat(SYSTEM, render(template, question=question.text)), action=action, thought=thought,
            action_input=question.text, max_tokens=max_tokens,
        )
    untrusted = False
    if p_yes is not None and not isinstance(threshold, float | int):
        calibration = calibration or Calibration()
        threshold = await calibration.threshold(run, template)
        untrusted = calibration.untrusted
    if p_yes is None:
        decision = Decision(parse_retrieval_decision(step.text), None, "text")
        how = f"model said {shorten(step.text, 60)!r}"
    elif untrusted:
        decision = Decision(names_something(question.text), p_yes, "names")
        how = (f"P(yes)={p_yes:.3f} is not trusted for this model; the question "
               f"{'names something' if decision.needed else 'names nothing'} specific")
    else:
        decision = Decision(p_yes >= threshold, p_yes, "label_probs")
        how = f"P(yes)={p_yes:.3f} {'>=' if decision.needed else '<'} threshold {threshold:g}"
    step.observation = f"retrieval needed: {'yes' if decision.needed else 'no'} ({how})"
    step.details.update(
        retrieval_needed=decision.needed, decision_source=decision.source,
        p_yes=None if p_yes is None else round(p_yes, 4), threshold=threshold,
    )
    return decision
