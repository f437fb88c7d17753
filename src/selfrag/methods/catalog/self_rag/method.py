"""Self-RAG as the seeds' phases: decide, retrieve, judge relevance, write, critique, select, read, conclude.

1. **Decide** whether to retrieve (``retrieval_mode``, :mod:`.decide`); if not,
   answer without passages.
2. **Retrieve** ``top_k`` passages.
3. **Judge relevance** of the first ``num_candidates`` before writing (critics
   that judge first; :mod:`.candidates`).
4. **Write** the joint candidate over the passages with the best evidence and
   the one-passage candidates (on demand under ``joint_first``).
5. **Critique**: each one-passage candidate carries the verdicts its critic
   read while writing it; the joint's support and utility are asked only where
   they can change the answer.
6. **Select** (``selection``, :mod:`.selection`); with no usable candidate,
   one answer over every passage.
7. **Read the confidence** of the answer (``confidence``, :mod:`.conclude`).
8. **Abstain or answer** (``abstain``, :mod:`.abstain`).

Each phase is a small object with one job, called with the run and the
question's :class:`.state.State`. Where the verdicts come from is the
``critic`` (:mod:`...critique.sources`), made for each question; every verdict
in the trace and the response names its source. The seeds' pipelines are
presets of these settings (``configs/self_rag_seed000.yaml``: no joint,
prompted labels, ``1 + 2n`` calls; ``configs/self_rag_seed003.yaml``: JSON
verdicts, ``1 + 4k``).
"""

from __future__ import annotations

from typing import Any

from ....types import ArchitectureType, Question
from ...core.base import Method, Outcome
from ...core.registry import register
from ...core.trace import Run
from ...critique.sources import SOURCES, make_critic, resolve
from . import abstain
from .candidates import Critique, JudgeRelevance, Plan, Retrieve, Write
from .conclude import Conclude, ReadConfidence
from .config import Selection, SelfRAGConfig
from .decide import Decide, answer_directly
from .selection import SELECTIONS, Select
from .state import State


@register
class SelfRAG(Method):
    name = "self_rag"
    description = (
        "Decide retrieval, judge the passages, write the joint answer over the best evidence (one-passage "
        "candidates when it has none), critique, select, read how sure the answer is and whether the passages "
        "hold it; critic: auto (fitted heads on a local model), fitted, prompted, json, label_probs or "
        "reflection_tokens."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_rag"
    Config = SelfRAGConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg: SelfRAGConfig = self.config
        strategy = SELECTIONS[cfg.selection](SOURCES[resolve(cfg.critic, self.llm)], self.llm)
        needs = abstain.needs(cfg.abstain)
        plan = Plan(judged=cfg.num_candidates, joint_passages=cfg.joint_passages,
                    on_demand=cfg.selection == Selection.JOINT_FIRST and abstain.CANDIDATES not in needs,
                    judge_joint=strategy.needs_verdicts or abstain.SUPPORT in needs,
                    max_context_tokens=cfg.max_context_tokens)
        self.decide = Decide(cfg.retrieval_mode, cfg.top_k)
        self.retrieve = Retrieve(cfg.top_k)
        self.judge_relevance = JudgeRelevance(plan)
        self.write = Write(plan)
        self.critique = Critique(plan)
        self.select = Select(strategy, cfg.abstain, cfg.max_context_tokens)
        self.read_confidence = ReadConfidence(cfg.confidence_reading, cfg.confidence_file, cfg.max_context_tokens)
        self.conclude = Conclude(resolve(cfg.critic, self.llm), cfg.abstain, strategy, cfg.sufficiency_floor)

    async def _answer(self, question: Question, run: Run) -> Outcome:
        return self.conclude(run, await self.reflect(question, run))

    async def reflect(self, question: Question, run: Run) -> State:
        """Every phase before the conclusion; the state they leave (what ``selfrag critic fit`` reads)."""
        state = State(question, make_critic(self.config.critic, self.llm, question,
                                            max_context_tokens=self.config.max_context_tokens,
                                            max_tokens=int(self.llm_params["max_tokens"])))
        if not await self.decide(run, state):
            state.retrieval_needed = False
            await answer_directly(run, state, "No retrieval needed; answer directly.")
            return state
        await self.retrieve(run, state)
        await self.judge_relevance(run, state)
        await self.write(run, state)
        await self.critique(run, state)
        if state.none_relevant:
            await answer_directly(run, state, "No relevant documents; answer without context.")
            return state
        await self.select(run, state)
        await self.read_confidence(run, state)
        return state
