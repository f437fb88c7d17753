"""IRCoT (Trivedi et al., ACL 2023): retrieval interleaved with a chain of thought.

Retrieve ``top_k`` passages for the question; then, step by step, the model
writes one sentence of reasoning over every passage gathered so far, and
that sentence is the query of the next retrieval, whose passages not yet
gathered join the others (up to ``max_passages``). The loop stops when a
sentence states the answer ("So the answer is: ..."), after ``max_steps``
sentences, when a reply holds no sentence or repeats an earlier one, or
(with the passages reader) when the passages reach ``max_passages``. Then a
reader answers: ``passages`` asks ``vanilla_rag``'s answer prompt over
everything gathered; ``reasoning`` takes the answer the chain stated, and
reads the passages only when it stated none (the paper's two readers).

Each step leaves three records in the trace: ``reason`` (the call and its
sentence), ``retrieve`` (the sentence as the query) and ``gather`` (the query,
the sentence, and which passages were new).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import Field

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...reflection.chain import ChainStep, read_step
from ...reflection.decisions import normalize_query
from ...reflection.tokens import neutralize
from ...types import ArchitectureType, Document, Question, RetrievalResult
from ..core.answer_format import finish_answer
from ..core.base import Method, MethodConfig, Outcome
from ..core.context import answer_over, build_context
from ..core.registry import register
from ..core.text import clean_answer
from ..core.trace import Run, StepRecord, shorten

NO_DOCUMENTS = "(no documents were found)"
NO_REASONING = "(none yet)"
# The model may go on to invent the next question; nothing after it is a reasoning step.
STOP = ["\nQuestion:"]


class Reader(StrEnum):
    """``ircot.reader``: how the answer is read once the loop stops."""

    PASSAGES = "passages"  # vanilla_rag's answer call over every passage gathered
    REASONING = "reasoning"  # the answer the chain stated; the passages reader when it stated none


class IRCoTConfig(MethodConfig):
    top_k: int | None = Field(None, ge=1)  # passages per retrieval; None: retrieval.top_k
    max_steps: int = Field(4, ge=1, le=16)  # reasoning sentences (the paper allows 8)
    max_passages: int = Field(15, ge=1, le=100)  # passages gathered in all (the paper's cap)
    max_context_tokens: int = Field(3000, ge=64)  # the gathered passages in each prompt
    step_max_tokens: int = Field(64, ge=8)  # one reasoning sentence; never above llm.max_tokens
    reader: Reader = Reader.PASSAGES


class Gathered:
    """The passages gathered so far, each once, in the order first retrieved, at most ``cap``."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.docs: list[Document] = []
        self.found_at: dict[str, int] = {}  # passage id -> the step whose retrieval found it

    @property
    def full(self) -> bool:
        return len(self.docs) >= self.cap

    def add(self, docs: Sequence[Document], step: int) -> tuple[list[Document], list[Document], list[Document]]:
        """Add ``docs``: (the new ones, those already gathered, those left out by the cap)."""
        new, seen, over = [], [], []
        for doc in docs:
            if doc.id in self.found_at:
                seen.append(doc)
            elif self.full:
                over.append(doc)
            else:
                self.found_at[doc.id] = step
                self.docs.append(doc)
                new.append(doc)
        return new, seen, over


def _refs(docs: Sequence[Document]) -> list[dict[str, str]]:
    return [{"id": d.id, "title": d.title} for d in docs]


def _titles(docs: Sequence[Document]) -> str:
    return ", ".join(d.title or d.id for d in docs) or "none"


