"""Critiquing an answer someone else wrote (post-answer self-reflection of any method).

``critique_answer(critic, run, question, answer, passage)`` reads the critiques
of a finished answer without writing one: relevance and support of
``passage`` (when there is one) and the answer's utility, as a
:class:`~selfrag.types.Candidate` that :func:`.stages.self_reflect`
can start from.

* With label questions the critiques are independent calls (``critic_relevance``,
  ``critic_support``, ``critic_utility``), run concurrently.
* With reflection tokens the answer is forced into the model's own format and
  the next token is read at each critique position, one after another:
  ``[Retrieval]<paragraph>…</paragraph>`` → relevance; ``+ [Relevant] answer``
  → support; ``+ [Fully supported]`` → utility (the most probable label of each
  position is written before the next; ``[Relevant]`` / ``[Partially supported]``
  when a position had no mass). Without a passage: ``[No Retrieval] answer`` → utility.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...llm.base import Prompt
from ...reflection import score as S
from ...reflection.readings import normalised
from ...reflection.tokens import (
    NO_RETRIEVAL_TOKEN,
    REFLECTION_GROUPS,
    RETRIEVAL_TOKEN,
    instruction_prompt,
    neutralize,
    paragraph,
)
from ...types import Candidate, Document, Verdict
from ..core.context import format_passage
from ..core.trace import Run
from .critic import Critic

THOUGHT = "Critique the method's answer."
# The label written at a reflection position whose probabilities are unknown.
_NEUTRAL = {"relevance": "relevant", "support": "partially"}


def _token(group: str, reading: Verdict) -> str:
    label = S.argmax_label(normalised(reading)) or _NEUTRAL[group]
    return next(tok for tok, lab in REFLECTION_GROUPS[group].surface.items() if lab == label)


async def critique_answer(
    critic: Critic, run: Run, question: str, answer: str, passage: Document | None
) -> Candidate:
    """The critiques of ``answer`` (relevance and support of ``passage`` when given, utility)."""
    if critic.reflection:
        readings = await _reflection_readings(critic, run, question, answer, passage)
    else:
        readings = await _label_readings(critic, run, question, answer, passage)
    return Candidate(text=answer, passages=() if passage is None else (passage,), verdicts=readings, seq=None, final=True, number=0)


async def _label_readings(
    critic: Critic, run: Run, question: str, answer: str, passage: Document | None
) -> dict[str, Verdict]:
    asks: list[tuple[str, Prompt, str]] = []
    if passage is not None:
        block = format_passage(passage)
        asks.append(("relevance", critic.critique_prompt("critic_relevance", question=question, passage=block), question))
        asks.append(
            ("support", critic.critique_prompt("critic_support", question=question, passage=block, answer=answer), answer)
        )
    asks.append(("utility", critic.critique_prompt("critic_utility", question=question, answer=answer), answer))
    forks = [run.fork() for _ in asks]
    results = await critic.gather(
        [
            critic.read(r, group, prompt, action=f"critique_{group}", thought=THOUGHT, action_input=shown)
            for r, (group, prompt, shown) in zip(forks, asks, strict=True)
        ]
    )
    run.join(*forks)
    return {group: reading for (group, _, _), (reading, _) in zip(asks, results, strict=True)}


async def _reflection_readings(
    critic: Critic, run: Run, question: str, answer: str, passage: Document | None
) -> dict[str, Verdict]:
    text = neutralize(answer.strip())
    readings: dict[str, Verdict] = {}

    async def read(group: str, prompt: str, shown: str) -> Verdict:
        reading, _ = await critic.read(
            run, group, prompt, action=f"critique_{group}", thought=THOUGHT, action_input=shown
        )
        readings[group] = reading
        return reading

    head = instruction_prompt(question)
    if passage is None:
        await read("utility", head + NO_RETRIEVAL_TOKEN + text, answer)
        return readings
    prompt = head + RETRIEVAL_TOKEN + paragraph(passage)
    relevance = await read("relevance", prompt, question)
    prompt += _token("relevance", relevance) + text
    support = await read("support", prompt, answer)
    await read("utility", prompt + _token("support", support), answer)
    return readings


def joint_document(docs: Sequence[Document]) -> Document:
    """Several passages as one, for a candidate that reads them all."""
    if len(docs) == 1:
        return docs[0]
    return Document(
        id="+".join(d.id for d in docs),
        title=" + ".join(d.title or d.id for d in docs),
        text="\n\n".join(f"{d.title}: {d.text}" if d.title else d.text for d in docs),
    )
