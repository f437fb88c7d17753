"""A yes/no answer written after the facts it depends on (``self_rag.yes_no_facts``).

Comparison questions ("Were A and B of the same nationality?", "Are both A
and B genera?") need one fact per item compared. Asked for the bare word, the
benchmark models answered "yes" to nearly every such question whatever the
passages said. This call asks for one line per item first (``- A: ...``), then
a final ``Answer: yes`` / ``Answer: no`` line, and reads that line. A reply
with no such line gives ``None`` and the caller falls back to the plain
answer call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..types import Document, Question
from .context import answer_over
from .trace import Run, StepRecord, shorten

_VERDICT = re.compile(r"answer\s*[:\-]\s*\**\s*(yes|no)\b", re.IGNORECASE)
_FACT = re.compile(r"^\s*[-*•]\s*(.+?)\s*$", re.MULTILINE)


def read_verdict(text: str) -> str | None:
    """The last ``Answer: yes|no`` of a reply, lower-cased (None: there is none)."""
    found = _VERDICT.findall(text)
    return found[-1].lower() if found else None


def read_facts(text: str) -> list[str]:
    """The ``- item: fact`` lines written before the verdict."""
    verdicts = list(_VERDICT.finditer(text))
    head = text[: verdicts[-1].start()] if verdicts else text
    return _FACT.findall(head)


async def yes_no_after_facts(
    run: Run, question: Question, docs: Sequence[Document], max_tokens: int, *, thought: str
) -> tuple[StepRecord, str, str | None]:
    """The step, the context shown, and the verdict (None when the reply has no ``Answer:`` line)."""
    step, context, _ = await answer_over(run, question, docs, max_tokens, thought=thought,
                                         template="self_rag_yes_no_facts", action="generate_after_facts",
                                         formatted=False)
    verdict = read_verdict(step.text)
    facts = read_facts(step.text)
    step.details.update(verdict=verdict, facts=facts)
    step.observation = (f"{verdict} after {len(facts)} fact line{'s' if len(facts) != 1 else ''}: "
                        f"{shorten(' | '.join(facts), 160)}" if verdict else
                        "no 'Answer: yes/no' line; answering with the plain prompt")
    return step, context, verdict
