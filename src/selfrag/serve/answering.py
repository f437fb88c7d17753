"""Answering questions for the server: one backend and one retriever, a method per name.

Each method is built once, on its first question, and answers every later one
(a method keeps no per-question state; what it learns once, such as
``self_rag``'s calibrated retrieval threshold, is worth keeping). Every answer
is bounded by the server's timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..assemble import build_method
from ..config import ExperimentConfig
from ..methods.core.base import Method
from ..methods.factory import available_methods
from ..methods.steps.followup import Turn, standalone_question, with_rewrite
from ..redaction import redact_secrets
from ..types import RAGResponse
from .errors import ApiError
from .progress import Progress, ProgressBackend, listener

# Names an OpenAI client may send that mean "the server's own method".
DEFAULT_ALIASES = frozenset({"", "selfrag", "default"})


class Answerer:
    def __init__(
        self,
        cfg: ExperimentConfig,
        llm: Any,
        retriever: Any,
        *,
        timeout_s: float,
        builder=build_method,
        on_answer: Callable[[str, RAGResponse], None] | None = None,
        documents_name: str | None = None,
    ) -> None:
        """``on_answer(method_name, response)`` is called after each answer (``serve --trace`` logs it); a
        hook rather than a subclass, so nothing has to repeat :meth:`answer`'s signature.
        ``documents_name``: what the documents are called (the folder's or the index's name), for the page."""
        self.cfg = cfg
        self.documents_name = documents_name
        self.llm = ProgressBackend(llm)
        self.retriever = retriever
        self.timeout_s = timeout_s
        self.default_method = cfg.architecture.name
        self._build = builder
        self.on_answer = on_answer
        self._methods: dict[str, Method] = {}

    @staticmethod
    def catalogue() -> dict[str, type[Method]]:
        return available_methods()

    def describe(self) -> list[dict[str, Any]]:
        """Every method, in the shape of OpenAI's model list."""
        return [
            {
                "id": name,
                "object": "model",
                "owned_by": "selfrag",
                "description": cls.description,
                "uses_retrieval": cls.uses_retrieval,
                "available": self.retriever is not None or not cls.uses_retrieval,
                "default": name == self.default_method,
            }
            for name, cls in self.catalogue().items()
        ]

    def served(self) -> dict[str, Any]:
        """What this server answers with: the default method, the model's spec (credentials hidden) and the
        documents (their name, how many passages when the retriever knows, the retriever)."""
        documents = None
        if self.retriever is not None:
            try:
                passages = len(self.retriever.documents) or None
            except Exception:  # a retriever that cannot count its passages cheaply: leave them out
                passages = None
            documents = {"name": self.documents_name, "passages": passages,
                         "retriever": getattr(self.retriever, "name", None)}
        return {"method": self.default_method, "model": redact_secrets(str(self.llm.spec)), "documents": documents}

    def resolve(self, name: Any) -> str:
        if name is None or (isinstance(name, str) and name.strip().lower() in DEFAULT_ALIASES):
            return self.default_method
        if not isinstance(name, str) or name not in self.catalogue():
            known = ", ".join(self.catalogue())
            raise ApiError(404, f"unknown method {name!r}; the methods are: {known}", code="model_not_found", param="model")
        return name

    def method(self, name: str) -> Method:
        method = self._methods.get(name)
        if method is None:
            cls = self.catalogue()[name]
            if cls.uses_retrieval and self.retriever is None:
                raise ApiError(
                    400, f"method {name} retrieves passages, and this server has no documents "
                    "(start it with --docs PATH or --index DIR)", code="no_documents", param="model",
                )
            method = self._build(self.cfg, self.llm, self.retriever, name=name)
            self._methods[name] = method
        return method

    async def answer(self, question: str, method_name: str, progress: Progress | None = None,
                     history: Sequence[Turn] = ()) -> RAGResponse:
        """The method's answer, within the timeout; ``progress`` hears about every model call. With
        ``history`` (the conversation before the question), a follow-up is first rewritten to stand
        on its own."""
        method = self.method(method_name)
        token = listener.set(progress)

        async def answer() -> RAGResponse:
            rewrite = await standalone_question(self.llm, history, question)
            return with_rewrite(await method.answer(rewrite.standalone), rewrite)

        try:
            # The listener is copied into the task the timeout runs the answer in.
            response = await asyncio.wait_for(answer(), timeout=self.timeout_s)
        except TimeoutError:
            raise ApiError(
                504, f"no answer within {self.timeout_s:g} s (--timeout); try a cheaper method or a shorter question",
                code="timeout",
            ) from None
        finally:
            listener.reset(token)
        if self.on_answer is not None:
            self.on_answer(method_name, response)
        return response

    async def aclose(self) -> None:
        await self.llm.aclose()
