"""Writing candidates and reading their critiques: one draft per passage.

``drafts(critic, run, task, passages)`` writes one candidate (a whole answer,
or the next segment) per passage (``None``: no passage) and critiques it:

* with reflection tokens, one call per passage writes the candidate and its
  critique tokens, read from the top log-probabilities where the model wrote them;
* with label questions, per passage: relevance and the candidate, then
  support, utility (and, for a segment, whether the answer is finished), each
  one call whose prompt shares the passage-bearing prefix. ``known``
  relevance readings (made before, :func:`.relevance.known_relevance`) stand
  instead of the label question, except the likelihood half of
  ``label_and_likelihood``: the label question is asked here and averaged with it.

Candidates are written concurrently (or one after another on a serial
backend); their steps join the trace in passage order, each candidate's
calls together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...llm.base import Prompt
from ...prompts import load_prompt, render
from ...reflection import score as S
from ...reflection.readings import first_sentence, normalised, prefix_logprobs, reading
from ...reflection.tokens import (
    NO_RETRIEVAL_TOKEN,
    REFLECTION_GROUPS,
    RETRIEVAL_TOKEN,
    instruction_prompt,
    paragraph,
    parse_reflection_positions,
    parse_reflection_text,
)
from ...types import Candidate, Document, Verdict
from ..core.context import format_passage
from ..core.trace import Run
from .critic import Critic, Task
from .relevance import passage_relevance


async def drafts(
    critic: Critic,
    run: Run,
    task: Task,
    passages: Sequence[Document | None],
    *,
    known: Sequence[Verdict | None] | None = None,
) -> list[Candidate]:
    """One candidate per passage, each with its critique (``known``: relevance readings already made)."""
    forks = [run.fork() for _ in passages]
    if critic.reflection:
        coros = [_reflection_draft(critic, forks[i], task, i, doc) for i, doc in enumerate(passages)]
    else:
        known = list(known or [None] * len(passages))
        coros = [_instruction_draft(critic, forks[i], task, i, doc, known[i]) for i, doc in enumerate(passages)]
    out = await critic.gather(coros)
    run.join(*forks)
    return out


def _reflection_head(task: Task) -> str:
    instruction = task.question
    if task.feedback is not None:
        instruction = render(
            load_prompt("critic_feedback_instruction"),
            question=task.question, previous=task.feedback.previous, rating=f"{task.feedback.rating:.1f}",
        ).rstrip()
    # Reflection tokens follow the text directly, as in the fine-tuning data.
    return instruction_prompt(instruction) + task.answer_so_far.strip()


async def _reflection_draft(critic: Critic, run: Run, task: Task, i: int, doc: Document | None) -> Candidate:
    prompt = _reflection_head(task) + (RETRIEVAL_TOKEN + paragraph(doc) if doc is not None else NO_RETRIEVAL_TOKEN)
    logprobs = critic.choice.probabilities
    step = await run.generate(
        prompt, action="generate_segment" if task.segment else "generate_candidate",
        thought=_candidate_thought(i, doc), action_input=task.question,
        max_tokens=critic.segment_tokens if task.segment else critic.answer_tokens,
        top_logprobs=critic.config.top_logprobs if logprobs else 0,
    )
    gen = step.gen
    groups = ("relevance", "support", "utility") if doc is not None else ("utility",)
    readings: dict[str, Verdict] = {}
    if gen is not None and gen.logprobs:
        out = parse_reflection_positions(gen.logprobs)
        for g in groups:
            readings[g] = reading(
                g, S.group_probs(out.tops.get(g), REFLECTION_GROUPS[g]), "reflection_tokens",
                "" if g in out.tops else "the model wrote no token of this group",
            )
        seq = S.sequence_score(out.token_logprobs)
    else:
        out = parse_reflection_text(step.text)
        for g in groups:
            label = out.labels.get(g)
            readings[g] = reading(
                g, S.label_probs(label, REFLECTION_GROUPS[g]), "text",
                "" if label else "no token of this group in the text",
            )
        seq = None
    ended = out.ended or (gen is not None and gen.finish_reason == "stop")
    final = out.boundary is None and (ended or "utility" in out.labels)
    draft = Candidate(text=out.text, passages=() if doc is None else (doc,), verdicts=readings, seq=seq, final=final or not out.text, number=i)
    step.observation = _draft_summary(draft)
    step.details.update(_draft_details(draft, critic.choice.source, boundary=out.boundary))
    return draft


async def _instruction_draft(
    critic: Critic, run: Run, task: Task, i: int, doc: Document | None, known: Verdict | None
) -> Candidate:
    """Relevance and the candidate, then support, utility (and is_final); each call a step of ``run``.

    Every prompt starts with the same system message and the question, and
    passage-bound prompts continue with the passage, so consecutive calls
    for one candidate share most of their prefix.
    """
    block = format_passage(doc) if doc is not None else ""
    thought = _candidate_thought(i, doc)
    question = task.question
    rel_run, gen_run = run.fork(), run.fork()

    async def relevance() -> Verdict | None:
        if doc is None:
            return known
        return await passage_relevance(critic, rel_run, question, doc, known, thought)

    async def generate() -> tuple[str, float | None]:
        so_far = {"answer": task.answer_so_far or "(nothing yet)"} if task.segment else {}
        name = ("segment_generate" if task.segment else "critic_answer") + ("" if doc is not None else "_direct")
        user = render(
            load_prompt(name), question=question, answer_format=critic.answer_format, **so_far,
            **({"passage": block} if doc else {}),
        )
        if task.feedback is not None:
            user = user.rstrip() + "\n" + render(
                load_prompt("critic_feedback"), previous=task.feedback.previous,
                rating=f"{task.feedback.rating:.1f}",
            )
        step = await gen_run.generate(
            critic.messages("critic_system", user),
            action="generate_segment" if task.segment else "generate_candidate",
            thought=thought, action_input=question,
            max_tokens=critic.segment_tokens if task.segment else critic.answer_tokens,
            top_logprobs=1 if critic.choice.probabilities else 0,
            **({"stop": ["\n"]} if task.segment else {}),
        )
        text = first_sentence(step.text) if task.segment else step.text.strip()
        seq = S.sequence_score(prefix_logprobs(step.gen, text)) if step.gen is not None else None
        step.details["candidate"] = i + 1
        if doc is not None:
            step.details["passage"] = doc.id
        if seq is not None:
            step.details["seq"] = round(seq, 4)
        return text, seq

    rel, (text, seq) = await critic.gather([relevance(), generate()])
    run.join(rel_run, gen_run)
    return await _critiqued(critic, run, task, i, doc, text, seq, rel)


async def critiqued_answer(critic: Critic, run: Run, task: Task, doc: Document, text: str) -> Candidate:
    """A draft for an answer written elsewhere (e.g. ``vanilla_rag``'s prompt over ``doc``): its
    support and utility read by the critic's label questions; no relevance reading, no sequence score."""
    return await _critiqued(critic, run, task, 0, doc, text, None, None)


async def _critiqued(
    critic: Critic, run: Run, task: Task, i: int, doc: Document | None, text: str, seq: float | None,
    rel: Verdict | None,
) -> Candidate:
    """Support (with a passage), utility (and, for a segment, is_final) of ``text``, one call each."""
    block = format_passage(doc) if doc is not None else ""
    thought = _candidate_thought(i, doc)
    question = task.question
    whole = f"{task.answer_so_far} {text}".strip() if task.segment else text
    critiques: list[tuple[str, Prompt, str]] = []
    if doc is not None:
        critiques.append(
            ("support", critic.critique_prompt("critic_support", question=question, passage=block, answer=text), text)
        )
    critiques.append(("utility", critic.critique_prompt("critic_utility", question=question, answer=whole), whole))
    if task.segment:
        critiques.append(("final", critic.critique_prompt("segment_final", question=question, answer=whole), whole))
    runs = [run.fork() for _ in critiques]
    results = await critic.gather(
        [
            critic.read(r, name, prompt, action=f"critique_{name}", thought=thought, action_input=shown)
            for r, (name, prompt, shown) in zip(runs, critiques, strict=True)
        ]
    )
    run.join(*runs)
    readings: dict[str, Verdict] = {} if rel is None else {"relevance": rel}
    readings.update({name: reading for (name, _, _), (reading, _) in zip(critiques, results, strict=True)})
    final = True
    if task.segment:
        p_final = readings["final"].value
        final = not text or p_final is None or p_final > 0.5
    return Candidate(text=text, passages=() if doc is None else (doc,), verdicts=readings, seq=seq, final=final, number=i)


def _candidate_thought(i: int, doc: Document | None) -> str:
    where = f"passage {doc.title or doc.id}" if doc is not None else "no passage"
    return f"Candidate {i + 1} ({where})."


def _draft_summary(draft: Candidate) -> str:
    parts = [f"{g}={draft.value(g):.3f}" if draft.value(g) is not None else f"{g}=unknown" for g in draft.verdicts]
    return f"{' '.join(draft.text.split())[:120]} | {', '.join(parts)}"


def _draft_details(draft: Candidate, source: str, *, boundary: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"critique_source": source, "candidate": draft.number + 1}
    if draft.passage is not None:
        out["passage"] = draft.passage.id
    for g, verdict in draft.verdicts.items():
        probs = normalised(verdict)
        out[g] = {k: round(v, 4) for k, v in probs.items()} if probs else "none (no probability mass)"
    if draft.seq is not None:
        out["seq"] = round(draft.seq, 4)
    out["final"] = draft.final
    if boundary:
        out["boundary"] = boundary
    return out
