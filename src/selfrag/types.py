"""Core data types shared by every part of selfrag.

Frozen dataclasses that carry data between components. They hold no behaviour
beyond trivial conveniences; serialisation lives in :mod:`selfrag.serialize`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class QuestionType(str, Enum):
    """Common question types. ``Question.type`` accepts any string; these are the usual ones."""

    BRIDGE = "bridge"
    COMPARISON = "comparison"
    YES_NO = "yes_no"
    MULTIPLE_CHOICE = "multiple_choice"
    OPEN = "open"


class ArchitectureType(str, Enum):
    """The family a method belongs to."""

    BASELINE = "baseline"  # no retrieval
    STANDARD = "standard"  # one retrieval, one generation
    AGENTIC = "agentic"  # the model decides, critiques or iterates


@dataclass(frozen=True)
class Document:
    """A passage that can be retrieved."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """A question with its gold answers and, for per-question corpora, its own passages."""

    id: str
    text: str
    answers: tuple[str, ...] = ()
    type: str = QuestionType.OPEN.value
    level: str = ""
    choices: tuple[str, ...] = ()
    contexts: tuple[Document, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def gold_answer(self) -> str:
        """The first gold answer, or an empty string."""
        return self.answers[0] if self.answers else ""


@dataclass(frozen=True)
class RetrievalResult:
    """What one retrieval call returned."""

    documents: tuple[Document, ...]
    scores: tuple[float, ...]
    query: str
    retrieval_time_ms: float = 0.0
    method: str = ""


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token, its log-probability, and the most likely alternatives at its position."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Generation:
    """The result of one LLM call."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    cached: bool = False
    model: str = ""
    finish_reason: str = ""
    # Per generated token, only when top log-probabilities were requested.
    logprobs: tuple[TokenLogprobs, ...] | None = None
    # Prompt tokens the backend actually had to evaluate (after KV-cache prefix
    # reuse); equals prompt_tokens for backends that cannot tell.
    evaluated_prompt_tokens: int | None = None
    # The hidden states the request asked for: {"prompt": {layer: [...]}, "answer": {layer: [...]}}.
    hidden: dict[str, dict[int, list[float]]] | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def top_logprobs(self) -> list[dict[str, float]] | None:
        """Per generated token, the top alternatives (token -> log-probability)."""
        if self.logprobs is None:
            return None
        return [t.top for t in self.logprobs]


@dataclass(frozen=True)
class ReasoningStep:
    """One step of a method's trace: an LLM call, a retrieval, or a pure decision.

    ``llm_calls`` and ``retrieval_calls`` say what the step cost; a response's
    totals are sums over its steps. ``details`` holds structured data (scores,
    probabilities, labels) for traces and analysis.
    """

    step_id: int
    thought: str
    action: str
    action_input: str
    observation: str
    tokens_used: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    llm_calls: int = 0
    retrieval_calls: int = 0
    cached: bool = False
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """One reflection verdict on a decision, a passage or a candidate, and the reader that gave it.

    ``aspect`` is what is judged (``retrieve``, ``relevance``, ``support``, ``utility``, ...);
    ``value`` its score: a probability (P(retrieve), P(relevant)), the support score
    (P(full) + 0.5 P(partial)) or the expected utility in [-1, 1]; None when there was nothing
    to read. ``label`` is the label written or most probable, ``probs`` the probability of each
    label as read (None for a written label), ``source`` the reader (a prompted label, JSON,
    label probabilities, reflection tokens, a fitted reader). ``default``: the reply held no usable
    verdict, so ``label`` is the parser's default and no judgement.
    """

    aspect: str
    value: float | None
    label: str | None = None
    source: str = ""
    probs: dict[str, float] | None = None
    default: bool = False
    note: str = ""


@dataclass
class Candidate:
    """One candidate answer (or the next segment of one), what it was written from, and its verdicts.

    ``passages``: the passages it was written from (none: written without); ``indices``: their 1-based
    ranks among the retrieved passages; ``joint``: written over several passages at once; ``seq``: the
    mean token log-probability of the reply that wrote it; ``final``: the answer is finished (the
    segment loop); ``details``: what its trace row shows besides.
    """

    text: str
    passages: tuple[Document, ...] = ()
    indices: tuple[int, ...] = ()
    joint: bool = False
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    seq: float | None = None
    score: float | None = None
    final: bool = True
    number: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    # The hidden states of the reply that wrote it, when they were read (Generation.hidden; not serialised).
    states: dict[str, dict[int, list[float]]] | None = None

    @property
    def passage(self) -> Document | None:
        """The first passage it was written from."""
        return self.passages[0] if self.passages else None

    def value(self, aspect: str) -> float | None:
        verdict = self.verdicts.get(aspect)
        return None if verdict is None else verdict.value

    def label(self, aspect: str) -> str | None:
        verdict = self.verdicts.get(aspect)
        return None if verdict is None else verdict.label

    @property
    def relevance(self) -> str | None:
        return self.label("relevance")

    @property
    def support(self) -> str | None:
        return self.label("support")

    @property
    def utility(self) -> float | None:
        """The utility as a 1-5 rating: as written, or expected from the label probabilities."""
        verdict = self.verdicts.get("utility")
        if verdict is None or verdict.value is None:
            return None
        if verdict.probs is None and verdict.label is not None and verdict.label.isdigit():
            return int(verdict.label)
        return round(3.0 + 2.0 * verdict.value, 4)


@dataclass(frozen=True)
class RAGResponse:
    """A method's answer to one question, with its full trace and accounting."""

    answer: str
    reasoning_chain: tuple[ReasoningStep, ...]
    retrieved_docs: tuple[RetrievalResult, ...]
    total_tokens: int
    total_cost_usd: float
    latency_ms: float
    num_retrieval_calls: int
    num_llm_calls: int
    model: str
    architecture: str
    candidates: tuple[Candidate, ...] = ()
    retrieval_needed: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    # The passages that support the answer: those of ``read`` that hold the answer, are named in the
    # question or bridge to one that holds it (selfrag.methods.steps.citing; docs/methods.md).
    citations: tuple[Document, ...] = ()
    # True when the method declined to answer ("insufficient evidence").
    abstained: bool = False
    # How sure the method is of its answer, in [0, 1] (None: not read); how it was read is in
    # details["confidence"].
    confidence: float | None = None
    # The passages the final answer was written from (empty: it used no document, and
    # details["without_documents"] says why).
    read: tuple[Document, ...] = ()

    @property
    def sources(self) -> list[Document]:
        """Distinct documents retrieved during the run, in first-seen order."""
        seen: dict[str, Document] = {}
        for result in self.retrieved_docs:
            for doc in result.documents:
                seen.setdefault(doc.id, doc)
        return list(seen.values())
