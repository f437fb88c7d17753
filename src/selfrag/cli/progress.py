"""What ``selfrag ask`` and ``selfrag chat`` show while a method works.

* **Stages** on stderr (retrieving, deciding, judging passage n, writing the
  answer, critiquing, reading the confidence), each as it starts: on a
  terminal as one line rewritten in place, elsewhere one line per stage when
  ``SELFRAG_PROGRESS=1`` asks for it (so pipes and scripts get clean output).
* **Each model call**, with ``-v``: its step, tokens (prompt + reply), time
  and whether it came from the cache, as an INFO log line.
* **The answer's tokens** on stdout as the model writes them, for a method
  whose answer is one model call known in advance (:mod:`selfrag.llm.streaming`):
  on a terminal, or with ``SELFRAG_STREAM=1``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ..methods.core.stages import STAGES

log = logging.getLogger("selfrag.calls")


def _wanted(env: str, stream: TextIO) -> bool:
    value = os.environ.get(env)
    if value is not None:
        return value.strip().lower() not in ("", "0", "off", "false", "no")
    return stream.isatty()


class Progress:
    """Shows stages on ``err``, logs model calls, and streams the answer's tokens to ``out``."""

    def __init__(self, out: TextIO, err: TextIO, *, stream_answer: bool = True) -> None:
        self.out, self.err = out, err
        self.show = _wanted("SELFRAG_PROGRESS", err)
        self.in_place = self.show and err.isatty()
        self.stream_answer = stream_answer and _wanted("SELFRAG_STREAM", out)
        self.started = time.perf_counter()
        self.calls = 0
        self.judged = 0
        self.shown: str | None = None
        self.streamed = ""

    def stage(self, text: str) -> None:
        """Show ``text`` as the current stage (nothing once the answer is being streamed)."""
        if not self.show or self.streamed or text == self.shown:
            return
        self.shown = text
        line = f"selfrag: {text}… ({time.perf_counter() - self.started:.1f} s)"
        if self.in_place:
            self.err.write(f"\r\033[K{line}")
        else:
            self.err.write(line + "\n")
        self.err.flush()

    def clear(self) -> None:
        if self.in_place and self.shown is not None:
            self.err.write("\r\033[K")
            self.err.flush()
        self.shown = None

    def on_step(self, event: str, action: str, payload) -> None:
        if event == "start":
            label = STAGES.get(action, action.replace("_", " "))
            if label == "judging passage":
                self.judged += 1
                label = f"judging passage {self.judged}"
            self.stage(label)
        elif event == "end" and getattr(payload, "gen", None) is not None:
            gen = payload.gen
            self.calls += 1
            log.info("call %d: %s · %d+%d tokens · %.0f ms%s", self.calls, action, gen.prompt_tokens,
                     gen.completion_tokens, gen.latency_ms, " · cached" if gen.cached else "")

    def on_token(self, piece: str) -> None:
        if not self.streamed:
            self.clear()
        self.streamed += piece
        self.out.write(piece)
        self.out.flush()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Report the steps (and stream the answer) of whatever runs inside the block."""
        from ..llm import streaming
        from ..methods.core import trace

        token = trace.step_listener.set(self.on_step)
        try:
            if self.stream_answer:
                with streaming.listening(self.on_token):
                    yield
            else:
                yield
        finally:
            trace.step_listener.reset(token)
            self.clear()

    def end_stream(self, answer: str) -> bool:
        """After the answer: end the streamed line; True when what was streamed was the answer shown.
        When it was not (the joint had no usable answer, or the answer was shaped), say the final one."""
        if not self.streamed:
            return False
        self.out.write("\n")
        if " ".join(self.streamed.split()) == " ".join(answer.split()):
            return True
        self.out.write(f"(final answer: {answer})\n")
        return True


def progress_for(stream_answer: bool = True) -> Progress:
    return Progress(sys.stdout, sys.stderr, stream_answer=stream_answer)


# Commands that answer questions: they say they are starting before anything heavy is imported.
ANSWERING = ("ask", "chat")


def announce_start(argv: list[str]) -> None:
    """The first progress line, printed before the commands (and the libraries they need) load."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in ANSWERING and "--json" not in argv and _wanted("SELFRAG_PROGRESS", sys.stderr):
        line = "selfrag: starting…"
        sys.stderr.write(f"\r\033[K{line}" if sys.stderr.isatty() else line + "\n")
        sys.stderr.flush()
