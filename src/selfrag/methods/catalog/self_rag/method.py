"""Self-RAG with a prompted model: decide, retrieve, critique candidates, pick the best.

The critique mode (config ``self_rag.critique``) is a strategy from
:mod:`.self_rag_modes`: ``combined`` (default; seed 000: one call answers and
judges, one rates), ``fused`` (one call does all three) or ``separate``
(seed 003: one JSON verdict per step, irrelevant passages dropped first).

Around the mode, the pipeline is the same:

1. **Decide.** ``retrieval_mode: adaptive`` asks the model once; on a
   backend with log-probabilities the decision is ``P(yes) >= retrieval_threshold``
   (:mod:`.self_rag_decision`), otherwise the written yes/no. ``always`` /
   ``never`` skip the call.
2. **One candidate per passage** for the first ``num_candidates`` passages
   (``separate``: those of them judged relevant). Chains of different
   passages run concurrently and are joined back in passage order.
3. **The joint candidate** (``joint_candidate: true``, the default): one more
   candidate written over the ``joint_passages`` best passages, so a question
   that needs two passages can be answered; it is listed first, so it wins
   ties. ``joint_ranking`` (:mod:`.self_rag_evidence`): ``combined`` and
   ``fused`` rank by lexical evidence alone and write the joint alongside the
   one-passage chains; ``separate`` waits for its relevance verdicts, ranks
   by them fused with that evidence, and writes the joint alongside the kept
   passages' candidates.
4. **No answer is never selected.** A candidate whose answer is empty, a
   reflection label, JSON or prompt text is discarded (and recorded); when
   none is left, one answer is written over all retrieved passages.
5. **Select** (``selection``): ``joint_first`` (default) takes the joint
   candidate whenever it has a usable answer and falls back to the mode's
   rule over the one-passage candidates; ``critique`` applies the mode's
   rule to every candidate (seed 000).

Abstention (off by default, as in the seeds): ``abstain_min_relevance`` answers
"insufficient evidence" when no passage's fused relevance reaches it (checked
once the verdicts are in; when the joint is ranked by the prior it has already
been written by then, and its calls are spent);
``abstain_below`` when no usable candidate's support verdict reaches that level;
``abstain_unconfirmed`` when no other usable candidate gives the selected
answer (:mod:`.abstention`).

Budgets (``combined``, n candidates, joint on): ``1 + 2(n + 1)`` calls with
retrieval, 2 without; ``joint_candidate: false`` gives seed 000's ``1 + 2n``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....llm.base import chat
from ....prompts import load_prompt, render
from ....reflection.parse import RELEVANT
from ....reflection.select import support_rank
from ....types import ArchitectureType, Candidate, Document, Question
from ...core.answer_format import answer_system
from ...core.answer_shape import keep_answers, malformed
from ...core.base import Method, Outcome
from ...core.concurrency import gather_in_order
from ...core.context import answer_over
from ...core.registry import register
from ...core.text import clean_answer
from ...core.trace import Run
from ...steps.abstention import (
    ABSTAIN_ANSWER,
    note_abstention,
    relevance_floor_reason,
    unconfirmed_reason,
)
from ...steps.candidates import candidate_row, cited_passages, note_selection
from ...steps.choice_reading import reader_for
from ...steps.decision import Calibration, RetrievalMode, decide_retrieval, decision_template
from ...steps.evidence import Passages, Ranked, best_fused, rank_evidence, verdicts
from ...steps.joint_first import Selection, fallback_candidates, selection_order
from .config import JointRanking, SelfRAGConfig
from .modes import MODES

NO_ANSWER = "No answer."
# The trace action of an answer written when no retrieved passage was judged relevant.
NO_RELEVANT_DOCUMENTS = "no_relevant_documents"


@register
class SelfRAG(Method):
    name = "self_rag"
    description = (
        "Decide retrieval, critique one candidate per passage plus one over all relevant passages "
        "(relevance, support, utility), pick the best; critique: combined, fused or separate."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_rag"
    Config = SelfRAGConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decision_prompt = decision_template(self.config.prompt_path)
        self.calibration = Calibration()
        short = min(self.config.critic_max_tokens, int(self.llm_params["max_tokens"]))
        self.mode = MODES[self.config.critique](
            self.llm, self.config.max_context_tokens, short, facts_first=self.config.facts_first,
            reader=reader_for(self.config.answer_reading))

    async def _answer(self, question: Question, run: Run) -> Outcome:
        if not await self._decide(question, run):
            answer = await self._direct_answer(question, run, "No retrieval needed; answer directly.")
            return Outcome(answer=answer, details=self._details(False, 0, [], None))

        result = await run.retrieve(question.text, self.config.top_k, thought="Retrieve passages for the question.")
        docs = list(result.documents)
        judged = docs[: self.config.num_candidates]
        wants_joint = self.config.joint_candidate and len(docs) >= 2
        early = rank_evidence(run, question.text, docs, result.scores, None, self.config.joint_passages) \
            if wants_joint and self._ranks_by_prior else None
        forks = [run.fork() for _ in judged]
        joint_run = run.fork()
        if self.mode.filters_first:
            chains, joint, model = await self._filter_then_answer(question, docs, judged, result.scores, forks,
                                                                  joint_run, wants_joint)
        else:
            chains, joint = await self._chains_and_joint(question, judged, forks, early, joint_run)
            model = verdicts(len(docs), chains)
        run.join(*forks, joint_run)
        candidates = [c for c in chains if c is not None]
        if self.mode.filters_first and not candidates and joint is None:
            overrule = not self._abstains and self._overrules_filter(run, docs)
            run.note(
                NO_RELEVANT_DOCUMENTS,
                thought="No retrieved document was judged relevant.",
                action_input=f"{len(docs)} documents",
                observation=("The question supplied these passages: the joint candidate reads them anyway, "
                             "ranked by lexical evidence." if overrule else
                             "Answering without context (relevant_docs_count = 0)."),
            )
            if self._abstains:
                return self._abstain(run, len(docs), [], "no retrieved passage was judged relevant", None)
            if not overrule:
                answer = await self._direct_answer(question, run, "No relevant documents; answer without context.")
                return Outcome(answer=answer, retrieval_needed=True, details=self._details(True, len(docs), [], None))
            ranked = rank_evidence(run, question.text, docs, result.scores, None, self.config.joint_passages)
            joint = await self._joint(question, ranked.passages, run)

        per_passage = list(candidates)
        floor = self.config.abstain_min_relevance
        if floor is not None and docs:
            top = best_fused(question.text, docs, result.scores, model)
            if why := relevance_floor_reason(top, floor):
                seen = [joint, *candidates] if joint is not None else candidates
                return self._abstain(run, len(docs), seen, why, self._would_answer(question, seen))
        if wants_joint and joint is None:
            joint = await self._ranked_joint(question, docs, result.scores, model, run)
        if joint is not None:
            candidates = [joint, *candidates]
        usable = answered = keep_answers(run, candidates, lambda c: c.text, question.text)
        if self.config.abstain_below:
            level = support_rank(self.config.abstain_below)
            supported = [c for c in usable if self._support(c) >= level]
            if not supported:
                why = (f"no candidate's support reaches {self.config.abstain_below.replace('_', ' ')} "
                       f"(verdicts: {', '.join(str(c.support) for c in usable) or 'none'})")
                return self._abstain(run, len(docs), candidates, why, self._would_answer(question, usable))
            usable = supported
        best = self._select(run, usable)
        others = [c.text for c in answered if c is not best]
        if best is not None and self.config.abstain_unconfirmed and (why := unconfirmed_reason(best.text, others)):
            return self._abstain(run, len(docs), candidates, why, best.text)
        answer = best.text if best else await self._over_all(question, docs, run)
        details = self._details(True, len(docs), per_passage, best, docs)
        details["all_candidates"] = [candidate_row(c) for c in candidates]
        return Outcome(answer=answer, retrieval_needed=True, candidates=candidates, details=details,
                       citations=cited_passages(best, docs))

    # -- steps -------------------------------------------------------------------
    async def _decide(self, question: Question, run: Run) -> bool:
        mode = self.config.retrieval_mode
        if mode == RetrievalMode.ADAPTIVE and run.own_evidence and self.config.retrieve_own_evidence:
            run.note(
                "retrieval_decision",
                thought="The question came with its own documents: retrieve without asking.",
                action_input=question.text,
                observation="retrieval needed: yes (the question's own documents)",
                details={"retrieval_needed": True, "retrieval_mode": mode, "own_evidence": True},
            )
            return True
        if mode == RetrievalMode.ADAPTIVE:
            if self.mode.decides_retrieval:
                return await self.mode.decide(question, run)
            decision = await decide_retrieval(
                run, self.decision_prompt, question,
                threshold=self.config.retrieval_threshold, max_tokens=self.mode.short_tokens,
                calibration=self.calibration,
            )
            return decision.needed
        needed = mode == RetrievalMode.ALWAYS
        run.note(
            "retrieval_decision",
            thought=f"retrieval_mode is {mode.value!r}: no decision call.",
            action_input=question.text,
            observation=f"retrieval needed: {'yes' if needed else 'no'} (configured)",
            details={"retrieval_needed": needed, "retrieval_mode": mode},
        )
        return needed

    async def _filter_then_answer(
        self, question: Question, docs: list[Document], judged: list[Document], scores: Sequence[float] | None,
        forks: list[Run], joint_run: Run, wants_joint: bool,
    ) -> tuple[list[Candidate | None], Candidate | None, list[float | None]]:
        """``filters_first`` modes: a relevance verdict on each ``judged`` passage at once, then the kept
        passages' candidates and the joint at once (None per rejected passage; the joint is None when it
        is not written here), and the verdicts (1 / 0 per judged passage, None per passage not judged
        or with no usable verdict). The joint ranks every retrieved passage (a None counts as the mean
        verdict, :func:`.self_rag_evidence.impute`); only a passage judged relevant gets a candidate.

        The joint's ranking needs the verdicts, not the candidates' critiques, so it is written beside the
        candidates: two round trips fewer than after them, the same calls. Not when no passage was kept or
        the relevance floor will abstain: the paths after this decide what is read then.
        """
        one = [Passages((doc,), (i,)) for i, doc in enumerate(judged, start=1)]
        kept = await gather_in_order([self.mode.relevant(question, p, f) for p, f in zip(one, forks, strict=True)])
        work = [self.mode.candidate(question, p, f) for p, f, k in zip(one, forks, kept, strict=True) if k]
        model: list[float | None] = [*(None if k is None else float(k) for k in kept),
                                     *[None] * (len(docs) - len(judged))]
        floor = relevance_floor_reason(best_fused(question.text, docs, scores, model),
                                       self.config.abstain_min_relevance)
        # With no usable verdict at all there is nothing to filter by: the joint reads the passages as
        # though none was judged (ranked by the prior), as it does when one is judged relevant.
        with_joint = wants_joint and (any(kept) or all(k is None for k in kept)) and floor is None
        if with_joint:
            work.append(self._ranked_joint(question, docs, scores, model, joint_run))
        results = iter(await gather_in_order(work))
        chains = [next(results) if k else None for k in kept]
        return chains, next(results) if with_joint else None, model

    async def _chains_and_joint(
        self, question: Question, judged: list[Document], forks: list[Run], early: Ranked | None, joint_run: Run,
    ) -> tuple[list[Candidate | None], Candidate | None]:
        """The one-passage candidates and, when its passages were ranked before any verdict
        (``early``), the joint written alongside them (None otherwise). With ``passage_candidates:
        fallback`` the joint is written first, and the others only when it has no usable answer."""
        def chains() -> list[Any]:
            return [self.mode.candidate(question, Passages((doc,), (i,)), fork)
                    for i, (doc, fork) in enumerate(zip(judged, forks, strict=True), start=1)]

        if early is not None and self._candidates_on_demand:
            joint = await self._joint(question, early.passages, joint_run)
            others = await fallback_candidates(joint_run, question.text, joint.text, len(judged),
                                               lambda: gather_in_order(chains()))
            return list(others), joint
        work = chains()
        if early is not None:  # the joint does not wait for the verdicts: write it alongside the chains
            work.append(self._joint(question, early.passages, joint_run))
        results = await gather_in_order(work)
        return list(results[: len(judged)]), (results[len(judged)] if early is not None else None)

    @property
    def _candidates_on_demand(self) -> bool:
        """Whether the one-passage candidates wait for a joint candidate without an answer (abstention
        reads their verdicts, so they are written for every question when it is on)."""
        return self.config.candidates_on_demand(blocked=self._abstains)

    async def _ranked_joint(self, question: Question, docs: list[Document], scores: Sequence[float] | None,
                            model: list[float | None], run: Run) -> Candidate:
        ranked = rank_evidence(run, question.text, docs, scores, model, self.config.joint_passages)
        return await self._joint(question, ranked.passages, run)

    async def _joint(self, question: Question, passages: Passages, run: Run) -> Candidate:
        joint = await self.mode.joint(question, passages, run)
        joint.details["joint"] = True
        return joint

    @property
    def _ranks_by_prior(self) -> bool:
        ranking = self.config.joint_ranking
        return ranking == JointRanking.PRIOR or (ranking == JointRanking.AUTO and not self.mode.filters_first)

    def _overrules_filter(self, run: Run, docs: list[Document]) -> bool:
        """Whether a filter that kept no passage is overruled: the question supplied its own passages.

        Seed 003 answers without context when every document is judged irrelevant, which suits an
        open corpus. A question's own passages are its evidence: a JSON judge can reject every one of
        them on a comparison question (no single passage answers it), and answering from the prior
        would throw that evidence away.
        """
        return (bool(docs) and self.config.joint_candidate and self.config.retrieve_own_evidence
                and run.own_evidence)

    @property
    def _abstains(self) -> bool:
        cfg = self.config
        return cfg.abstain_below is not None or cfg.abstain_min_relevance is not None or cfg.abstain_unconfirmed

    def _would_answer(self, question: Question, candidates: list[Candidate]) -> str | None:
        """The answer selection would give from ``candidates`` (no step recorded); None: no usable one."""
        usable = [c for c in candidates if malformed(c.text, question.text) is None]
        order = self._order(usable)
        return usable[order[0]].text if order else None

    def _abstain(self, run: Run, retrieved: int, candidates: list[Candidate], why: str,
                 withheld: str | None) -> Outcome:
        """The abstention outcome; ``withheld`` is the answer it replaces (scored as ``withheld_correct``)."""
        cfg = self.config
        settings = (f"abstain_below={cfg.abstain_below}, abstain_min_relevance={cfg.abstain_min_relevance}, "
                    f"abstain_unconfirmed={cfg.abstain_unconfirmed}")
        note_abstention(run, settings, why)
        details = self._details(True, retrieved, [c for c in candidates if not c.details.get("joint")], None)
        details["abstain_reason"] = why
        details["withheld_answer"] = withheld
        return Outcome(answer=ABSTAIN_ANSWER, retrieval_needed=True, candidates=candidates,
                       details=details, abstained=True)

    @staticmethod
    def _support(candidate: Candidate) -> int:
        """The support rank (3 full, 2 partial, 1 none); 0 when the verdict is only a default."""
        if "support" in candidate.details.get("defaults_used", []):
            return 0
        return support_rank(candidate.support or "")

    def _order(self, candidates: list[Candidate]) -> list[int]:
        """Candidate indices best first: the mode's rule, the joint first with ``selection: joint_first``."""
        joint = next((i for i, c in enumerate(candidates) if c.details.get("joint")), None)
        return selection_order([self.mode.key(c) for c in candidates], joint,
                               self.config.selection == Selection.JOINT_FIRST)

    @property
    def _rule(self) -> str:
        if self.config.joint_first:
            return f"The joint candidate when it has an answer; otherwise: {self.mode.rule}"
        return self.mode.rule

    def _select(self, run: Run, candidates: list[Candidate]) -> Candidate | None:
        order = self._order(candidates)
        if not order:
            run.note("select_best", thought=self._rule, action_input="0 usable candidates",
                     observation="No usable candidate; answer over all retrieved passages.")
            return None
        note_selection(run, self._rule, candidates, order[0])
        return candidates[order[0]]

    async def _direct_answer(self, question: Question, run: Run, thought: str) -> str:
        prompt = render(load_prompt("answer_direct"), question=question.text)
        step = await run.generate(
            chat(answer_system(question), prompt), action="direct_answer", thought=thought,
            action_input=question.text,
        )
        return clean_answer(step.text)

    async def _over_all(self, question: Question, docs: list[Document], run: Run) -> str:
        if not docs:
            return NO_ANSWER
        step, _, _ = await answer_over(
            run, question, docs, self.config.max_context_tokens,
            thought="No usable candidate: answer over all retrieved passages.",
        )
        return clean_answer(step.text) or NO_ANSWER

    def _details(
        self, retrieval_needed: bool, retrieved: int, candidates: list[Candidate], best: Candidate | None,
        docs: list[Document] | None = None,
    ) -> dict[str, Any]:
        indices = best.details.get("passage_indices", []) if best else []
        context = [docs[i - 1].text for i in indices if docs and i <= len(docs)]
        return {
            "critique": self.config.critique,
            "support": best.support if best else None,
            "utility": best.utility if best else None,
            "context_used": context or ([best.passage.text] if best and best.passage else []),
            "retrieval_needed": retrieval_needed,
            "total_docs_retrieved": retrieved,
            "relevant_docs_count": sum(c.relevance == RELEVANT for c in candidates),
            "all_candidates": [candidate_row(c) for c in candidates],
        }
