"""Verdicts from a model's fitted reflection heads (``critic: fitted``, the default on a local model).

Each verdict is a calibrated probability read by one head of the model's
critic fit (:mod:`.fits`; ``selfrag critic fit`` makes one), from readings the
pipeline has anyway or makes in one short call:

* **relevance** of every retrieved passage, from its evidence signals
  (no call): the prior, the share of the best retrieval score, a title the
  question names, a title another top passage names, the rank;
* **support** of a candidate, from its likelihood as the reply to the answer
  prompt over the joint's passages: the joint's own is the log-probability it
  was written with (no call), another candidate's one scoring pass;
* **sufficiency** (do the passages read hold the answer?) and **confidence**
  (is the answer right?), from the answer's readings (:mod:`.signals`: P(True)
  and the likelihood after the question alone, one short call each, and the
  free ones) and, when the fit reads them, the hidden states of the answer
  call itself (the last prompt token, the answer's last token);
* **utility**, the confidence as the seeds' 1-5 rating (``1 + 4p``).

A support probability is worded in the seeds' three labels (at least 2/3
fully supported, 1/3 partially, below that no support), so abstention rules
read it as they read a written label. Every verdict names this source and the
fit it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...types import Candidate, Document, Question, Verdict
from ..core.answer_format import answer_system
from ..core.context import build_context
from ..core.text import clean_answer
from ..core.trace import Run, shorten
from ..steps.evidence import Passages
from .confidence import mean_logprob
from .fits import load_fit
from .prompted import candidate as make_candidate
from .signals import CALLED, PASSAGE, answer_readings, closed, passage_signals, support_values
from .support_likelihood import evidence_likelihoods


@dataclass(frozen=True)
class Assessment:
    """What the fitted critic read of an answer: its verdicts and the readings behind them."""

    verdicts: dict[str, Verdict]
    readings: dict[str, float | None] = field(default_factory=dict)
    threshold: float | None = None


def support_words(p: float) -> str:
    return "fully supported" if p >= 2 / 3 else "partially supported" if p >= 1 / 3 else "no support"


class FittedCritic:
    name: ClassVar[str] = "fitted"
    rule: ClassVar[str] = ("Pick the candidate the support head finds most likely right (its likelihood over the "
                           "best-evidence passages, calibrated); the joint on ties.")
    judges_first: ClassVar[bool] = False
    # Its joint's verdicts cost no call, so they are always read.
    judges_joint: ClassVar[bool] = True

    def __init__(self, llm: Any, max_context_tokens: int) -> None:
        self.llm = llm
        self.max_context_tokens = max_context_tokens
        self.fit, self.origin = load_fit(llm)
        self.passages: list[dict] = []
        self.relevance: list[float] = []  # every retrieved passage's P(relevant), in retrieval order

    @property
    def hidden_layers(self) -> tuple[int, ...]:
        """The layers a head reads, asked for at the joint's answer call (where the backend can give them)."""
        return self.fit.layers if getattr(self.llm, "supports_hidden", False) else ()

    def source(self, what: str) -> str:
        return f"fitted: {what} ({self.origin})"

    @staticmethod
    def key(candidate: Candidate) -> Any:
        value = candidate.value("support")
        return -1.0 if value is None else value

    async def retrieval(self, run: Run, question: Question) -> bool | None:
        return None

    async def relevance(self, run: Run, question: Question, passages: Passages) -> Verdict | None:
        return None

    def read_passages(self, question: Question, docs: list[Document], scores: Any) -> list[Verdict]:
        """Every retrieved passage's relevance verdict, from its evidence signals (no call)."""
        self.passages = passage_signals(question.text, docs, scores)
        head = self.fit.head("relevance")
        if head is None:
            return []
        self.relevance = [head.probability({k: signals[k] for k in PASSAGE}) for signals in self.passages]
        return [self._relevance(p, "evidence signals") for p in self.relevance]

    def _relevance(self, p: float, what: str) -> Verdict:
        return Verdict("relevance", p, "relevant" if p >= 0.5 else "irrelevant", self.source(what))

    def candidate_relevance(self, candidate: Candidate) -> Verdict | None:
        """A candidate's relevance: its passage's; the joint's, the mean of the best two it read."""
        values = sorted((self.relevance[i - 1] for i in candidate.indices if 0 < i <= len(self.relevance)),
                        reverse=True)[:2]
        if not values:
            return None
        return self._relevance(sum(values) / len(values),
                               "evidence signals of the passages read" if candidate.joint else "evidence signals")

    async def write(self, run: Run, question: Question, passages: Passages) -> Candidate:
        """An answer from one passage (``vanilla_rag``'s prompt); its support is read by :meth:`judge`."""
        context, _ = build_context(passages.docs, self.max_context_tokens, self.llm.count_tokens)
        step = await run.generate(
            chat(answer_system(question), render(load_prompt("answer_with_context"), context=context,
                                                 question=question.text)),
            action="generate", thought=f"Answer from {passages.name()}.", action_input=question.text,
            **({"top_logprobs": 1} if self.llm.supports_logprobs else {}))
        step.details["passage_id"] = passages.docs[0].id
        written = make_candidate(clean_answer(step.text), passages, {}, 0.0)
        written.seq = mean_logprob(step)
        return written

    async def judge(self, run: Run, question: Question, candidate: Candidate, context: str) -> Candidate:
        """The candidate's support: its likelihood over the joint's passages, read by the support head."""
        if candidate.joint:
            likelihood = candidate.seq
        else:
            [likelihood] = await evidence_likelihoods(run, question, [candidate.text], context)
        head = self.fit.head("support")
        if head is not None and likelihood is not None:
            p = head.probability(support_values(likelihood, candidate.joint, closed(candidate.text, question)))
            candidate.verdicts["support"] = Verdict("support", p, support_words(p),
                                                    self.source("likelihood over the evidence"))
            candidate.score = p
        candidate.details["evidence_likelihood"] = None if likelihood is None else round(likelihood, 4)
        if "relevance" not in candidate.verdicts and (relevance := self.candidate_relevance(candidate)) is not None:
            candidate.verdicts["relevance"] = relevance
        return candidate

    async def assess(self, run: Run, question: Question, answer: Candidate, docs: list[Document],
                     context: str) -> Assessment:
        """Sufficiency and confidence of the selected answer (P(True) and the likelihood alone read first
        when a head reads them)."""
        # Only the readings the heads read cost their call; with no answer head (reading for a fit), all.
        heads = [h for name in ("sufficiency", "confidence") if (h := self.fit.head(name)) is not None]
        wanted = {f for h in heads for f in h.features} if heads else set(CALLED)
        readings = await answer_readings(run, question, answer, docs, self.passages, context, wanted)
        states = answer.states
        verdicts: dict[str, Verdict] = {}
        for name in ("sufficiency", "confidence"):
            head = self.fit.head(name)
            if head is None:
                continue
            p = head.probability(readings, states)
            what = "answer readings" + (" and hidden state" if head.reads_hidden and states else "")
            verdicts[name] = Verdict(name, p, "high" if p >= 0.5 else "low", self.source(what))
        if "confidence" in verdicts:
            p = verdicts["confidence"].value or 0.0
            verdicts["utility"] = Verdict("utility", 2 * p - 1, str(1 + round(4 * p)), self.source("the confidence"))
        run.note("assess", thought="How sure is the answer, and do the passages read hold it? (fitted heads)",
                 action_input=shorten(answer.text),
                 # Utility shows as the seeds' 1-5 rating; its value is the paper's -1..1 utility score.
                 observation=", ".join(f"{k} {v.label}/5" if k == "utility" else f"{k} {v.value:.2f}"
                                       for k, v in verdicts.items() if v.value is not None),
                 details={"readings": {k: None if v is None else round(v, 4) for k, v in readings.items()},
                          "verdicts": {k: round(v.value, 4) for k, v in verdicts.items() if v.value is not None},
                          "fit": self.origin, "threshold": self.fit.threshold})
        return Assessment(verdicts, readings, self.fit.threshold)