@register
class IRCoT(Method):
    name = "ircot"
    description = (
        "IRCoT: retrieve for the question, then alternate one reasoning sentence with a retrieval that uses it "
        "as the query (up to max_steps), and answer from every passage gathered."
    )
    type = ArchitectureType.AGENTIC
    config_section = "ircot"
    Config = IRCoTConfig

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg = self.config
        gathered = Gathered(cfg.max_passages)
        first = await run.retrieve(question.text, cfg.top_k, thought="Retrieve passages for the question.")
        self._gather(run, 0, question.text, "", first, gathered)
        chain: list[str] = []
        said = {normalize_query(question.text)}  # a sentence that repeats the question retrieves the same way
        stopped, stated, steps = "max_steps", None, 0
        for n in range(1, cfg.max_steps + 1):
            if gathered.full and cfg.reader is Reader.PASSAGES:
                stopped = "passages_full"  # more reasoning cannot change what the passages reader reads
                break
            step, read = await self._reason(run, question, n, chain, gathered)
            steps = n
            key = normalize_query(read.sentence)
            if read.malformed or key in said:
                stopped = "malformed" if read.malformed else "repeated"
                step.details["stop"] = stopped
                step.observation = (f"(no usable sentence: {read.malformed}; stop)" if read.malformed
                                    else f"{read.sentence} (repeats an earlier sentence or the question; stop)")
                break
            said.add(key)
            chain.append(read.sentence)
            if read.states_answer:
                stopped, stated = "answer_stated", read.answer
                break
            if gathered.full:  # the reasoning reader goes on reasoning over what it has
                run.note("gather", thought=f"Step {n}: the passages reached max_passages ({cfg.max_passages}); "
                         "no retrieval.", action_input=read.sentence, observation="no retrieval: passages full",
                         details={"ircot_step": n, "query": None, "sentence": read.sentence, "new_passages": [],
                                  "gathered": len(gathered.docs)})
                continue
            result = await run.retrieve(read.sentence, cfg.top_k,
                                        thought=f"Step {n}: retrieve with the reasoning sentence as the query.")
            self._gather(run, n, read.sentence, read.sentence, result, gathered)
        answer, used, reader = await self._conclude(run, question, gathered, stated)
        return Outcome(
            answer=answer, retrieval_needed=True, citations=used,
            details={"stopped": stopped, "steps": steps, "chain": chain, "stated_answer": stated, "reader": reader,
                     "gathered": [{"id": d.id, "title": d.title, "step": gathered.found_at[d.id]}
                                  for d in gathered.docs]},
        )

    @staticmethod
    def _gather(run: Run, n: int, query: str, sentence: str, result: RetrievalResult, gathered: Gathered) -> None:
        """Add a retrieval's passages and record what was new (the ``gather`` step)."""
        new, seen, over = gathered.add(result.documents, n)
        said = f'Step {n}: "{shorten(sentence, 120)}" New passages: ' if sentence else "The question's passages: "
        tail = f"; {len(over)} left out (max_passages)" if over else ""
        run.note(
            "gather",
            thought=f"Step {n}: add the passages not gathered yet." if n else "Gather the question's passages.",
            action_input=query,
            observation=f"{said}{_titles(new)} ({len(gathered.docs)} gathered{tail})",
            details={"ircot_step": n, "query": query, "sentence": sentence or None, "new_passages": _refs(new),
                     "already_gathered": _refs(seen), "left_out": _refs(over), "gathered": len(gathered.docs)},
        )

    async def _reason(self, run: Run, question: Question, n: int, chain: list[str],
                      gathered: Gathered) -> tuple[StepRecord, ChainStep]:
        """One reasoning call over every passage gathered so far; its first sentence, read."""
        cfg = self.config
        context, shown = build_context(gathered.docs, cfg.max_context_tokens, run.llm.count_tokens)
        # Earlier sentences are model output that may quote a passage: neutralised like passages.
        reasoning = neutralize(" ".join(chain)) if chain else NO_REASONING
        prompt = render(load_prompt("ircot_step"), context=context or NO_DOCUMENTS, question=question.text,
                        reasoning=reasoning)
        system = render(load_prompt("ircot_system"), finish_answer=finish_answer(question))
        step = await run.generate(
            chat(system, prompt), action="reason", thought=f"Step {n}: write the next sentence of the reasoning.",
            action_input=question.text, max_tokens=min(cfg.step_max_tokens, int(self.llm_params["max_tokens"])),
            stop=STOP,
        )
        read = read_step(step.text)
        step.observation = read.sentence
        step.details.update(ircot_step=n, sentence=read.sentence, answer_stated=read.answer,
                            passages_in_context=[d.id for d in shown])
        if read.dropped:
            step.details["dropped"] = shorten(read.dropped)
        if read.malformed:
            step.details["malformed"] = read.malformed
        return step, read

    async def _conclude(self, run: Run, question: Question, gathered: Gathered,
                    stated: str | None) -> tuple[str, list[Document], str]:
        """The answer, the passages it was written from, and which reader wrote it."""
        cfg = self.config
        if cfg.reader is Reader.REASONING and stated:
            answer = clean_answer(stated)
            _, shown = build_context(gathered.docs, cfg.max_context_tokens, run.llm.count_tokens)
            run.note("read_answer", thought="The reasoning stated the answer: read it off the chain.",
                     action_input=question.text, observation=answer, details={"reader": "reasoning"})
            return answer, shown, "reasoning"
        why = "" if cfg.reader is Reader.PASSAGES else " (the reasoning stated no answer)"
        step, _, used = await answer_over(
            run, question, gathered.docs, cfg.max_context_tokens,
            thought=f"Answer from the {len(gathered.docs)} passages gathered{why}.", final=True,
        )
        return clean_answer(step.text), used, "passages"

