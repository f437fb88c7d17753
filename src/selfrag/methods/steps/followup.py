"""Turning a follow-up question into one that stands on its own, before anything is retrieved.

In a conversation, "and when did he die?" after a question about William
Herschel retrieves nothing useful: the retriever sees "he", not Herschel. So
a follow-up (a question with earlier turns before it) is first rewritten by
the model, with the last :data:`MAX_TURNS` turns shown, into a standalone
question (``prompts/followup_standalone.txt``, after three worked examples given as
earlier turns); the method then answers that.
The rewrite is one short call, recorded as the first step of the answer's
trace (:func:`with_rewrite`); a reply that is empty, not a question-sized
line, or an echo of the prompt leaves the question as asked.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...llm.base import Message
from ...prompts import load_prompt, render
from ...types import Generation, RAGResponse, ReasoningStep

MAX_TURNS = 6
MAX_TURN_CHARS = 600
REWRITE_TOKENS = 64
SYSTEM = "You rewrite follow-up questions so that they stand on their own. You never answer them."
_PREFIX = re.compile(r"^\s*(?:rewritten question|standalone question|question|follow-up question)\s*:\s*",
                     re.IGNORECASE)


@dataclass(frozen=True)
class Turn:
    role: str  # "user" or "assistant"
    content: str


@dataclass(frozen=True)
class Rewrite:
    asked: str
    standalone: str
    gen: Generation | None  # None: no call was made (no earlier turn)

    @property
    def changed(self) -> bool:
        return self.standalone != self.asked


def conversation_text(turns: Sequence[Turn]) -> str:
    lines = []
    for turn in list(turns)[-MAX_TURNS:]:
        text = " ".join(turn.content.split())
        if len(text) > MAX_TURN_CHARS:
            text = text[: MAX_TURN_CHARS - 3] + "..."
        lines.append(f"{'User' if turn.role == 'user' else 'Assistant'}: {text}")
    return "\n".join(lines)


def clean_rewrite(text: str, asked: str) -> str:
    """The rewritten question from a reply, or ``asked`` when the reply holds none."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return asked
    line = _PREFIX.sub("", lines[0]).strip().strip('"“”\'').strip()
    if not line or len(line) > 3 * len(asked) + 200 or line.lower().startswith(("user:", "assistant:")):
        return asked
    return line


# Worked examples, shown to the model as earlier turns of its own: a small model copies a pattern it
# has seen answered far more reliably than it follows a description.
EXAMPLES = (
    ((Turn("user", "Who painted the Mona Lisa?"), Turn("assistant", "Leonardo da Vinci")),
     "and where was he born?", "Where was Leonardo da Vinci born?"),
    ((Turn("user", "Which river flows through Vienna?"), Turn("assistant", "The Danube")),
     "how long is it?", "How long is the Danube?"),
    ((Turn("user", "Who wrote Hamlet?"), Turn("assistant", "William Shakespeare")),
     "What is the capital of Peru?", "What is the capital of Peru?"),
)


def rewrite_prompt(turns: Sequence[Turn], question: str) -> list[Message]:
    """The rewrite call's messages: the instructions, the worked examples as earlier turns, the question."""
    template = load_prompt("followup_standalone")
    messages = [Message("system", SYSTEM)]
    for example_turns, asked, standalone in EXAMPLES:
        messages += [Message("user", render(template, conversation=conversation_text(example_turns), question=asked)),
                     Message("assistant", standalone)]
    messages.append(Message("user", render(template, conversation=conversation_text(turns), question=question)))
    return messages


async def standalone_question(llm: Any, turns: Sequence[Turn], question: str, *, max_tokens: int = REWRITE_TOKENS) -> Rewrite:
    """``question`` rewritten to stand on its own given the earlier ``turns`` (no call without any)."""
    if not any(t.role == "user" for t in turns):
        return Rewrite(question, question, None)
    gen = await llm.generate(rewrite_prompt(turns, question), max_tokens=max_tokens, temperature=0.0)
    return Rewrite(question, clean_rewrite(gen.text, question), gen)


def with_rewrite(response: RAGResponse, rewrite: Rewrite) -> RAGResponse:
    """``response`` with the rewrite as its first trace step, counted in its totals, and
    ``details["followup"]`` saying what was asked and what was answered."""
    if rewrite.gen is None:
        return response
    gen = rewrite.gen
    step = ReasoningStep(
        step_id=1, thought="Rewrite the follow-up so that it stands on its own, before retrieving.",
        action="standalone_question", action_input=rewrite.asked, observation=rewrite.standalone,
        tokens_used=gen.total_tokens, cost_usd=gen.cost_usd, prompt_tokens=gen.prompt_tokens,
        completion_tokens=gen.completion_tokens, latency_ms=gen.latency_ms, llm_calls=1, cached=gen.cached,
        details={"raw_output": gen.text, "changed": rewrite.changed},
    )
    steps = (step, *(dataclasses.replace(s, step_id=s.step_id + 1) for s in response.reasoning_chain))
    details = {**response.details, "followup": {"asked": rewrite.asked, "standalone": rewrite.standalone}}
    return dataclasses.replace(
        response, reasoning_chain=steps, details=details,
        num_llm_calls=response.num_llm_calls + 1, total_tokens=response.total_tokens + gen.total_tokens,
        prompt_tokens=response.prompt_tokens + gen.prompt_tokens,
        completion_tokens=response.completion_tokens + gen.completion_tokens,
        total_cost_usd=response.total_cost_usd + gen.cost_usd, latency_ms=response.latency_ms + gen.latency_ms,
    )
