"""Token- and text-level helpers of the llama.cpp decoding loop (:mod:`.llamacpp`)."""

from __future__ import annotations

import re
from typing import Any


def special_token_pattern(llm: Any) -> re.Pattern[str] | None:
    """A regex matching the text of every control or user-defined token (longest first)."""
    from llama_cpp import llama_cpp as lib

    vocab = llm._model.vocab
    flags = lib.LLAMA_TOKEN_ATTR_CONTROL | lib.LLAMA_TOKEN_ATTR_USER_DEFINED
    texts = set()
    for i in range(lib.llama_vocab_n_tokens(vocab)):
        if lib.llama_vocab_get_attr(vocab, i) & flags:
            text = lib.llama_vocab_get_text(vocab, i).decode("utf-8", errors="ignore")
            if len(text) > 1 and text.strip():
                texts.add(text)
    if not texts:
        return None
    return re.compile("|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True)))


def stop_index(text: str, stops: tuple[str, ...]) -> int | None:
    """Where the first of the ``stops`` begins in ``text`` (None when none occurs)."""
    best = None
    for s in stops:
        if not s:
            continue
        i = text.find(s)
        if i != -1 and (best is None or i < best):
            best = i
    return best
