"""Streaming the answer's tokens while the model writes them.

Two sides meet here, through context variables (so concurrent questions in
one server never hear each other's tokens):

* whoever shows the answer (``selfrag ask``, ``selfrag serve``) wraps the
  method's work in :func:`listening` with a callback that takes text pieces;
* a method wraps the one model call whose reply is its final answer in
  :func:`answer_call` (``vanilla_rag``'s answer; the joint answer of
  ``self_rag``, which is the final answer whenever it has one).

A backend that can decode incrementally (the in-process llama.cpp one) asks
:func:`token_sink` during such a call and hands it each new piece of text as
it is decoded; other backends (and cached calls) return the whole reply,
which :func:`finish` then sends in one piece. What is sent is the reply as
the answer reads it: a leading "Answer:" label is dropped, and the stream
stops where the answer ends (a new paragraph, a reflection label). The final
answer, once shaped (:mod:`selfrag.methods.core.answer_shape`) and chosen,
arrives with the response, and a consumer shows it when it differs from what
was streamed (the joint had no usable answer, or "Yes, ..." became "yes").

A callback may be called from a worker thread (llama.cpp decodes in one);
:func:`listening` given a running event loop moves each call onto it.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class _Listener:
    emit: Callable[[str], None]
    loop: asyncio.AbstractEventLoop | None
    streamed: list[str] = field(default_factory=list)

    def send(self, piece: str) -> None:
        if not piece:
            return
        self.streamed.append(piece)
        if self.loop is None:
            self.emit(piece)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.emit(piece)
        else:
            self.loop.call_soon_threadsafe(self.emit, piece)


# Where a reply stops being the answer: a new paragraph, a reflection label, a critique line.
CUTS = ("\n\n", "\n[", "[IsRel", "[IsSup", "[IsUse", "[Utility", "[Retriev", "[No Retrieval", "[Relevant",
        "[Irrelevant", "[Fully", "[Partially", "[No support", "\nRelevance:", "\nSupport:")
_HOLD = max(len(c) for c in CUTS) - 1
_PREFIX = re.compile(r"^\s*(?:final answer|answer|a)\s*[:\-]\s*", re.IGNORECASE)
_LABELS = ("final answer", "answer")  # a reply starting like one of these is held until it is clear


@dataclass
class _Call:
    """One answer call: its listener, and the reply so far. What is sent is the reply as the answer
    will read: without a leading "Answer:" label, and nothing from the first cut (:data:`CUTS`) on."""

    listener: _Listener
    reply: str = ""
    sent: int = 0  # characters of the shaped reply sent so far
    stopped: bool = False

    def _shaped(self, closing: bool) -> str:
        head = self.reply.lstrip().lower()
        if not closing and any(label.startswith(head) for label in _LABELS):
            return ""  # it may still turn out to be an "Answer:" label
        text = _PREFIX.sub("", self.reply, count=1).lstrip()
        cut = min((i for c in CUTS if (i := text.find(c)) >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            return text[:cut].rstrip()
        if closing:
            return text
        # Hold back from a newline or "[" near the end: it may open a cut.
        hold = max(text.rfind("\n"), text.rfind("["))
        return text[:hold] if hold >= 0 and len(text) - hold <= _HOLD else text

    def send(self, piece: str) -> None:
        if self.stopped:
            return
        self.reply += piece
        self._flush(closing=False)

    def _flush(self, closing: bool) -> None:
        shaped = self._shaped(closing)
        if len(shaped) > self.sent:
            self.listener.send(shaped[self.sent:])
            self.sent = len(shaped)

    def close(self, text: str) -> None:
        """The call's whole reply is ``text``: send what is left of it."""
        if not self.stopped:
            self.reply = text if text.startswith(self.reply) else self.reply
            self._flush(closing=True)


_listener: contextvars.ContextVar[_Listener | None] = contextvars.ContextVar("selfrag_answer_listener", default=None)
# The call now running writes the final answer: its tokens go to the listener.
_answering: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("selfrag_answer_call", default=None)


@contextmanager
def listening(emit: Callable[[str], None], loop: asyncio.AbstractEventLoop | None = None) -> Iterator[None]:
    """Send the answer's text pieces to ``emit`` while the block runs (on ``loop``, when given)."""
    token = _listener.set(_Listener(emit, loop))
    try:
        yield
    finally:
        _listener.reset(token)


@contextmanager
def answer_call() -> Iterator[None]:
    """Mark the model call made inside the block as the one that writes the final answer."""
    listener = _listener.get()
    token = _answering.set(None if listener is None else _Call(listener))
    try:
        yield
    finally:
        _answering.reset(token)


def token_sink() -> Callable[[str], None] | None:
    """For a backend: where to send each decoded piece of the current call (None: nobody listens)."""
    call = _answering.get()
    return call.send if call is not None else None


def finish(text: str) -> None:
    """After an answer call: send whatever of ``text`` the backend did not stream (all of it, for a
    backend that does not stream or a cached reply)."""
    call = _answering.get()
    if call is not None:
        call.close(text)


def streaming() -> bool:
    """Whether someone listens for the answer's tokens (methods may skip work nobody sees)."""
    return _listener.get() is not None
