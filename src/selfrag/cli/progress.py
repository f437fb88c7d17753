"""What ``selfrag ask`` and ``selfrag chat`` show while a method works.

* **Stages** on stderr (retrieving, deciding, judging passage n, writing the
  answer, critiquing, reading the confidence), each as it starts: on a
  terminal as one line rewritten in place, whose elapsed time keeps moving
  while the stage runs (a model call can take a minute), elsewhere one line
  per stage when ``SELFRAG_PROGRESS=1`` asks for it (so pipes and scripts get
  clean output, never a line per tick).
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
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ..methods.core.stages import STAGES

log = logging.getLogger("selfrag.calls")
TICK_S = 0.5  # how often a terminal's stage line is redrawn with the time elapsed


class TerminalLine:
    """The one progress line on a terminal's stderr, written in place and without a newline.

    Anything else printed on the terminal (an error, a warning, a note on
    stdout) first erases it through :meth:`clear`, so no progress text is
    left in front of what follows. One lock orders the writers: the command's
    thread and the ticker that redraws the elapsed time.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.stream: TextIO | None = None  # the stream the line is on, while one is shown
        self.finished = False

    def show(self, stream: TextIO, text: str) -> None:
        with self.lock:
            if self.finished:
                return
            stream.write(f"\r\033[K{text}")
            stream.flush()
            self.stream = stream

    def finish(self) -> None:
        """Erase the line for good: the command is ending (with an error, say); nothing redraws it."""
        with self.lock:
            self.clear()
            self.finished = True

    def clear(self) -> None:
        with self.lock:
            if self.stream is not None:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.stream = None


LINE = TerminalLine()


class _ClearsTheLine(logging.Filter):
    """A log line is printed on a line of its own: the progress line is erased first."""

    def filter(self, record: logging.LogRecord) -> bool:
        LINE.clear()
        return True


def logging_clears_the_line(handler: logging.Handler) -> None:
    handler.addFilter(_ClearsTheLine())


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
        self._ticker: threading.Thread | None = None

    def _line(self) -> str:
        return f"selfrag: {self.shown}… ({time.perf_counter() - self.started:.1f} s)"

    def stage(self, text: str) -> None:
        """Show ``text`` as the current stage (nothing once the answer is being streamed)."""
        with LINE.lock:
            if not self.show or self.streamed or text == self.shown:
                return
            self.shown = text
            if not self.in_place:
                self.err.write(self._line() + "\n")
                self.err.flush()
                return
            LINE.show(self.err, self._line())
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, name="selfrag-progress", daemon=True)
                self._ticker.start()

    def _tick(self) -> None:
        """Redraw the stage line with the time elapsed until no stage is shown (a terminal only)."""
        while True:
            time.sleep(TICK_S)
            with LINE.lock:
                if self.shown is None or self.streamed:
                    self._ticker = None
                    return
                LINE.show(self.err, self._line())

    def clear(self) -> None:
        with LINE.lock:
            if self.in_place and self.shown is not None:
                LINE.clear()
            self.shown = None

    def say(self, text: str) -> None:
        """Print ``text`` on stdout on a line of its own while a stage is shown, which stays shown."""
        with LINE.lock:
            LINE.clear()
            print(text, file=self.out, flush=True)
            if self.in_place and self.shown is not None and not self.streamed:
                LINE.show(self.err, self._line())

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
        with LINE.lock:
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
        if sys.stderr.isatty():
            LINE.show(sys.stderr, line)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
