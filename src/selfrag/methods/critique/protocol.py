"""The critic protocol: where a Self-RAG method's verdicts come from, one small class per source.

A source answers Self-RAG's reflection questions for one question's passages
and candidates, and every verdict it gives names it (``Verdict.source``):

* :meth:`CriticSource.retrieval`: its own retrieval decision, or None to leave
  the decision to the method's shared step (:mod:`.decision`, :mod:`.look_first`);
* :meth:`CriticSource.relevance`: one passage's relevance, asked before any
  candidate is written (sources with ``judges_first``; a passage judged
  irrelevant then gets no candidate, seed 003's filter);
* :meth:`CriticSource.write`: one candidate from one passage, with whatever
  verdicts the source reads while writing it (seed 000 reads relevance and
  support from the same reply);
* :meth:`CriticSource.judge`: the support and utility of a candidate written
  elsewhere (the joint candidate, written with ``vanilla_rag``'s prompt).

``key`` and ``rule`` are the source's own ranking of candidates (``selection:
critique``). The sources: :class:`.prompted.PromptedLabels` (text labels,
seed 000), :class:`.prompted_json.PromptedJSON` (one JSON verdict per call,
seed 003) and :class:`.probabilities.LabelProbabilities` (label or
reflection-token probabilities read by the paper's formulas, seed 002's
critic); :mod:`.sources` maps each ``critic`` setting to its class.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from ...types import Candidate, Question, Verdict
from ..core.trace import Run
from ..steps.evidence import Passages


class CriticSource(Protocol):
    name: ClassVar[str]
    rule: ClassVar[str]
    judges_first: ClassVar[bool]

    @staticmethod
    def key(candidate: Candidate) -> Any: ...

    async def retrieval(self, run: Run, question: Question) -> bool | None: ...

    async def relevance(self, run: Run, question: Question, passages: Passages) -> Verdict | None: ...

    async def write(self, run: Run, question: Question, passages: Passages) -> Candidate: ...

    async def judge(self, run: Run, question: Question, candidate: Candidate, context: str) -> Candidate: ...

