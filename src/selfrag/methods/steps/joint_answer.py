"""The answer of a joint candidate: one answer written from several passages together.

``self_rag`` (every critique mode) and ``self_rag_critic`` write their joint
candidate the same way, ``self_corrective`` its answer over the documents it
chose, and ``self_rag_segment`` its short answer over the best beam's passages
(without a calibrated reader):

1. with ``facts_first`` (``yes_no``: for yes/no questions; ``all``: for every
   question), the facts-then-answer call of :mod:`.facts_first`;
2. with a :class:`~.choice_reading.ChoiceReader` (``answer_reading:
   calibrated``), a choice question's answer read from calibrated label
   probabilities (after the facts, over the notes; otherwise over the
   passages);
3. otherwise, or when those give no usable answer, ``vanilla_rag``'s answer
   prompt over the passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BeforeValidator

from ...types import Document, Question
from ...validation import off_when_false
from ..core.base import MethodConfig
from ..core.context import answer_over
from ..core.text import clean_answer
from ..core.trace import Run, StepRecord
from .choice_reading import AnswerReading, ChoiceReader, read_over_passages
from .facts_first import FactsFirst, answer_after_facts


class JointAnswerConfig(MethodConfig):
    """The settings of a method that writes a joint answer, with the same defaults in each.

    ``facts_first``: the facts first, then "Answer: ...", for yes/no questions only
    (``yes_no``: a small model asked for the bare word tends to say "yes" whatever the
    passages say), for every question (``all``) or never (``off``: ``vanilla_rag``'s answer
    prompt). ``answer_reading``: a choice answer (yes/no,
    yes/no/maybe, an option letter) as written (``text``) or read from the label
    probabilities with the prompt's content-free bias divided out (``calibrated``,
    :mod:`.choice_reading`; after the facts for a facts-first answer; needs
    log-probabilities, else the text is read).
    """

    facts_first: Annotated[FactsFirst, BeforeValidator(off_when_false)] = FactsFirst.YES_NO
    answer_reading: AnswerReading = AnswerReading.TEXT


def wants_facts(facts_first: str, question: Question) -> bool:
    return FactsFirst(facts_first).applies(question)


async def joint_answer(
    run: Run, question: Question, docs: Sequence[Document], max_tokens: int, *, name: str,
    facts_first: str = "off", reader: ChoiceReader | None = None, action: str = "generate",
    logprobs: bool = False, final: bool = True,
) -> tuple[StepRecord, str, str]:
    """The step that gave the answer, the context shown and the answer; ``name`` names the passages in
    thoughts, ``action`` the plain answer call's step. ``final``: the plain answer call writes the method's
    answer when it has one (self_rag's joint, self_rag_segment's short answer), so its tokens are streamed
    (:mod:`selfrag.llm.streaming`); a draft that is one of several is not."""
    if wants_facts(facts_first, question):
        step, context, final = await answer_after_facts(
            run, question, docs, max_tokens,
            thought=f"Write the facts {name} give that lead to the answer, then the answer.", reader=reader,
        )
        if final is not None:
            return step, context, final
    if reader is not None:
        read, reading, context, _ = await read_over_passages(
            run, reader, question, docs, max_tokens,
            thought=f"Read the answer from {name} from the label probabilities.",
        )
        if read is not None and reading.answer is not None:
            return read, context, reading.answer
    gen, context, _ = await answer_over(run, question, docs, max_tokens, thought=f"Answer from {name} together.",
                                        action=action, logprobs=logprobs, final=final)
    return gen, context, clean_answer(gen.text)
