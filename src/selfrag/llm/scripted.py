"""A deterministic test double that replays scripted responses.

Three modes:

* **list** — responses are returned in call order.
* **dict** — each call is answered with the value of the first key (in the
  script's order) that occurs in the prompt text. A single value answers every
  matching call; a list of values is consumed one item per matching call. Use
  this mode when calls run concurrently, so answers do not depend on scheduling.
* **function** — ``respond(request)`` returns each call's response, for a
  model whose answer depends on more than a key (the request's options, say).

A response is a string, or an object with ``text`` and optionally
``top_logprobs`` (one ``{token: logprob}`` object for the first position, or a
list of them, one per position), ``prompt_tokens``, ``completion_tokens``,
``cost_usd`` and ``finish_reason``; ``{"error": "...", "status": 503}`` makes
the call fail (retryable for 429 and 5xx statuses). A call that scores a given
reply (``forced=``) is answered by an object with ``forced_logprobs``, one
log-probability per scored token (its text is the forced reply, split on
whitespace into that many tokens).

Load one from a JSON file with the spec ``scripted:PATH``; its spec (and so
its cache key) is the file name plus a hash of the file's content, so another
folder's ``replies.json`` or an edited script never replays stale answers. Or
build one in Python::

    llm = ScriptedBackend(["yes", {"text": "Paris", "completion_tokens": 3}])
    llm.enqueue("another answer")
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import BackendError, ConfigError, DataError, ScriptExhaustedError
from ..types import Generation, TokenLogprobs
from ..validation import load_json
from .base import BackendKind, BaseBackend, LLMRequest, approx_token_count
from .streaming import token_sink

_RESPONSE_KEYS = {
    "text",
    "top_logprobs",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "finish_reason",
    "error",
    "status",
    "forced_logprobs",
    "hidden",
}


def _check_response(item: Any, where: str) -> Any:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        unknown = set(item) - _RESPONSE_KEYS
        if unknown:
            raise ConfigError(
                f"scripted response {where} has unknown key(s) {sorted(unknown)}; "
                f"allowed: {sorted(_RESPONSE_KEYS)}"
            )
        if "text" not in item and "error" not in item and "forced_logprobs" not in item:
            raise ConfigError(f"scripted response {where} needs a 'text' (or an 'error') key")
        return dict(item)
    raise ConfigError(
        f"scripted response {where} is a {type(item).__name__}; use a string or an object with 'text'"
    )


class ScriptedBackend(BaseBackend):
    """Replays a script of responses; records every request in ``calls``."""

    provider = "scripted"
    supports_raw_prompt = True
    supports_forced = True
    supports_hidden = True

    def __init__(
        self,
        script: Iterable[Any] | Mapping[str, Any] | None = None,
        *,
        model: str = "scripted",
        supports_logprobs: bool = True,
        supports_json: bool = True,
        name: str = "",
        respond: Callable[[LLMRequest], Any] | None = None,
    ) -> None:
        super().__init__(model)
        if respond is not None and script is not None:
            raise ConfigError("give a scripted backend either a script or a respond function, not both")
        self._respond = respond
        self.supports_logprobs = supports_logprobs
        self.supports_json = supports_json
        self._name = name or model
        self.calls: list[LLMRequest] = []
        self._queue: deque[Any] = deque()
        # key -> (consumed one per call?, responses)
        self._keyed: dict[str, tuple[bool, deque[Any]]] | None = None
        if isinstance(script, Mapping):
            self._keyed = {}
            for key, value in script.items():
                if not isinstance(key, str) or not key:
                    raise ConfigError("scripted keys must be non-empty strings")
                consumed = isinstance(value, list)
                values = value if consumed else [value]
                self._keyed[key] = (
                    consumed,
                    deque(_check_response(v, f"for key {key!r}") for v in values),
                )
        elif script is not None:
            self.enqueue(*script)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ScriptedBackend:
        p = Path(path)
        if not p.is_file():
            raise DataError(f"scripted LLM file not found: {p} (give a JSON list or object of responses)")
        raw = p.read_bytes()
        try:
            data = load_json(raw)
        except UnicodeDecodeError:
            raise DataError(f"{p}: not UTF-8 text; give a JSON list or object of responses") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"{p}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, (list, dict)):
            raise DataError(f"{p}: expected a JSON list or object of responses, got {type(data).__name__}")
        # Known by content, not by name: the cache key changes when the script does.
        kwargs.setdefault("name", f"{p.name}#{hashlib.sha256(raw).hexdigest()[:16]}")
        return cls(data, **kwargs)

    @property
    def spec(self) -> str:
        return f"scripted:{self._name}"

    def enqueue(self, *responses: Any) -> None:
        """Append responses for list mode."""
        if self._keyed is not None:
            raise ConfigError("this scripted backend matches keys; enqueue works in list mode only")
        for r in responses:
            self._queue.append(_check_response(r, f"#{len(self._queue) + len(self.calls) + 1}"))

    @property
    def remaining(self) -> int:
        if self._keyed is not None:
            return sum(len(v) for _, v in self._keyed.values())
        return len(self._queue)

    def _next_response(self, request: LLMRequest) -> Any:
        if self._respond is not None:
            return _check_response(self._respond(request), f"#{len(self.calls)} from respond()")
        text = request.prompt_text()
        excerpt = " ".join(text.split())[:120]
        if self._keyed is None:
            if not self._queue:
                raise ScriptExhaustedError(
                    f"scripted LLM ran out of responses at call {len(self.calls)} "
                    f"(prompt starts: {excerpt!r}); add more responses to the script"
                )
            return self._queue.popleft()
        for key, (consumed, values) in self._keyed.items():
            if key in text:
                if not values:
                    raise ScriptExhaustedError(
                        f"scripted LLM has no responses left for key {key!r} "
                        f"(prompt starts: {excerpt!r})"
                    )
                return values.popleft() if consumed else values[0]
        raise ScriptExhaustedError(
            f"no scripted key occurs in the prompt (prompt starts: {excerpt!r}); "
            f"keys: {list(self._keyed)[:8]}"
        )

    async def _generate(self, request: LLMRequest) -> Generation:
        # Take the response before any await so concurrent calls stay in start order.
        self.calls.append(request)
        item = self._next_response(request)
        if isinstance(item, str):
            item = {"text": item}
        if "error" in item:
            status = item.get("status")
            retryable = status is not None and (status == 429 or status >= 500)
            raise BackendError(f"scripted error: {item['error']}", status=status, is_retryable=retryable)
        if request.forced is not None:
            return _forced(request, item)
        if "text" not in item:
            raise ConfigError("scripted response with only 'forced_logprobs' answered a call that writes a reply; add 'text'")
        text = str(item["text"])
        if (sink := token_sink()) is not None:
            # Stream the reply word by word, yielding between words, as a decoding model would.
            for piece in re.findall(r"\s*\S+", text):
                sink(piece)
                await asyncio.sleep(0)
        logprobs = None
        if request.top_logprobs and self.supports_logprobs and "top_logprobs" in item:
            logprobs = _to_logprobs(item["top_logprobs"], request.top_logprobs)
        return Generation(
            text=text,
            prompt_tokens=int(item.get("prompt_tokens", approx_token_count(request.prompt_text()))),
            completion_tokens=int(item.get("completion_tokens", approx_token_count(text))),
            cost_usd=float(item.get("cost_usd", 0.0)),
            finish_reason=str(item.get("finish_reason", "stop")),
            logprobs=logprobs,
            hidden=_hidden(request, item.get("hidden")),
        )


def _hidden(request: LLMRequest, scripted: Any) -> dict[str, dict[int, list[float]]] | None:
    """The scripted hidden states (``{"prompt": {layer: [...]}, "answer": {...}}``) of the layers asked for."""
    if not request.hidden or not isinstance(scripted, Mapping):
        return None
    return {where: {int(k): [float(x) for x in v] for k, v in states.items() if int(k) in request.hidden}
            for where, states in scripted.items() if isinstance(states, Mapping)}


def _forced(request: LLMRequest, item: Mapping[str, Any]) -> Generation:
    """A scored reply: the forced text, one scripted log-probability per whitespace token."""
    scores = item.get("forced_logprobs")
    if not isinstance(scores, list) or not scores:
        raise ConfigError("a scripted answer to a forced call needs 'forced_logprobs': a list of log-probabilities")
    text = request.forced or ""
    words = text.split() or [text]
    if len(words) != len(scores):
        words = [f"t{i}" for i in range(len(scores))]
    for lp in scores:
        if not isinstance(lp, (int, float)) or lp > 0 or math.isnan(lp):
            raise ConfigError(f"scripted forced_logprobs must be numbers <= 0, got {lp!r}")
    return Generation(
        text=text,
        prompt_tokens=int(item.get("prompt_tokens", approx_token_count(request.prompt_text()))),
        completion_tokens=len(scores),
        finish_reason="forced",
        logprobs=tuple(TokenLogprobs(w, float(lp)) for w, lp in zip(words, scores, strict=True)),
    )


def _to_logprobs(raw: Any, k: int) -> tuple[TokenLogprobs, ...]:
    positions = raw if isinstance(raw, list) else [raw]
    out = []
    for pos in positions:
        if not isinstance(pos, Mapping) or not pos:
            raise ConfigError("scripted top_logprobs must be {token: logprob} objects")
        ranked = sorted(((str(t), float(lp)) for t, lp in pos.items()), key=lambda x: -x[1])
        for tok, lp in ranked:
            if lp > 0 or math.isnan(lp):
                raise ConfigError(f"scripted log-probability for {tok!r} must be <= 0, got {lp}")
        top = dict(ranked[:k])
        out.append(TokenLogprobs(token=ranked[0][0], logprob=ranked[0][1], top=top))
    return tuple(out)


def _from_spec(target: str) -> ScriptedBackend:
    if not target:
        raise ConfigError("scripted backend needs a file: scripted:PATH.json")
    return ScriptedBackend.from_file(target)


# The registry's entry (see selfrag.llm.factory): a script sets its own costs, so no settings.
KIND = BackendKind(name="scripted", create=_from_spec, specs=("scripted:PATH.json",))
