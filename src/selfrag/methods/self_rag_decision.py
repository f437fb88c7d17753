"""Self-RAG's retrieval decision: one call, read as a probability where the backend allows it.

A small instruction model asked "do you need documents?" answers with a
strong prior that has little to do with the question (Qwen2.5-0.5B said "no"
to 30 of 30 multi-hop questions). Its next-token probabilities still order
the questions: P(yes) is higher for a question about specific people and
events than for "what is 9 times 8?". So where the backend returns
log-probabilities the decision is ``P(yes) / (P(yes) + P(no)) >= threshold``
with a threshold chosen by measurement (see ``benchmarks/quality.py`` and
docs/methods.md); otherwise the written yes/no is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..llm.base import chat
from ..prompts import load_prompt, load_prompt_file, placeholders, render
from ..reflection import score as S
from ..reflection.parse import parse_retrieval_decision
from ..reflection.tokens import LABEL_GROUPS
from ..types import Question
from .trace import Run, shorten

# Used only if the packaged prompts/self_rag.txt is missing.
FALLBACK_DECISION_PROMPT = (
    "Decide whether you need to look up external documents to answer the question "
    "accurately.\n\nQuestion: {question}\n\n"
    'Do you need to retrieve documents? Reply with exactly "yes" or "no".\n'
)
# Probability of "yes" above which the model's decision is "retrieve" (label-probability
# backends only). Chosen on HotpotQA dev questions 300-399 and the written no-documents
# set with both benchmark models: see docs/methods.md, "Calibrating the retrieval decision".
DEFAULT_THRESHOLD = 0.05
TOP_LOGPROBS = 20


def decision_template(path: str | None) -> str:
    """The retrieval-decision template: ``path``, else the packaged file, else the inline fallback."""
    if path:
        template = load_prompt_file(path)
    else:
        try:
            template = load_prompt("self_rag")
        except ConfigError:
            template = FALLBACK_DECISION_PROMPT
    try:
        fields = placeholders(template)
    except ValueError as exc:
        raise ConfigError(
            f"retrieval-decision prompt {path or 'self_rag'}: bad braces ({exc})"
        ) from None
    if fields != {"question"}:
        raise ConfigError(
            f"retrieval-decision prompt {path or 'self_rag'} must use the placeholder {{question}} "
            f"and no other (found {sorted(fields) or 'none'})"
        )
    return template


@dataclass(frozen=True)
class Decision:
    needed: bool
    p_yes: float | None  # None: read from the text
    source: str  # "label_probs" or "text"


async def decide_retrieval(
    run: Run, template: str, question: Question, *, threshold: float, max_tokens: int
) -> Decision:
    """Ask once whether to retrieve; read P(yes) when the backend gives log-probabilities."""
    llm = run.llm
    probs_wanted = bool(llm.supports_logprobs)
    step = await run.generate(
        chat(None, render(template, question=question.text)),
        action="retrieval_decision",
        thought="Decide whether retrieval is needed.",
        action_input=question.text,
        max_tokens=1 if probs_wanted else max_tokens,
        top_logprobs=TOP_LOGPROBS if probs_wanted else 0,
    )
    gen = step.gen
    p_yes = None
    if probs_wanted and gen is not None and gen.logprobs:
        p_yes = S.p_retrieve(S.group_probs(gen.logprobs[0].top, LABEL_GROUPS["retrieve"]))
    if p_yes is not None:
        decision = Decision(p_yes >= threshold, p_yes, "label_probs")
        how = f"P(yes)={p_yes:.3f} {'>=' if decision.needed else '<'} threshold {threshold:g}"
    else:
        decision = Decision(parse_retrieval_decision(step.text), None, "text")
        how = f"model said {shorten(step.text, 60)!r}"
    step.observation = f"retrieval needed: {'yes' if decision.needed else 'no'} ({how})"
    step.details.update(
        retrieval_needed=decision.needed, decision_source=decision.source,
        p_yes=None if p_yes is None else round(p_yes, 4), threshold=threshold,
    )
    return decision
