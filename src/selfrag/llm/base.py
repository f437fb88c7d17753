"""The LLM backend protocol and the shared machinery behind every backend.

A backend turns an :class:`LLMRequest` into a :class:`~selfrag.types.Generation`.
Concrete backends subclass :class:`BaseBackend` and implement one method,
``_generate``; the base class adds request normalisation, retries with
exponential backoff and jitter, timing, and cost accounting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..defaults import MAX_TOKENS, TEMPERATURE
from ..errors import ConfigError
from ..types import Generation
from .pricing import Pricing, lookup_pricing
from .retry import RetryPolicy, call_with_retries

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    role: str
    content: str


def chat(system: str | None, user: str) -> tuple[Message, ...]:
    """A one-turn chat prompt: an optional system message and a user message."""
    user_message = Message("user", user)
    return (Message("system", system), user_message) if system else (user_message,)


# A prompt is either chat messages (sent through the model's chat template) or a
# plain string (sent as is, with no template: completion style).
Prompt = str | Sequence[Message | Mapping[str, str]]


@dataclass(frozen=True)
class LLMRequest:
    """One normalised LLM call. Exactly one of ``messages`` and ``prompt`` is set."""

    messages: tuple[Message, ...] | None = None
    prompt: str | None = None
    max_tokens: int = MAX_TOKENS
    temperature: float = TEMPERATURE
    stop: tuple[str, ...] = ()
    top_logprobs: int = 0
    response_format: str | None = None  # None or "json"
    # Forced decoding: score this text as the reply instead of writing one. The generation's
    # text is ``forced`` and its logprobs hold each of its tokens' log-probability (needs
    # ``supports_forced``; max_tokens and stop do not apply).
    forced: str | None = None
    # Which of several samples of the same request this is (0: the only one). A sampled reply
    # (temperature > 0) drawn again under another number is another reply, also to a cache.
    draw: int = 0
    # The model's hidden state to read from this call's own forward pass, by layer (backends with
    # ``supports_hidden``; -1 the final normalised state): Generation.hidden.
    hidden: tuple[int, ...] = ()

    def prompt_text(self) -> str:
        """All prompt text as one string (for matching and rough token counts)."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(m.content for m in self.messages or ())

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def normalize_messages(prompt: Prompt) -> tuple[tuple[Message, ...] | None, str | None]:
    if isinstance(prompt, str):
        return None, prompt
    messages: list[Message] = []
    for i, item in enumerate(prompt):
        if isinstance(item, Message):
            msg = item
        elif isinstance(item, Mapping):
            try:
                msg = Message(role=str(item["role"]), content=str(item["content"]))
            except KeyError as exc:
                raise ConfigError(f"message {i} has no {exc.args[0]!r} key; give role and content") from None
        else:
            raise ConfigError(f"message {i} is a {type(item).__name__}; give a dict with role and content")
        if msg.role not in ROLES:
            raise ConfigError(f"message {i} has role {msg.role!r}; use one of {', '.join(ROLES)}")
        messages.append(msg)
    if not messages:
        raise ConfigError("no messages given; pass at least one user message")
    return tuple(messages), None


def build_request(
    prompt: Prompt,
    *,
    max_tokens: int = MAX_TOKENS,
    temperature: float = TEMPERATURE,
    stop: Sequence[str] | str | None = None,
    top_logprobs: int = 0,
    response_format: str | Mapping[str, Any] | None = None,
    forced: str | None = None,
    draw: int = 0,
    hidden: Sequence[int] = (),
) -> LLMRequest:
    messages, raw = normalize_messages(prompt)
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        response_format = "json" if kind in ("json_object", "json_schema", "json") else None
    if response_format not in (None, "json"):
        raise ConfigError(f"response_format {response_format!r} is not supported; use 'json' or None")
    if max_tokens < 1:
        raise ConfigError(f"max_tokens must be at least 1, got {max_tokens}")
    if not 0 <= top_logprobs <= 20:
        raise ConfigError(f"top_logprobs must be between 0 and 20, got {top_logprobs}")
    if forced is not None and not forced.strip():
        raise ConfigError("forced text is empty; give the reply whose tokens should be scored")
    if draw < 0:
        raise ConfigError(f"draw must be 0 or more, got {draw}")
    return LLMRequest(
        messages=messages,
        prompt=raw,
        max_tokens=int(max_tokens),
        temperature=float(temperature),
        stop=tuple(stop or ()),
        top_logprobs=int(top_logprobs),
        response_format=response_format,
        forced=forced,
        draw=int(draw),
        hidden=tuple(int(layer) for layer in hidden),
    )


@runtime_checkable
class LLMBackend(Protocol):
    """What every backend offers. Capabilities are attributes; methods read them, never sniff.

    * ``supports_logprobs``: ``generate(top_logprobs=k)`` returns per-token alternatives;
    * ``supports_json``: ``response_format="json"`` constrains the output to a JSON object;
    * ``supports_raw_prompt``: a plain-string prompt is sent with no chat template;
    * ``decodes_serially``: the backend decodes one call at a time (in-process
      llama.cpp), so concurrent calls buy nothing and call order buys prefix reuse;
    * ``supports_forced``: ``generate(forced=text)`` scores ``text`` as the reply (each of its
      tokens' log-probability given the prompt and the tokens before it) instead of writing one;
    * ``supports_hidden``: ``generate(hidden=layers)`` returns those layers' hidden states at the
      last prompt and reply tokens (``Generation.hidden``);
    * ``tokenize(text)``: the model's token ids, or ``None`` when the backend has no tokenizer.
    """

    provider: str
    model: str
    spec: str
    supports_logprobs: bool
    supports_json: bool
    supports_raw_prompt: bool
    decodes_serially: bool
    supports_forced: bool

    async def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = MAX_TOKENS,
        temperature: float = TEMPERATURE,
        stop: Sequence[str] | str | None = None,
        top_logprobs: int = 0,
        response_format: str | Mapping[str, Any] | None = None,
        forced: str | None = None,
        draw: int = 0,
        hidden: Sequence[int] = (),
    ) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...

    def tokenize(self, text: str) -> list[int] | None: ...

    async def aclose(self) -> None: ...


