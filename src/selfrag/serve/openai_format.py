"""The OpenAI chat-completions format: reading a request, writing a completion and its chunks.

``model`` names the method; the last user message is the question, and the
messages before it are the conversation it follows (a follow-up is rewritten
to stand on its own before retrieving: :mod:`selfrag.methods.steps.followup`); sampling
settings (``temperature``, ``max_tokens`` ...) are accepted and left to the
method's configuration. The reply's message carries the answer as
``content`` plus ``citations`` (the passages the method cites); the whole
selfrag response (``selfrag ask --json`` with the trace) rides along as
``selfrag``: on the completion, or on the last chunk of a stream.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from ..methods.steps.followup import Turn
from .errors import ApiError
from .limits import check_question, flag


@dataclass(frozen=True)
class ChatRequest:
    question: str
    model: Any
    stream: bool
    include_usage: bool
    history: tuple[Turn, ...] = ()  # the user and assistant turns before the question


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    raise ApiError(400, "a message's 'content' must be a string or a list of text parts", param="messages")


def parse_chat(body: dict[str, Any], max_chars: int) -> ChatRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list of {role, content} objects", param="messages")
    if not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "every message must be an object with 'role' and 'content'", param="messages")
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        raise ApiError(400, "no message has role 'user'; the last user message is the question", param="messages")
    question = check_question(_text_of(messages[users[-1]].get("content")), max_chars, param="messages")
    history = tuple(Turn(m["role"], text) for m in messages[: users[-1]]
                    if m.get("role") in ("user", "assistant") and (text := _text_of(m.get("content"))).strip())
    n = body.get("n")
    if n not in (None, 1):
        raise ApiError(400, "only one choice per request (n=1)", param="n")
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return ChatRequest(question, body.get("model"), flag(body, "stream"), include_usage, history)


def new_id() -> tuple[str, int]:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())


def citations(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": c.get("id"), "title": c.get("title")} for c in data.get("citations") or []]


def usage(data: dict[str, Any]) -> dict[str, int]:
    prompt, completion = int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def without_documents_note(data: dict[str, Any]) -> str:
    """The line that opens the reply when the answer used no document ("" when it used some)."""
    why = data.get("without_documents")
    return f"(Answered without your documents: {why}.)\n\n" if why else ""


def content(data: dict[str, Any]) -> str:
    """The reply's text: the answer, opened by a plain note when it used no document."""
    return without_documents_note(data) + str(data["answer"])


def rest_of_content(data: dict[str, Any], streamed: str) -> str:
    """What a stream still has to send once the answer is known: all of it when nothing was streamed;
    nothing when the streamed tokens were the answer; else the final answer, said as such (the streamed
    draft had no usable answer, or the answer was shaped, e.g. to "yes")."""
    if not streamed:
        return content(data)
    if " ".join(streamed.split()) == " ".join(str(data["answer"]).split()):
        return ""
    return f"\n\n(final answer: {data['answer']})"


def completion(data: dict[str, Any], *, cid: str, created: int, model: str) -> dict[str, Any]:
    """A ``chat.completion`` object for one answer (``data``: the /v1/ask object)."""
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content(data), "citations": citations(data)},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage(data),
        "selfrag": data,
    }


def chunk(
    *, cid: str, created: int, model: str, delta: dict[str, Any] | None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``delta=None`` gives the usage-only chunk (no choices)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices, **extra}
