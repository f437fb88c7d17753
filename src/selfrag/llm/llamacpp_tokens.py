"""Token- and text-level helpers of the llama.cpp decoding loop (:mod:`.llamacpp`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..reflection.tokens import ALL_REFLECTION_TOKENS, PARAGRAPH_CLOSE, PARAGRAPH_OPEN
from .base import Message

INSTRUCTION_FORMAT = "### Instruction:\n{instruction}\n\n### Response:\n"
# selfrag's own markers in a plain-string prompt: special tokens where the model has them.
OWN_MARKERS = (*sorted(ALL_REFLECTION_TOKENS), PARAGRAPH_OPEN, PARAGRAPH_CLOSE)


def instruction_prompt(messages: tuple[Message, ...]) -> str:
    """The Alpaca/Self-RAG prompt format, for models without a chat template."""
    parts = [m.content for m in messages if m.role in ("system", "user")]
    prompt = INSTRUCTION_FORMAT.format(instruction="\n\n".join(parts))
    # A trailing assistant message is a prefix the model should continue.
    if messages and messages[-1].role == "assistant":
        prompt += messages[-1].content
    return prompt


def plain_ids(tokenize: Callable[[str], list[int]], special: re.Pattern[str] | None, text: str) -> list[int]:
    """``text`` tokenized by ``tokenize`` (special-token parsing off) with every match of ``special``
    split after its first character, so no control or user-defined token can come out of it."""
    if special is None:
        return tokenize(text)
    ids: list[int] = []
    pos = 0
    for match in special.finditer(text):
        ids += tokenize(text[pos : match.start()])
        found = match.group(0)
        ids += tokenize(found[0]) + plain_ids(tokenize, special, found[1:])
        pos = match.end()
    return ids + tokenize(text[pos:])


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


def own_marker_pattern(special: re.Pattern[str] | None) -> re.Pattern[str] | None:
    """A regex of those of selfrag's markers (:data:`OWN_MARKERS`) that ``special`` matches whole
    (the special tokens of the model); None when the model has none of them."""
    own = [m for m in OWN_MARKERS if special is not None and special.fullmatch(m)]
    if not own:
        return None
    return re.compile("|".join(re.escape(m) for m in sorted(own, key=len, reverse=True)))