def approx_token_count(text: str) -> int:
    """A tokenizer-free estimate: about four characters per token."""
    return max(1, (len(text) + 3) // 4) if text else 0


class RequestGenerator:
    """``generate(prompt, ...)`` for anything that implements ``generate_request(request)``.

    Backends and backend wrappers (cache, delay) share this entry point, so
    arguments are normalised and checked in one place.
    """

    async def generate_request(self, request: LLMRequest) -> Generation:
        raise NotImplementedError

    async def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = MAX_TOKENS,
        temperature: float = TEMPERATURE,
        stop: Sequence[str] | str | None = None,
        top_logprobs: int = 0,
        response_format: str | Mapping[str, Any] | None = None,
        forced: str | None = None,
        draw: int = 0,
        hidden: Sequence[int] = (),
    ) -> Generation:
        request = build_request(
            prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            top_logprobs=top_logprobs,
            response_format=response_format,
            forced=forced,
            draw=draw,
            hidden=hidden,
        )
        return await self.generate_request(request)


class CallObserver(RequestGenerator):
    """Behaves exactly like ``inner`` and hands every returned generation to :meth:`observe`.

    The base of wrappers that watch calls without changing them (the run's
    ledger, the server's progress events).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # Capabilities, model name, count_tokens and the rest come from the inner backend.
        return getattr(self.inner, name)

    @property
    def spec(self) -> str:
        return self.inner.spec

    def observe(self, gen: Generation) -> None:
        raise NotImplementedError

    async def generate_request(self, request: LLMRequest) -> Generation:
        gen = await self.inner.generate_request(request)
        self.observe(gen)
        return gen


class BaseBackend(RequestGenerator):
    """Shared behaviour; subclasses implement :meth:`_generate`."""

    provider: str = "base"
    supports_logprobs: bool = False
    supports_json: bool = False
    # Whether a plain-string prompt is sent without any chat template.
    supports_raw_prompt: bool = False
    # Whether calls are decoded one at a time (see LLMBackend).
    decodes_serially: bool = False
    # Whether a request can score a given reply (LLMRequest.forced).
    supports_forced: bool = False
    # Whether a request can read the model's hidden states (LLMRequest.hidden).
    supports_hidden: bool = False

    def __init__(
        self,
        model: str,
        *,
        pricing: Pricing | None = None,
        retry: RetryPolicy | None = None,
        sleep=asyncio.sleep,
    ) -> None:
        self.model = model
        self.pricing = pricing if pricing is not None else lookup_pricing(self.provider, model)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = random.Random()

    @property
    def spec(self) -> str:
        """The spec string that names this backend (URL credentials shown as ``***``)."""
        return f"{self.provider}:{self.model}"

    async def generate_request(self, request: LLMRequest) -> Generation:
        if request.forced is not None and not self.supports_forced:
            raise ConfigError(
                f"{self.spec} cannot score a given reply (forced decoding); use a local model "
                "(llamacpp:/path/model.gguf) or a critique that does not need it"
            )
        start = time.perf_counter()

        async def attempt() -> Generation:
            nonlocal start
            start = time.perf_counter()
            return await self._generate(request)

        gen = await call_with_retries(attempt, policy=self.retry, label=self.spec, sleep=self._sleep, rng=self._rng)
        latency = (time.perf_counter() - start) * 1000
        cost = self.pricing.cost(gen.prompt_tokens, gen.completion_tokens)
        return dataclasses.replace(
            gen,
            latency_ms=gen.latency_ms or latency,
            cost_usd=gen.cost_usd or cost,
            model=gen.model or self.model,
            evaluated_prompt_tokens=(
                gen.evaluated_prompt_tokens
                if gen.evaluated_prompt_tokens is not None
                else gen.prompt_tokens
            ),
        )

    async def _generate(self, request: LLMRequest) -> Generation:  # pragma: no cover - abstract
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return approx_token_count(text)

    def tokenize(self, text: str) -> list[int] | None:
        """The model's token ids; ``None``: this backend has no tokenizer."""
        return None

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"


# The settings create_backend passes on, to the kinds that take them (besides backend options like n_ctx).
HTTP_SETTINGS = frozenset({"base_url", "pricing", "retry", "timeout", "api_key_env"})


@dataclass(frozen=True)
class BackendKind:
    """Everything :func:`~selfrag.llm.factory.create_backend` needs to know about one kind of backend.

    A backend's module declares it as ``KIND``; :mod:`.factory` maps the name to that module.
    """

    name: str  # the spec's prefix: NAME or NAME:TARGET
    create: Callable[..., Any]  # (target, **the settings it takes) -> a backend
    specs: tuple[str, ...]  # the spec forms it accepts, as help and errors list them
    # The settings create() is given, when set: any of HTTP_SETTINGS (with base_url, TARGET may end
    # in @http(s)://BASE_URL) and backend options (n_ctx, ...). Others are not passed.
    settings: frozenset[str] = frozenset()
