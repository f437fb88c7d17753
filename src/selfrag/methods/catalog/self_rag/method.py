"""Self-RAG with a prompted model: decide, retrieve, critique candidates, pick the best.

The critique mode (config ``self_rag.critique``) is a strategy from
:mod:`.modes`: ``combined`` (default; seed 000: one call answers and
judges, one rates), ``fused`` (one call does all three) or ``separate``
(seed 003: one JSON verdict per step, irrelevant passages dropped first).

Around the mode, the pipeline is the same:

1. **Decide.** ``retrieval_mode: adaptive`` asks the model once; on a
   backend with log-probabilities the decision is ``P(yes) >= retrieval_threshold``
   (:mod:`...steps.decision`), otherwise the written yes/no. ``always`` /
   ``never`` skip the call.
2. **One candidate per passage** for the first ``num_candidates`` passages
   (``separate``: those of them judged relevant). Chains of different
   passages run concurrently and are joined back in passage order.
3. **The joint candidate** (``joint_candidate: true``, the default): one more
   candidate written over the ``joint_passages`` best passages, so a question
   that needs two passages can be answered; it is listed first, so it wins
   ties. ``joint_ranking`` (:mod:`...steps.evidence`): ``combined`` and
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
   rule to every candidate (seed 000). The joint's own support and utility
   verdicts are asked only where they can change the answer (``selection:
   critique``, ``abstain_below``).
6. **Confidence** (``confidence``, :mod:`...steps.confidence`): how sure the
   selected answer is, from the reflection signals read after it.

Abstention (off by default, as in the seeds): ``abstain_min_relevance`` answers
"insufficient evidence" when no passage's fused relevance reaches it (checked
once the verdicts are in; when the joint is ranked by the prior it has already
been written by then, and its calls are spent);
``abstain_below`` when no usable candidate's support verdict reaches that level;
``abstain_unconfirmed`` when no other usable candidate gives the selected
answer (:mod:`...steps.abstention`); ``abstain_below_confidence`` when the
answer's confidence is below it.

Budgets (``combined``, n candidates, joint on, one-passage candidates on
demand): one decision call (none when the question brings its own
passages), the joint, and the confidence's calls; ``passage_candidates:
always`` adds ``2n``; ``joint_candidate: false`` gives seed 000's ``1 + 2n``
(plus the confidence's calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....errors import ConfigError
from ....reflection.confidence import ConfidenceModel
from ....reflection.select import support_rank
from ....retrieval.links import evidence_prior
from ....types import ArchitectureType, Candidate, Document, Question
from ...core.answer_shape import keep_answers, malformed
from ...core.base import Method, Outcome
from ...core.context import build_context
from ...core.registry import register
from ...core.trace import Run
from ...steps.abstention import (
    ABSTAIN_ANSWER,
    note_abstention,
    relevance_floor_reason,
    unconfirmed_reason,
)
from ...steps.candidates import candidate_row, cited_passages, note_selection
from ...steps.choice_reading import reader_for
from ...steps.confidence import Confidence, ConfidenceReading, read_confidence
from ...steps.decision import Calibration, decision_template
from ...steps.evidence import best_fused, rank_evidence, verdicts
from ...steps.joint_first import Selection, selection_order
from .answers import decide, details, direct_answer, over_all
from .chains import CandidateWriter
from .config import JointRanking, SelfRAGConfig
from .likelihood import RULE as LIKELIHOOD_RULE
from .likelihood import evidence_likelihoods
from .modes import MODES

# The trace action of an answer written when no retrieved passage was judged relevant.
NO_RELEVANT_DOCUMENTS = "no_relevant_documents"


@register
class SelfRAG(Method):
    name = "self_rag"
    description = (
        "Decide retrieval, answer over the passages with the best evidence, critique and fall back to "
        "one candidate per passage, read how sure the answer is; critique: combined, fused or separate."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_rag"
    Config = SelfRAGConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg: SelfRAGConfig = self.config
        self.decision_prompt = decision_template(cfg.prompt_path)
        self.calibration = Calibration()
        short = min(cfg.critic_max_tokens, int(self.llm_params["max_tokens"]))
        self.mode = MODES[cfg.critique](
            self.llm, cfg.max_context_tokens, short, facts_first=cfg.facts_first,
            reader=reader_for(cfg.answer_reading))
        self.writer = CandidateWriter(
            self.mode, cfg, judge_joint=cfg.selection == Selection.CRITIQUE or cfg.abstain_below is not None,
            on_demand=cfg.candidates_on_demand(blocked=self._abstains_on_verdicts))
        if cfg.selection == Selection.LIKELIHOOD and not self.llm.supports_forced:
            raise ConfigError(f"self_rag.selection: likelihood scores each candidate as a given reply, which "
                              f"{self.llm.spec} cannot do; use a local model (llamacpp:PATH) or selection: joint_first")
        reflection = ConfidenceReading(cfg.confidence) is ConfidenceReading.REFLECTION
        self.confidence_model = ConfidenceModel.load(cfg.confidence_model) if reflection else None

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg: SelfRAGConfig = self.config
        if not await decide(cfg, self.mode, self.decision_prompt, self.calibration, question, run):
            answer = await direct_answer(question, run, "No retrieval needed; answer directly.")
            return Outcome(answer=answer, details=details(cfg, False, 0, [], None))

        result = await run.retrieve(question.text, cfg.top_k, thought="Retrieve passages for the question.")
        docs = list(result.documents)
        judged = docs[: cfg.num_candidates]
        wants_joint = cfg.joint_candidate and len(docs) >= 2
        early = rank_evidence(run, question.text, docs, result.scores, None, cfg.joint_passages) \
            if wants_joint and self._ranks_by_prior else None
        forks = [run.fork() for _ in judged]
        joint_run = run.fork()
        if self.mode.filters_first:
            chains, joint, model = await self.writer.filter_then_answer(
                question, docs, judged, result.scores, forks, joint_run, wants_joint)
        else:
            chains, joint = await self.writer.chains_and_joint(question, judged, forks, early, joint_run)
            model = verdicts(len(docs), chains)
        run.join(*forks, joint_run)
        candidates = [c for c in chains if c is not None]
        if self.mode.filters_first and not candidates and joint is None:
            overrule = not self._abstains_on_verdicts and self._overrules_filter(run, docs)
            run.note(
                NO_RELEVANT_DOCUMENTS,
                thought="No retrieved document was judged relevant.",
                action_input=f"{len(docs)} documents",
                observation=("The question supplied these passages: the joint candidate reads them anyway, "
                             "ranked by lexical evidence." if overrule else
                             "Answering without context (relevant_docs_count = 0)."),
            )
            if self._abstains_on_verdicts:
                return self._abstain(run, len(docs), [], "no retrieved passage was judged relevant", None)
            if not overrule:
                answer = await direct_answer(question, run, "No relevant documents; answer without context.")
                return Outcome(answer=answer, retrieval_needed=True, details=details(cfg, True, len(docs), [], None))
            joint = await self.writer.ranked_joint(question, docs, result.scores, None, run)

        per_passage = list(candidates)
        floor = cfg.abstain_min_relevance
        if floor is not None and docs:
            top = best_fused(question.text, docs, result.scores, model)
            if why := relevance_floor_reason(top, floor):
                seen = [joint, *candidates] if joint is not None else candidates
                return self._abstain(run, len(docs), seen, why, self._would_answer(question, seen))
        if wants_joint and joint is None:
            joint = await self.writer.ranked_joint(question, docs, result.scores, model, run)
        if joint is not None:
            candidates = [joint, *candidates]
        usable = answered = keep_answers(run, candidates, lambda c: c.text, question.text)
        if cfg.abstain_below:
            level = support_rank(cfg.abstain_below)
            supported = [c for c in usable if self._support(c) >= level]
            if not supported:
                why = (f"no candidate's support reaches {cfg.abstain_below.replace('_', ' ')} "
                       f"(verdicts: {', '.join(str(c.support) for c in usable) or 'none'})")
                return self._abstain(run, len(docs), candidates, why, self._would_answer(question, usable))
            usable = supported
        best = await self._most_likely(run, question, usable, docs) \
            if cfg.selection == Selection.LIKELIHOOD and len(usable) > 1 else self._select(run, usable)
        others = [c.text for c in answered if c is not best]
        if best is not None and cfg.abstain_unconfirmed and (why := unconfirmed_reason(best.text, others)):
            return self._abstain(run, len(docs), candidates, why, best.text)
        answer = best.text if best else await over_all(question, docs, run, cfg.max_context_tokens)
        sure = await self._confidence(run, question, best, docs, result.scores)
        if sure is not None and (why := self._unsure(sure)):
            return self._abstain(run, len(docs), candidates, why, answer, sure)
        info = details(cfg, True, len(docs), per_passage, best, docs)
        info["all_candidates"] = [candidate_row(c) for c in candidates]
        if sure is not None:
            info["confidence"] = sure.as_dict()
        return Outcome(answer=answer, retrieval_needed=True, candidates=candidates, details=info,
                       citations=cited_passages(best, docs), confidence=None if sure is None else sure.value)

    async def _confidence(self, run: Run, question: Question, best: Candidate | None, docs: list[Document],
                          scores: Sequence[float] | None) -> Confidence | None:
        """How sure the selected candidate is, read over the passages it was written from."""
        cfg: SelfRAGConfig = self.config
        reading = ConfidenceReading(cfg.confidence)
        if best is None or reading is ConfidenceReading.OFF:
            return None
        indices = [i for i in best.details.get("passage_indices", []) if 0 < i <= len(docs)]
        read = [docs[i - 1] for i in indices] or ([best.passage] if best.passage is not None else [])
        context, _ = build_context(read, cfg.max_context_tokens, self.llm.count_tokens)
        priors = evidence_prior(question.text, docs, scores if scores is not None and len(scores) == len(docs)
                                else None)
        return await read_confidence(
            run, reading, question, best.text, seq=best.details.get("answer_logprob"), context=context,
            docs=read, priors=[priors[i - 1] for i in indices] or None, model=self.confidence_model,
            drafts=cfg.confidence_drafts, draft_temperature=cfg.confidence_draft_temperature,
            also_read=cfg.confidence_also_read)

    def _unsure(self, sure: Confidence) -> str | None:
        floor = self.config.abstain_below_confidence
        if floor is None or sure.value is None or sure.value >= floor:
            return None
        return f"the answer's confidence {sure.value:.2f} is below {floor:g}"

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
    def _abstains_on_verdicts(self) -> bool:
        """Whether an abstention rule reads the one-passage candidates' verdicts or texts."""
        cfg = self.config
        return cfg.abstain_below is not None or cfg.abstain_min_relevance is not None or cfg.abstain_unconfirmed

    def _would_answer(self, question: Question, candidates: list[Candidate]) -> str | None:
        """The answer selection would give from ``candidates`` (no step recorded); None: no usable one."""
        usable = [c for c in candidates if malformed(c.text, question.text) is None]
        order = self._order(usable)
        return usable[order[0]].text if order else None

    def _abstain(self, run: Run, retrieved: int, candidates: list[Candidate], why: str,
                 withheld: str | None, sure: Confidence | None = None) -> Outcome:
        """The abstention outcome; ``withheld`` is the answer it replaces (scored as ``withheld_correct``)."""
        cfg = self.config
        settings = (f"abstain_below={cfg.abstain_below}, abstain_min_relevance={cfg.abstain_min_relevance}, "
                    f"abstain_unconfirmed={cfg.abstain_unconfirmed}, "
                    f"abstain_below_confidence={cfg.abstain_below_confidence}")
        note_abstention(run, settings, why)
        info = details(cfg, True, retrieved, [c for c in candidates if not c.details.get("joint")], None)
        info["abstain_reason"] = why
        info["withheld_answer"] = withheld
        if sure is not None:
            info["confidence"] = sure.as_dict()
        return Outcome(answer=ABSTAIN_ANSWER, retrieval_needed=True, candidates=candidates,
                       details=info, abstained=True, confidence=None if sure is None else sure.value)

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
        if self.config.selection == Selection.LIKELIHOOD:
            return LIKELIHOOD_RULE
        if self.config.joint_first:
            return f"The joint candidate when it has an answer; otherwise: {self.mode.rule}"
        return self.mode.rule

    async def _most_likely(self, run: Run, question: Question, candidates: list[Candidate],
                           docs: list[Document]) -> Candidate:
        """``selection: likelihood``: the candidate most likely as the reply to the answer prompt over the
        joint's passages (without a joint, over the passages the candidates were written from)."""
        joint = next((c for c in candidates if c.details.get("joint")), None)
        indices = (joint.details.get("passage_indices") if joint is not None else
                   sorted({i for c in candidates for i in c.details.get("passage_indices", [])}))
        read = [docs[i - 1] for i in indices or [] if 0 < i <= len(docs)] or docs
        context, _ = build_context(read, self.config.max_context_tokens, self.llm.count_tokens)
        scores = await evidence_likelihoods(run, question, [c.text for c in candidates], context)
        for candidate, score in zip(candidates, scores, strict=True):
            candidate.details["evidence_likelihood"] = None if score is None else round(score, 4)
        # The most likely first, the earliest (the joint) on ties; an unknown score ranks last.
        index = selection_order([float("-inf") if s is None else s for s in scores], None, False)[0]
        score = scores[index]
        note_selection(run, self._rule, candidates, index,
                       why="likelihood unknown" if score is None else f"mean log-probability {score:.3f}")
        return candidates[index]

    def _select(self, run: Run, candidates: list[Candidate]) -> Candidate | None:
        order = self._order(candidates)
        if not order:
            run.note("select_best", thought=self._rule, action_input="0 usable candidates",
                     observation="No usable candidate; answer over all retrieved passages.")
            return None
        note_selection(run, self._rule, candidates, order[0])
        return candidates[order[0]]
