"""``self_rag``'s middle phases: retrieve, judge relevance, write the candidates, critique the joint.

* **Judge relevance** (critics that judge first, ``critic: json``): a verdict on
  each of the first ``num_candidates`` passages, before any answer; a passage
  judged irrelevant gets no candidate.
* **Write** the candidates: the *joint* one over the ``joint_passages``
  passages with the best evidence (``vanilla_rag``'s answer prompt; ranked by
  the lexical evidence prior, fused with the relevance verdicts when there are
  some, :mod:`...steps.evidence`), and one per passage from the critic
  (:meth:`~...critique.protocol.CriticSource.write`), each with the verdicts
  the critic reads while writing it. On demand (``selection: joint_first``
  and no abstention rule that reads them) the one-passage candidates are
  written only when the joint has no usable answer; otherwise beside it.
* **Judge the joint**: its support and utility, asked only where they can
  change the answer (a selection that reads verdicts, a support rule).

With no passage kept by a filtering critic, the joint still reads the
question's own passages (ranked by the prior) when it brought them; on a
corpus the answer is written without context, as seed 003 does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....types import Candidate, Document, Question
from ...core.concurrency import gather_in_order
from ...core.trace import Run
from ...critique.confidence import least_logprob, mean_logprob
from ...critique.protocol import CriticSource
from ...steps.evidence import Passages, rank_evidence
from ...steps.joint_answer import joint_answer
from ...steps.joint_first import fallback_candidates
from .state import State

# The trace action of a filter that kept no passage.
NO_RELEVANT_DOCUMENTS = "no_relevant_documents"


@dataclass(frozen=True)
class Plan:
    """What the writing phases do for every question (fixed by the settings)."""

    judged: int  # one-passage candidates: the first this many passages
    joint_passages: int  # the joint reads this many (0: no joint)
    on_demand: bool  # one-passage candidates only when the joint has no usable answer
    judge_joint: bool  # ask the joint's support and utility
    max_context_tokens: int


class Retrieve:
    def __init__(self, top_k: int | None) -> None:
        self.top_k = top_k

    async def __call__(self, run: Run, state: State) -> None:
        result = await run.retrieve(state.question.text, self.top_k, thought="Retrieve passages for the question.")
        state.docs, state.scores, state.own_evidence = list(result.documents), result.scores, run.own_evidence
        state.relevance = [None] * len(state.docs)


class JudgeRelevance:
    """The critic's relevance verdict on each judged passage, before any answer (critics that judge first)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    async def __call__(self, run: Run, state: State) -> None:
        read = getattr(state.critic, "read_passages", None)
        if read is not None:  # a critic that reads every passage's relevance without a call
            state.verdicts = read(state.question, state.docs, state.scores)
            state.relevance = [v.value for v in state.verdicts] or state.relevance
            if state.verdicts:
                run.note("judge_relevance", thought="Every passage's relevance, read from its evidence signals.",
                         action_input=f"{len(state.docs)} passages",
                         observation=", ".join(f"[{i}] {v.value:.2f}" for i, v in enumerate(state.verdicts, 1)),
                         details={"relevance": [round(v.value or 0.0, 4) for v in state.verdicts],
                                  "source": state.verdicts[0].source})
        if not state.critic.judges_first:
            return
        judged = state.docs[: self.plan.judged]
        state.forks = [run.fork() for _ in judged]
        verdicts = await gather_in_order([
            state.critic.relevance(fork, state.question, Passages((doc,), (i,)))
            for i, (doc, fork) in enumerate(zip(judged, state.forks, strict=True), start=1)])
        state.verdicts = list(verdicts)
        state.relevance[: len(judged)] = [None if v is None else v.value for v in verdicts]


