"""Segment-level Self-RAG with beam search (the paper's Algorithm 1, seed 001).

The answer is written one segment (sentence) at a time. Before each segment
the critic decides ``yes`` (retrieve top_k for the question plus the answer so
far), ``continue`` (reuse the passages of the previous segment) or ``no``
(write without passages). Every passage yields one candidate next segment,
generated concurrently and critiqued (ISREL, ISSUP, ISUSE, is_final); each
candidate extends its beam with its segment score. The best ``beam_width``
partial answers by cumulative score survive (1 = greedy); finished beams
stay in the pool; the search stops when every kept beam is final or after
``max_segments``. One last call writes the short answer the question asks
for over the best beam's passages: those its segments came from first, then
the others it retrieved (``short_answer_passages``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, Field

from ...reflection import score as S
from ...reflection.readings import segment_score
from ...types import ArchitectureType, Candidate, Document, Question
from ...validation import off_when_false
from ..core.answer_shape import malformed
from ..core.base import Method, MethodConfig, Outcome
from ..core.registry import register
from ..core.trace import Run, shorten
from ..critique import Critic, CriticConfig, Task
from ..critique import drafts as write_drafts
from ..critique.relevance import known_relevance
from ..critique.stages import AdaptiveConfig, WeightsConfig, adaptive_retrieval, as_candidate
from ..steps.facts_first import FactsFirst, answer_from_notes, read_short
from ..steps.joint_answer import joint_answer


class ShortAnswerReads(StrEnum):
    """What the short-answer call reads."""

    # vanilla_rag's prompt over the best beam's passages: those its segments were written from
    # first, then the others it retrieved (ShortAnswerPassages), up to max_context_tokens.
    PASSAGES = "passages"
    # The segments alone (facts_first.answer_from_notes): cheaper, and less accurate (docs/methods.md).
    SEGMENTS = "segments"


class ShortAnswerPassages(StrEnum):
    """Which other passages follow the segments' own in the short answer's context."""

    # Every retrieval along the beam's path, the question's own first.
    PATH = "path"
    # The last retrieval only, whose query holds the answer so far and can drift from the question.
    LAST = "last"


class SelfRagSegmentConfig(MethodConfig):
    top_k: int | None = Field(None, ge=1)  # None: retrieval.top_k
    max_segments: int = Field(4, ge=1, le=32)
    beam_width: int = Field(S.PAPER_BEAM_WIDTH, ge=1, le=16)
    segment_tokens: int = Field(48, ge=4)
    # Leave segments judged "no support" out of the final answer (the paper's ignore_cont).
    drop_unsupported: bool = False
    # One more call writes the short answer the question asks for; false returns the best
    # beam's segments themselves, the paper's long-form answer. A reply with no usable answer
    # keeps the segments.
    short_answer: bool = True
    # What that call reads (ShortAnswerReads) and which other passages follow the segments' own
    # (ShortAnswerPassages). A beam that retrieved nothing is read from its segments.
    short_answer_reads: ShortAnswerReads = ShortAnswerReads.PASSAGES
    short_answer_passages: ShortAnswerPassages = ShortAnswerPassages.PATH
    # Over the passages, a yes/no question's answer is written after the facts it rests on, as
    # self_rag's joint candidate does ("yes_no", facts_first.py); "all" does so for every
    # question, "off" never.
    facts_first: Annotated[FactsFirst, BeforeValidator(off_when_false)] = FactsFirst.YES_NO
    max_context_tokens: int = Field(2000, ge=16)
    critic: CriticConfig = Field(default_factory=CriticConfig)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    weights: WeightsConfig = Field(default_factory=WeightsConfig)


@dataclass(frozen=True)
class Beam:
    """A partial answer: its segments, their scores, the passages at hand, and whether it is finished."""

    id: str = "root"
    segments: tuple[Candidate, ...] = ()
    scores: tuple[float, ...] = ()
    decisions: tuple[str, ...] = ()
    passages: tuple[Document, ...] = ()
    # Every passage retrieved along the beam's path, the earliest retrieval first, each once.
    retrieved: tuple[Document, ...] = ()
    final: bool = False

    @property
    def score(self) -> float:
        return sum(self.scores)

    @property
    def text(self) -> str:
        return " ".join(d.text.strip() for d in self.segments if d.text.strip())

    def summary(self) -> dict:
        return {
            "beam": self.id,
            "score": round(self.score, 4),
            "final": self.final,
            "answer": shorten(self.text, 100),
        }


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _no_progress(segment: str, so_far: str) -> str:
    """Why a candidate segment adds nothing ("empty", "repeat"), or "" when it does."""
    seg = _norm(segment)
    if not seg:
        return "empty"
    if seg in _norm(so_far):
        return "repeat"
    return ""


def _once(docs) -> tuple[Document, ...]:
    """``docs`` without ``None`` and repeats, in order."""
    seen: set[str] = set()
    out: list[Document] = []
    for doc in docs:
        if doc is not None and doc.id not in seen:
            seen.add(doc.id)
            out.append(doc)
    return tuple(out)


def evidence(beam: Beam, others: ShortAnswerPassages = ShortAnswerPassages.PATH) -> list[Document]:
    """The passages behind ``beam``: those its segments were written from, in order, then the
    others it retrieved: along its whole path, the earliest retrieval (the question's own)
    first, or (``last``) in its last retrieval only; each once."""
    rest = beam.retrieved if others == ShortAnswerPassages.PATH else beam.passages
    return list(_once([*(d.passage for d in beam.segments), *rest]))


def keep_best(pool: list[Beam], width: int) -> list[Beam]:
    """The ``width`` best beams by cumulative score (the earlier on ties); duplicate answers count once."""
    seen: set[str] = set()
    unique: list[Beam] = []
    for i in S.rank([b.score for b in pool], len(pool)):
        key = _norm(pool[i].text)
        if key in seen:
            continue
        seen.add(key)
        unique.append(pool[i])
    return unique[:width]


@register
class SelfRagSegment(Method):
    name = "self_rag_segment"
    description = (
        "Segment-level Self-RAG: per-sentence retrieve yes/no/continue, one critiqued candidate "
        "per passage, beam search over partial answers."
    )
    type = ArchitectureType.AGENTIC
    config_section = "self_rag_segment"
    Config = SelfRagSegmentConfig
    # Adaptive retrieval runs per segment here (yes / no / continue).
    builtin_augmentations = {"retrieval": "adaptive"}

    async def _answer(self, question: Question, run: Run) -> Outcome:
        cfg: SelfRagSegmentConfig = self.config
        critic = Critic(self.llm, cfg.critic, segment_tokens=cfg.segment_tokens)
        weights = cfg.weights.weights()
        choice = critic.choice
        run.note(
            "critic",
            thought="Choose where critique probabilities come from.",
            observation=f"critique_source={choice.source} ({choice.reason})",
            details={**critic.describe(), "beam_width": cfg.beam_width, "max_segments": cfg.max_segments},
        )
        beams = [Beam()]
        for seg in range(1, cfg.max_segments + 1):
            active = [b for b in beams if not b.final]
            if not active:
                break
            forks = [run.fork() for _ in active]
            grown = await critic.gather(
                [self._expand(fork, critic, question.text, beam, seg, weights) for fork, beam in zip(forks, active, strict=True)]
            )
            run.join(*forks)
            pool = [b for b in beams if b.final] + [b for group in grown for b in group]
            kept = keep_best(pool, cfg.beam_width)
            run.note(
                "beam",
                thought=(
                    f"Segment {seg}: keep the best {cfg.beam_width} of {len(pool)} partial answers "
                    "by cumulative score."
                ),
                observation="kept " + ", ".join(f"{b.id} ({b.score:.3f}{', final' if b.final else ''})" for b in kept),
                details={
                    "segment": seg,
                    "pool": [b.summary() for b in pool],
                    "kept": [b.id for b in kept],
                },
            )
            beams = kept
        best = beams[0]
        answer, dropped = self._final_text(best, cfg.drop_unsupported)
        written = answer
        if cfg.short_answer and answer.strip():
            answer = await self._short_answer(run, question, answer, evidence(best, cfg.short_answer_passages))
        candidates = [
            as_candidate(d, segment_score(d, weights), segment=i + 1, decision=best.decisions[i], dropped=i in dropped)
            for i, d in enumerate(best.segments)
        ]
        return Outcome(
            answer=answer,
            retrieval_needed=any(d in ("yes", "continue") for d in best.decisions),
            candidates=candidates,
            details={
                **choice.as_dict(),
                "beam_width": cfg.beam_width,
                "best_beam": best.id,
                "score": round(best.score, 4),
                "segments": len(best.segments),
                "decisions": list(best.decisions),
                "final": best.final,
                "beams": [b.summary() for b in beams],
                "dropped_segments": [i + 1 for i in dropped],
                "segments_text": written,
            },
        )

    async def _short_answer(self, run: Run, question: Question, written: str, docs: list[Document]) -> str:
        """The short answer over the best beam's passages ``docs`` (or, per ``short_answer_reads`` or
        with no passages, over its segments ``written``); ``written`` when the reply has none."""
        cfg: SelfRagSegmentConfig = self.config
        if cfg.short_answer_reads == ShortAnswerReads.PASSAGES and docs:
            step, _, answer = await joint_answer(
                run, question, docs, cfg.max_context_tokens, name="the best beam's passages",
                facts_first=cfg.facts_first, action="short_answer",
            )
            short = read_short(question, answer)
            step.details["final"] = short
        else:
            step, short = await answer_from_notes(
                run, question, written, action="short_answer",
                thought="Write the short answer the question asks for from the segments written.",
            )
        reason = "no answer" if short is None else malformed(short, question.text)
        if reason:
            step.observation = f"{reason} in the reply; the answer is the segments written"
            return written
        step.observation = f"short answer: {shorten(short, 80)}"
        return short

    async def _expand(
        self, run: Run, critic: Critic, question: str, beam: Beam, seg: int, weights: S.Weights
    ) -> list[Beam]:
        """Decide retrieval for the next segment of ``beam``, write one candidate per passage, score them."""
        cfg: SelfRagSegmentConfig = self.config
        so_far = beam.text
        task = Task(question, answer_so_far=so_far, segment=True)
        choice = await adaptive_retrieval(
            critic, run, task, mode=cfg.adaptive.mode, threshold=cfg.adaptive.threshold,
            have_passages=bool(beam.passages),
        )
        passages: tuple[Document, ...] = ()
        known = None
        if choice.decision == "yes":
            query = f"{question} {so_far}".strip()
            result = await run.retrieve(query, cfg.top_k, thought=f"Segment {seg}: retrieve for the question and the answer so far.")
            passages = tuple(result.documents)
            known = await known_relevance(critic, run, question, result)
        elif choice.decision == "continue":
            passages = beam.passages
        retrieved = _once([*beam.retrieved, *passages])
        slots: list[Document | None] = list(passages) or [None]
        drafts = await write_drafts(critic, run, task, slots, known=known)
        out = []
        rows = []
        for i, draft in enumerate(drafts):
            breakdown = segment_score(draft, weights)
            child_id = f"{'' if beam.id == 'root' else beam.id + '.'}{i + 1}"
            stalled = _no_progress(draft.text, so_far)
            if stalled:
                # An empty or repeated segment adds nothing: the beam ends as it was.
                child = Beam(child_id, beam.segments, beam.scores, beam.decisions, passages, retrieved, final=True)
            else:
                child = Beam(
                    id=child_id,
                    segments=(*beam.segments, draft),
                    scores=(*beam.scores, breakdown.total),
                    decisions=(*beam.decisions, choice.decision),
                    passages=passages,
                    retrieved=retrieved,
                    final=draft.final,
                )
            out.append(child)
            row = {
                "beam": child.id,
                "passage": draft.passage.id if draft.passage else "(none)",
                "segment": shorten(draft.text, 80),
                **breakdown.as_dict(),
                "final": child.final,
                "cumulative": round(child.score, 4),
            }
            if stalled:
                row["stalled"] = stalled
            rows.append(row)
        run.note(
            "candidates",
            thought=f"Segment {seg}, beam {beam.id}: decision {choice.decision}; score the candidates.",
            observation=f"{len(out)} candidates; best segment score "
            f"{max(r['score'] for r in rows):.3f}",
            details={"segment": seg, "beam": beam.id, "decision": choice.decision, "candidates": rows},
        )
        return out

    @staticmethod
    def _final_text(beam: Beam, drop_unsupported: bool) -> tuple[str, list[int]]:
        if not drop_unsupported:
            return beam.text, []
        dropped = [i for i, d in enumerate(beam.segments) if d.passage is not None and d.label("support") == "no support"]
        kept = [d.text.strip() for i, d in enumerate(beam.segments) if i not in dropped and d.text.strip()]
        if not kept:  # nothing supported: keep the answer rather than return nothing
            return beam.text, []
        return " ".join(kept), dropped
