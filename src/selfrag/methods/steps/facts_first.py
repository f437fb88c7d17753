"""An answer written after the facts it rests on (``self_rag.facts_first``).

Two failures of small models' joint answers motivate it:

* a two-hop question answered with the bridge entity ("What was the father of
  Kasper Schmeichel voted to be?" -> "Peter Schmeichel"): the model stopped
  after the first hop;
* a comparison question answered "yes" whatever the passages said.

The first call asks for the facts that lead to the answer, then a last
``Answer: ...`` line (a yes/no question, ``prompts/self_rag_yes_no_facts.txt``:
one line per item compared, its name and the fact, then ``Answer: yes`` or
``Answer: no``; any other, ``prompts/self_rag_facts_first.txt``: the hops in a
few sentences). Small models often leave that line out, or write a
fragment in its place; then a second, short call reads the notes alone (no
documents, so it costs little) and writes the answer in the question's format
(``prompts/self_rag_facts_answer.txt``). A reply that still gives no answer
yields ``None``, and the caller falls back to the plain answer call; so does a
yes/no verdict with nothing written before it (it compared no facts).

The yes/no prompt names the line format in words, not as a template: given
``- <name>: <that fact>``, a small model copies the placeholders, or writes
"name: yes" lines (the verdict per item, not a fact).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import StrEnum

from ...llm.base import Message, chat
from ...prompts import load_prompt, render
from ...types import Document, Question
from ..core.answer_format import answer_system
from ..core.answer_shape import is_yes_no
from ..core.context import answer_over
from ..core.text import clean_answer
from ..core.trace import Run, StepRecord, shorten
from .choice_reading import ChoiceReader


class FactsFirst(StrEnum):
    """A method's ``facts_first`` setting: whether its answer is written after the facts it rests on."""

    OFF = "off"  # never: vanilla_rag's answer prompt
    YES_NO = "yes_no"  # for yes/no questions
    ALL = "all"  # for every question

    def applies(self, question: Question) -> bool:
        return self is FactsFirst.ALL or (self is FactsFirst.YES_NO and is_yes_no(question))
# A few fact lines and the answer fit well within this; a reply that runs on is a loop.
REPLY_TOKENS = 160
_VERDICT = re.compile(r"answer\s*[:\-]\s*\**\s*(yes|no)\b", re.IGNORECASE)
# "Answer: X", "Final answer - X", "**Answer:** X", to the end of its line.
_FINAL = re.compile(r"\banswer\W{0,3}?\s*[:\-]\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
_FACT = re.compile(r"^\s*[-*•]\s*(.+?)\s*$", re.MULTILINE)
_WRAPPING = " *_`\"'"


def read_verdict(text: str) -> str | None:
    """The last ``Answer: yes|no`` of a reply, lower-cased (None: there is none)."""
    found = _VERDICT.findall(text)
    return found[-1].lower() if found else None


def read_final(text: str) -> str | None:
    """The short answer of the last non-empty ``Answer: ...`` line (None: there is none)."""
    for found in reversed(_FINAL.findall(text)):
        answer = clean_answer(found.strip(_WRAPPING)).rstrip(".").strip(_WRAPPING)
        if answer:
            return answer
    return None


def read_facts(text: str) -> list[str]:
    """The ``- fact`` lines written before the last ``Answer`` line."""
    return _FACT.findall(notes_before_answer(text))


async def answer_after_facts(
    run: Run, question: Question, docs: Sequence[Document], max_tokens: int, *, thought: str,
    reader: ChoiceReader | None = None,
) -> tuple[StepRecord, str, str | None]:
    """The step that gave the answer, the context shown, and the answer (None: no usable answer).

    With a ``reader`` a choice question's answer is read from the label probabilities of
    the notes prompt (the facts written, without their own ``Answer`` line), with the
    prompt's label bias divided out (:mod:`.choice_reading`); the written answer is the
    fallback.
    """
    yes_no = is_yes_no(question)
    step, context, _ = await answer_over(
        run, question, docs, max_tokens, thought=thought, action="generate_after_facts", formatted=False,
        template="self_rag_yes_no_facts" if yes_no else "self_rag_facts_first", reply_tokens=REPLY_TOKENS,
    )
    answer = read_verdict(step.text) if yes_no else read_final(step.text)
    facts = read_facts(step.text)
    step.details.update(final=answer, facts=facts)
    if reader is not None and (notes := notes_before_answer(step.text)):
        read, reading = await reader.read(run, question, notes_prompt(question), notes,
                                          thought="Read the answer the notes lead to from the label probabilities.")
        if read is not None and reading.answer is not None:
            step.observation = f"written: {answer}; read from the notes: {reading.answer}"
            return read, context, reading.answer
    if yes_no and answer is not None and not notes_before_answer(step.text):
        # A bare "Answer: no" compared nothing: a small model writes one for most questions when
        # it skips the facts, with the same verdict for nearly all of them.
        step.observation = f"a bare verdict ({answer}) with no facts before it; answering with the plain prompt"
        return step, context, None
    if answer is not None:
        step.observation = f"{answer} after: {shorten(' | '.join(facts) or step.text, 160)}"
        return step, context, answer
    notes = step.text.strip()
    if not notes:
        step.observation = "no notes; answering with the plain prompt"
        return step, context, None
    step.observation = "no usable 'Answer:' line; the answer is read from the notes"
    read, answer = await answer_from_notes(run, question, notes)
    if answer is None:
        read.observation = "no answer in the reply; answering with the plain prompt"
    return read, context, answer


def notes_before_answer(text: str) -> str:
    """A facts reply without its last ``Answer`` line (and whatever follows it)."""
    finals = list(_FINAL.finditer(text)) or list(_VERDICT.finditer(text))
    return (text[: finals[-1].start()] if finals else text).strip()


def notes_prompt(question: Question) -> Callable[[str, str], tuple[Message, ...]]:
    """The notes-reading prompt as a function of (question text, notes)."""
    body = load_prompt("self_rag_facts_answer")
    system = answer_system(question)
    return lambda text, notes: chat(system, render(body, question=text, notes=notes))


async def answer_from_notes(
    run: Run, question: Question, notes: str, *, action: str = "answer_from_notes",
    thought: str = "Write the short answer the notes lead to.",
) -> tuple[StepRecord, str | None]:
    """One short call over ``notes`` alone (no documents): the answer in the question's format, or None.

    Also used by ``self_rag_segment`` to turn its written segments into the short answer a question asks for.
    """
    read = await run.generate(
        notes_prompt(question)(question.text, notes), action=action, thought=thought, action_input=shorten(notes),
    )
    answer = read_short(question, read.text)
    read.details["final"] = answer
    return read, answer


def read_short(question: Question, text: str) -> str | None:
    """The answer of a short-answer reply: cleaned, and "yes" / "no" for a yes/no question (None: none)."""
    answer = clean_answer(text)
    if is_yes_no(question):
        answer = read_verdict(f"Answer: {answer}")
    return answer or None
