"""A yes/no answer built from one fact per item (``facts_first: items``).

The one-call facts prompt (:mod:`.facts_first`) asks a small model to do three
things in one reply: name each item, state its fact, and write ``Answer:
yes|no``. The benchmark models' traces show it does not manage that format: on
the 17 HotpotQA yes/no questions the 1.5B model copied the prompt's
placeholders (``<name>: Yes <that fact>: Both ...``) in 6 replies and left out
the answer line in 6 more; the 0.5B model left it out in 12 of 17. Its "facts"
were then a restatement of the question's claim, and the answer "yes".

This mode asks one simple thing per call, and the code does the bookkeeping:

1. ``list_items``: the question alone (no passages, so a short prompt) asks
   which people, places or things it is about. Only names that occur in the
   question are kept, so a model cannot invent an item.
2. ``item_fact``, once per item: the passages and the question, then "what do
   the documents state about <item> on the point the question asks". The
   passages come first and the item last, so every item's call shares its
   prompt prefix (the llama.cpp backend reuses it).
3. The notes (``- item: fact``) are read by the short notes prompt of
   :mod:`.facts_first` (no passages), or from calibrated label probabilities
   with ``answer_reading: calibrated``.

When no item is found the caller falls back to the one-call facts prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..llm.base import chat
from ..prompts import load_prompt, render
from ..types import Document, Question
from .choice_reading import ChoiceReader
from .context import answer_over
from .facts_first import answer_from_notes, read_notes_calibrated
from .text import clean_answer
from .trace import Run, StepRecord, shorten

# A comparison names two items; a question naming more than this is not one to split.
MAX_ITEMS = 4
ITEM_LIST_TOKENS = 48
FACT_TOKENS = 60
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")
_WRAPPING = " \t\"'`*_.,;:"


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def parse_items(reply: str, question: str) -> list[str]:
    """The names of ``reply`` (one per line) that occur in ``question``, longest kept when one holds another.

    A line as long as most of the question (the question copied back) is not an
    item; more than :data:`MAX_ITEMS` names mean the question is not a comparison
    of a few things, and give no items.
    """
    asked = _fold(question)
    names: list[str] = []
    for line in reply.splitlines():
        name = _BULLET.sub("", line).strip(_WRAPPING)
        folded = _fold(name)
        if not folded or folded not in asked or len(folded) > 0.6 * len(asked):
            continue
        if any(folded in _fold(kept) for kept in names):
            continue
        names = [kept for kept in names if _fold(kept) not in folded] + [name]
    return names if len(names) <= MAX_ITEMS else []


def first_sentence(text: str) -> str:
    """The first non-empty line of a reply, cut after its first sentence."""
    line = next((ln.strip() for ln in clean_answer(text).splitlines() if ln.strip()), "")
    end = re.search(r"(?<=[a-z0-9)\]])[.!?](\s|$)", line)
    return line[: end.end()].strip() if end else line


async def list_items(run: Run, question: Question) -> tuple[StepRecord, list[str]]:
    """The call that names the question's items, and the names kept."""
    step = await run.generate(
        chat(None, render(load_prompt("self_rag_items"), question=question.text)),
        action="list_items", thought="Name the people, places or things the question is about.",
        action_input=question.text, max_tokens=ITEM_LIST_TOKENS,
    )
    items = parse_items(step.text, question.text)
    step.details["items"] = items
    step.observation = " | ".join(items) if items else f"no item named in the question: {shorten(step.text, 80)}"
    return step, items


async def answer_from_item_facts(
    run: Run, question: Question, docs: Sequence[Document], max_tokens: int, *, name: str,
    reader: ChoiceReader | None = None,
) -> tuple[StepRecord, str, str | None] | None:
    """The step that gave the answer, the context shown and the answer; None when no item was found.

    The answer is None when the notes lead to none (the caller then answers another way).
    """
    _, items = await list_items(run, question)
    if not items:
        return None
    facts: list[str] = []
    context = ""
    for item in items:
        step, context, _ = await answer_over(
            run, question, docs, max_tokens, thought=f"What {name} say about {item}.", action="item_fact",
            template="self_rag_item_fact", formatted=False, reply_tokens=FACT_TOKENS, values={"item": item},
        )
        fact = first_sentence(step.text) or "The documents do not say."
        step.details.update(item=item, fact=fact)
        facts.append(f"{item}: {fact}")
    notes = "\n".join(f"- {fact}" for fact in facts)
    if reader is not None:
        calibrated = await read_notes_calibrated(run, question, notes, reader)
        if calibrated is not None:
            calibrated[0].details["facts"] = facts
            return calibrated[0], context, calibrated[1]
    read, answer = await answer_from_notes(run, question, notes, thought="Compare the facts and answer.")
    read.details["facts"] = facts
    return read, context, answer