class Write:
    """The joint and the one-passage candidates (see the module docstring)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    async def __call__(self, run: Run, state: State) -> None:
        plan, critic, question, docs = self.plan, state.critic, state.question, state.docs
        wants_joint = plan.joint_passages >= 2 and len(docs) >= 2
        judged = list(enumerate(docs[: plan.judged], start=1))
        verdicts = None
        if critic.judges_first:
            judged = [(i, doc) for i, doc in judged if state.relevance[i - 1] == 1.0]
            verdicts = state.relevance
            unjudged = all(v is None for v in state.relevance[: plan.judged])
            if not judged and not (wants_joint and unjudged):
                run.join(*state.forks)  # the verdicts, before the note that none was relevant
                state.forks = []
                wants_joint = _overrule(run, state, wants_joint)
                verdicts = None
        forks = [state.forks[i - 1] if state.forks else run.fork() for i, _ in judged]
        joint_run = run.fork()
        if layers := getattr(critic, "hidden_layers", ()):
            joint_run.params = {**joint_run.params, "hidden": layers}  # read from the joint's own answer call

        def chains() -> list:
            return [_one(critic, fork, question, i, doc, state) for (i, doc), fork in zip(judged, forks, strict=True)]

        if wants_joint:
            ranked = rank_evidence(joint_run, question.text, docs, state.scores, verdicts, plan.joint_passages)
        if wants_joint and plan.on_demand:
            state.joint, state.joint_context = await _joint(joint_run, question, ranked.passages, plan)
            state.candidates = list(await fallback_candidates(joint_run, question.text, state.joint.text, len(judged),
                                                              lambda: gather_in_order(chains())))
        else:
            work = chains() + ([_joint(joint_run, question, ranked.passages, plan)] if wants_joint else [])
            results = await gather_in_order(work)
            state.candidates = list(results[: len(judged)])
            if wants_joint:
                state.joint, state.joint_context = results[len(judged)]
        run.join(*(state.forks or forks), joint_run)
        if not critic.judges_first and not state.verdicts:
            values = {c.indices[0]: c.value("relevance") for c in state.candidates if c.indices}
            state.relevance = [values.get(i) for i in range(1, len(docs) + 1)]
        state.none_relevant = critic.judges_first and not state.written


class Critique:
    """The joint's support and utility, where they can change the answer (each one-passage candidate
    carries the verdicts its critic read while writing it)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    async def __call__(self, run: Run, state: State) -> None:
        free = getattr(state.critic, "judges_joint", False)  # a critic whose joint verdicts cost no call
        if (self.plan.judge_joint or free) and state.joint is not None:
            await state.critic.judge(run, state.question, state.joint, state.joint_context)
        if free:  # its one-passage candidates are judged here too, over the joint's passages
            for candidate in state.candidates:
                await state.critic.judge(run, state.question, candidate, state.joint_context)


async def _one(critic: CriticSource, run: Run, question: Question, index: int, doc: Document,
               state: State) -> Candidate:
    """One passage's candidate; a relevance verdict the critic gave before writing stands on it."""
    candidate = await critic.write(run, question, Passages((doc,), (index,)))
    before = state.verdicts[index - 1] if index <= len(state.verdicts) else None
    if before is not None and "relevance" not in candidate.verdicts:
        candidate.verdicts = {"relevance": before, **candidate.verdicts}
    return candidate


async def _joint(run: Run, question: Question, passages: Passages, plan: Plan) -> tuple[Candidate, str]:
    """The candidate over several passages, written with ``vanilla_rag``'s answer prompt (yes/no
    questions: the facts first), unjudged until :class:`Critique`; and the context it read."""
    step, context, answer = await joint_answer(run, question, passages.docs, plan.max_context_tokens,
                                               name=passages.name(), facts_first="yes_no", logprobs=True)
    step.details["passage_ids"] = [d.id for d in passages.docs]
    seq = mean_logprob(step)
    least = least_logprob(step)
    return Candidate(text=answer, passages=passages.docs, indices=passages.indices, joint=True,
                     seq=None if seq is None else round(seq, 6), score=0.0,
                     details={} if least is None else {"least_logprob": round(least, 6)},
                     states=step.gen.hidden if step.gen is not None else None), context


def _overrule(run: Run, state: State, joint: bool) -> bool:
    """Whether a filter that kept no passage is overruled: the question supplied its own passages.

    Seed 003 answers without context when every document is judged irrelevant, which suits an open
    corpus. A question's own passages are its evidence: a JSON judge can reject every one of them on a
    comparison question (no single passage answers it), and answering without them would throw that
    evidence away, so the joint reads them, ranked by the lexical prior.
    """
    overrule = joint and state.own_evidence and bool(state.docs)
    run.note(
        NO_RELEVANT_DOCUMENTS,
        thought="No retrieved document was judged relevant.",
        action_input=f"{len(state.docs)} documents",
        observation=("The question supplied these passages: the joint candidate reads them anyway, "
                     "ranked by lexical evidence." if overrule else
                     "Answering without context (relevant_docs_count = 0)."),
    )
    return overrule
