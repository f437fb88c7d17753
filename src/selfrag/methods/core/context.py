"""Formatting retrieved passages into prompts.

Passages are untrusted text: each is wrapped in explicit delimiters so a
planted instruction stays inside its own block, and any delimiter-looking text
inside a passage is neutralised, as are critique tags and reflection tokens
(``[IsRel]``, ``[Relevant]``: see ``selfrag.reflection.tokens.neutralize``), so
a model that quotes a passage cannot quote a verdict into its reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...llm import streaming
from ...llm.base import Message, chat
from ...prompts import load_prompt, render
from ...reflection.tokens import neutralize
from ...types import Document, Question
from .answer_format import answer_system
from .trace import Run, StepRecord

OPEN, CLOSE = "<document", "</document>"


def _neutralise(text: str) -> str:
    """Passage text with document tags of any case or spacing (``</DOCUMENT >``) and markers defanged."""
    return neutralize(text)


def format_passage(doc: Document, index: int | None = None, text: str | None = None) -> str:
    label = f' index="{index}"' if index is not None else ""
    title = _neutralise(doc.title).replace('"', "'")
    body = _neutralise(text if text is not None else doc.text)
    return f'{OPEN}{label} title="{title}">\n{body}\n{CLOSE}'


def build_context(
    docs: Sequence[Document],
    max_tokens: int,
    count_tokens: Callable[[str], int],
) -> tuple[str, list[Document]]:
    """Join passages until ``max_tokens`` (as the model counts them) is reached.

    Whole passages are kept while they fit; the first passage that does not fit
    is cut to the remaining budget (so at least part of the top passage is
    always present). Returns the context and the documents it includes.
    """
    blocks: list[str] = []
    used: list[Document] = []
    budget = max_tokens
    for i, doc in enumerate(docs, start=1):
        block = format_passage(doc, i)
        cost = count_tokens(block) + 1
        if cost <= budget:
            blocks.append(block)
            used.append(doc)
            budget -= cost
            continue
        overhead = count_tokens(format_passage(doc, i, text="")) + 1
        if budget - overhead > 8:
            blocks.append(format_passage(doc, i, text=truncate_to_tokens(doc.text, budget - overhead, count_tokens)))
            used.append(doc)
        break
    return "\n\n".join(blocks), used


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The longest word-boundary prefix of ``text`` within ``max_tokens``."""
    if count_tokens(text) <= max_tokens:
        return text
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # binary search on the number of words kept
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


async def answer_over(
    run: Run, question: Question, docs: Sequence[Document], max_tokens: int, *, thought: str,
    template: str = "answer_with_context", action: str = "generate", formatted: bool = True,
    reply_tokens: int | None = None, logprobs: bool = False, final: bool = False,
) -> tuple[StepRecord, str, list[Document]]:
    """``vanilla_rag``'s answer call over ``docs`` joined up to ``max_tokens``.

    ``template`` (with ``{context}`` and ``{question}``) replaces the prompt;
    ``formatted=False`` leaves out the answer-format system message, for a
    prompt that asks for its own reply shape; ``reply_tokens`` caps the reply
    below the method's ``max_tokens``; ``logprobs`` asks for each reply token's
    log-probability (where the backend gives them: a confidence reads them); ``final`` marks the call as
    the one whose reply is the method's answer, so its tokens are streamed to whoever listens
    (:mod:`selfrag.llm.streaming`). Returns the step (its text is the raw
    answer; ``details.passages_in_context`` lists the ids shown), the context
    shown and the documents it includes.
    """
    context, used = build_context(docs, max_tokens, run.llm.count_tokens)
    prompt = answer_prompt(question, template=template, formatted=formatted)(question.text, context)
    cap = {} if reply_tokens is None else {"max_tokens": min(reply_tokens, int(run.params.get("max_tokens", reply_tokens)))}
    if logprobs and run.llm.supports_logprobs:
        cap["top_logprobs"] = 1
    if final:
        with streaming.answer_call():
            step = await run.generate(prompt, action=action, thought=thought, action_input=question.text, **cap)
            streaming.finish(step.text)
    else:
        step = await run.generate(prompt, action=action, thought=thought, action_input=question.text, **cap)
    step.details["passages_in_context"] = [d.id for d in used]
    return step, context, used


def answer_prompt(
    question: Question, *, template: str = "answer_with_context", formatted: bool = True,
) -> Callable[[str, str], tuple[Message, ...]]:
    """``answer_over``'s prompt as a function of (question text, context), for readings that vary either."""
    body = load_prompt(template)
    system = answer_system(question) if formatted else None
    return lambda text, context: chat(system, render(body, question=text, context=context))
