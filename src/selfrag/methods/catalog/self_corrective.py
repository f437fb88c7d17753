"""Self-corrective RAG: retrieve, judge the documents, reformulate the query until they suffice.

Each iteration retrieves ``top_k`` passages for the current query and asks the
model whether they can answer the *original* question completely. YES: answer
from them and stop. NO: rewrite the query using the stated reason and try
again. When the iterations run out (or a rewrite repeats an earlier query),
the answer comes from the best documents seen across all iterations, ranked
by reciprocal-rank fusion of the iterations' result lists.

The answer is written the way ``self_rag``'s joint candidate writes its own
(:mod:`.joint_answer`): for a yes/no question the facts it compares first,
then ``Answer: yes`` or ``no`` (``facts_first: yes_no``); otherwise
``vanilla_rag``'s answer call over the documents chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...reflection.decisions import NO, Decision, clean_query, normalize_query
from ...types import ArchitectureType, Document, Question, RetrievalResult
from ..core.base import Method, Outcome
from ..core.registry import register
from ..core.trace import Run
from ..critique.corrective_judge import JudgeReading, describe, judge_documents
from ..steps.choice_reading import reader_for
from ..steps.joint_answer import JointAnswerConfig, joint_answer

RRF_K = 60  # the usual reciprocal-rank-fusion constant


class SelfCorrectiveConfig(JointAnswerConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_iterations: int = Field(3, ge=1, le=20)
    max_context_tokens: int = Field(1500, ge=16)
    reflect_max_tokens: int = Field(64, ge=1)
    reformulate_max_tokens: int = Field(32, ge=1)
    # How the judge's YES/NO is read: as written, or P(YES) at the reply's first token against
    # judge_threshold (steps/sufficiency.py; the threshold is a property of the model).
    judge: JudgeReading = JudgeReading.TEXT
    judge_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # facts_first and answer_reading (JointAnswerConfig): how the answer is written, as self_rag's joint.


def fuse_results(results: Sequence[RetrievalResult], top_k: int) -> list[tuple[Document, float, list[int]]]:
    """Reciprocal-rank fusion of several result lists: ``(doc, fused score, iterations)``, best first.

    A document scores ``sum(1 / (RRF_K + rank))`` over the lists it appears in,
    so one found by several queries beats one found once; ranks, not raw
    scores, are compared, because BM25 scores of different queries are not on
    one scale. Ties keep first-seen order.
    """
    fused: dict[str, list[Any]] = {}
    for iteration, result in enumerate(results, start=1):
        for rank, doc in enumerate(result.documents, start=1):
            entry = fused.setdefault(doc.id, [doc, 0.0, []])
            entry[1] += 1.0 / (RRF_K + rank)
            if iteration not in entry[2]:
                entry[2].append(iteration)
    ranked = sorted(fused.values(), key=lambda e: -e[1])  # stable: ties stay first-seen
    return [(doc, score, iters) for doc, score, iters in ranked[:top_k]]


def _doc_refs(docs: Sequence[Document]) -> list[dict[str, str]]:
    return [{"id": d.id, "title": d.title} for d in docs]


@register
class SelfCorrectiveRAG(Method):
    name = "self_corrective"
    description = (
        "Retrieve, judge whether the documents answer the question, reformulate the query and retry "
        "(up to max_iterations); answer from the accepted or best documents."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_corrective"
    Config = SelfCorrectiveConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reader = reader_for(self.config.answer_reading)

    def _capped(self, limit: int) -> int:
        return min(limit, int(self.llm_params["max_tokens"]))

    async def _reflect(self, run: Run, question: Question, iteration: int, query: str, docs: Sequence[Document]):
        info: dict[str, Any] = {"iteration": iteration, "query": query, "documents": _doc_refs(docs)}
        if not docs:
            decision = Decision(NO, "no documents were retrieved", parsed=False, source="none")
            info.update(decision=NO, reason=decision.reason, parsed=False)
            run.note(
                "reflect",
                thought="Nothing retrieved: NO without a reflection call.",
                action_input=query,
                observation=f"NO: {decision.reason}",
                details=info,
            )
            return decision
        cfg = self.config
        step, judgement = await judge_documents(
            run, question, docs, max_context_tokens=cfg.max_context_tokens,
            max_tokens=self._capped(cfg.reflect_max_tokens), reading=cfg.judge, threshold=cfg.judge_threshold,
            thought_prefix=f"Iteration {iteration}: ",
        )
        decision = judgement.decision
        step.observation = describe(judgement, cfg.judge_threshold)
        info.update(decision=decision.verdict, reason=decision.reason, parsed=decision.parsed)
        if judgement.p_yes is not None:
            info.update(p_yes=round(judgement.p_yes, 4), written=judgement.written.verdict)
        step.details.update(info, parsed_from=decision.source)
        return decision

    async def _reformulate(self, run: Run, question: Question, iteration: int, query: str, reason: str) -> str:
        prompt = render(
            load_prompt("self_corrective_reformulate"),
            question=question.text,
            query=query,
            reason=reason or "the documents did not answer the question",
        )
        step = await run.generate(
            chat(None, prompt),
            action="reformulate",
            thought=f"Iteration {iteration}: rewrite the query using the reason.",
            action_input=query,
            max_tokens=self._capped(self.config.reformulate_max_tokens),
        )
        new_query = clean_query(step.text)
        step.observation = new_query or "(no query in the output)"
        step.details.update(iteration=iteration, query=query, reformulated_query=new_query)
        return new_query

    async def _generate(self, run: Run, question: Question, docs: Sequence[Document], name: str) -> str:
        # Written as self_rag's joint candidate: vanilla_rag's answer call, facts first for yes/no.
        _, _, answer = await joint_answer(
            run, question, docs, self.config.max_context_tokens, name=name,
            facts_first=self.config.facts_first, reader=self.reader, final=False,
        )
        return answer

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg = self.config
        query = question.text
        seen = {normalize_query(query)}
        results: list[RetrievalResult] = []
        iterations: list[dict[str, Any]] = []
        stopped = "exhausted"
        for i in range(1, cfg.max_iterations + 1):
            result = await run.retrieve(query, cfg.top_k, thought=f"Iteration {i}: retrieve for the current query.")
            results.append(result)
            decision = await self._reflect(run, question, i, query, result.documents)
            iterations.append(
                {
                    "iteration": i,
                    "query": query,
                    "documents": _doc_refs(result.documents),
                    "decision": decision.verdict,
                    "reason": decision.reason,
                    "parsed": decision.parsed,
                    "reformulated_query": None,
                }
            )
            if decision.accepted:
                answer = await self._generate(run, question, result.documents, f"iteration {i}'s documents")
                used = {"from": "accepted", "iteration": i, "documents": _doc_refs(result.documents)}
                return self._outcome(answer, "accepted", iterations, used)
            if i == cfg.max_iterations:
                break  # a rewrite now would never be used
            new_query = await self._reformulate(run, question, i, query, decision.reason)
            iterations[-1]["reformulated_query"] = new_query
            key = normalize_query(new_query)
            if not key or key in seen:
                stopped = "repeated_query" if key else "empty_query"
                run.note(
                    "stop",
                    thought="The new query repeats an earlier one: stop early."
                    if key
                    else "The reformulation held no query: stop early.",
                    action_input=new_query,
                    observation=stopped,
                    details={"iteration": i, "reason": stopped},
                )
                break
            seen.add(key)
            query = new_query
        return await self._fallback(run, question, results, iterations, stopped)

    async def _fallback(
        self,
        run: Run,
        question: Question,
        results: list[RetrievalResult],
        iterations: list[dict[str, Any]],
        stopped: str,
    ) -> Outcome:
        best = fuse_results(results, self.config.top_k)
        docs = [doc for doc, _, _ in best]
        chosen = [{"id": d.id, "title": d.title, "rrf_score": round(s, 5), "iterations": its} for d, s, its in best]
        run.note(
            "select_documents",
            thought=f"No iteration was accepted ({stopped}); rank every document seen by reciprocal-rank fusion.",
            observation="Best documents: " + ", ".join(d.title or d.id for d in docs),
            details={"strategy": "reciprocal_rank_fusion", "rrf_k": RRF_K, "documents": chosen},
        )
        answer = await self._generate(run, question, docs, "the best documents seen")
        return self._outcome(answer, stopped, iterations, {"from": "reciprocal_rank_fusion", "documents": chosen})

    @staticmethod
    def _outcome(answer: str, stopped: str, iterations: list[dict[str, Any]], source: dict[str, Any]) -> Outcome:
        return Outcome(
            answer=answer,
            retrieval_needed=True,
            details={"stopped": stopped, "iterations": iterations, "answer_documents": source},
        )
