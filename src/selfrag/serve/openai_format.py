"""The OpenAI chat-completions format: reading a request, writing a completion and its chunks.

``model`` names the method; the last user message is the question, and the
messages before it are the conversation it follows (a follow-up is rewritten
to stand on its own before retrieving: :mod:`selfrag.methods.steps.followup`); sampling
settings (``temperature``, ``max_tokens`` ...) are accepted and left to the
method's configuration. The reply's ``content`` is what ``selfrag ask`` prints
for the answer (:func:`selfrag.reflection.answer_text.answer_lines`): the note
that no document was used, the answer with its ``[n]`` markers, the abstention
and the confidence; ``"selfrag": {"plain": true}`` in the request (or the
server's ``--plain-replies``) asks for the bare answer. The message carries
``citations`` (``n``, ``id``, ``title``: the passage each marker names), and
the whole selfrag response (``selfrag ask --json`` with the trace) rides along
as ``selfrag``: on the completion, or on the last chunk of a stream.
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
    plain: bool | None = None  # the bare answer, without notes and markers; None: the server's setting


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
    return ChatRequest(question, body.get("model"), flag(body, "stream"), include_usage, history, _plain(body))


def _plain(body: dict[str, Any]) -> bool | None:
    """``"selfrag": {"plain": true | false}``: whether the request wants the bare answer (None: not said)."""
    extra = body.get("selfrag")
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise ApiError(400, "'selfrag' must be an object, e.g. {\"plain\": true}", param="selfrag")
    unknown = sorted(set(extra) - {"plain"})
    if unknown:
        raise ApiError(400, f"'selfrag' takes only 'plain', not {', '.join(map(repr, unknown))}", param="selfrag")
    plain = extra.get("plain")
    if plain is not None and not isinstance(plain, bool):
        raise ApiError(400, "'selfrag.plain' must be true or false", param="selfrag.plain")
    return plain


def new_id() -> tuple[str, int]:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())


def citations(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The passages the markers name: ``n`` (the marker's number), ``id`` and ``title``."""
    return [{"n": c.get("n", i), "id": c.get("id"), "title": c.get("title")}
            for i, c in enumerate(data.get("citations") or [], start=1)]


def usage(data: dict[str, Any]) -> dict[str, int]:
    prompt, completion = int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def content(data: dict[str, Any], *, plain: bool) -> str:
    """The reply's text: what ``selfrag ask`` prints for the answer (``data["reply"]``), or the bare answer."""
    return str(data["answer"]) if plain else str(data["reply"])


def rest_of_content(data: dict[str, Any], streamed: str, notes: list[str], *, plain: bool) -> str:
    """What a stream still has to send once the answer is known, as ``selfrag ask`` prints it after a
    streamed answer: all of the reply when nothing was streamed; else the final answer when it is not
    what was streamed (the streamed draft had no usable answer, or the answer was shaped, e.g. to
    "yes"), then ``notes`` (:func:`~selfrag.reflection.answer_text.answer_lines` with the answer
    shown), each on a line of its own."""
    if not streamed:
        return content(data, plain=plain)
    lines = [] if " ".join(streamed.split()) == " ".join(str(data["answer"]).split()) else [
        f"(final answer: {data['answer']})"]
    if not plain:
        lines += notes
    return "".join("\n" + line for line in lines)


def completion(data: dict[str, Any], *, cid: str, created: int, model: str, plain: bool = False) -> dict[str, Any]:
    """A ``chat.completion`` object for one answer (``data``: the /v1/ask object)."""
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content(data, plain=plain), "citations": citations(data)},
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
