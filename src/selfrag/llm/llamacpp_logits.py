"""Reading llama.cpp logits: sampling, log-probabilities, and scoring a forced reply.

Helpers of :mod:`.llamacpp` that work on logit rows and on an already loaded
``llama_cpp.Llama``; the backend keeps the model, the lock and the KV-cache
reuse. ``token_text`` turns a token id into its text (the backend's decoder).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..types import TokenLogprobs


def last_logits(llm: Any) -> np.ndarray:
    """A copy of the logits at the last evaluated position."""
    return np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).copy()


def pick(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """Greedy at temperature 0, else a sample from the softmax at ``temperature``."""
    if temperature <= 0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max()
    probs = np.exp(scaled)
    probs /= probs.sum()
    return int(rng.choice(len(probs), p=probs))


def token_logprobs(logits: np.ndarray, chosen: int, k: int, token_text: Callable[[int], str]) -> TokenLogprobs:
    """``chosen``'s log-probability and, when ``k`` > 0, the ``k`` most likely alternatives."""
    logits = logits.astype(np.float64)
    logz = np.logaddexp.reduce(logits)
    top: dict[str, float] = {}
    if k:
        idx = np.argpartition(-logits, k)[:k]
        for i in idx[np.argsort(-logits[idx])]:
            # Distinct ids can decode to the same text; keep both probabilities.
            tok = token_text(int(i))
            lp = float(logits[i] - logz)
            top[tok] = float(np.logaddexp(top[tok], lp)) if tok in top else lp
    return TokenLogprobs(token=token_text(chosen), logprob=float(logits[chosen] - logz), top=top)


def eval_rows(llm: Any, ids: list[int]) -> list[np.ndarray]:
    """Evaluate ``ids`` after the cached tokens and return the logits at every one of them
    (``Llama.eval`` keeps only the last position's unless the model was loaded with logits_all)."""
    out: list[np.ndarray] = []
    for start in range(0, len(ids), llm.n_batch):
        block = ids[start : start + llm.n_batch]
        n_past = llm.n_tokens
        llm._batch.set_batch(batch=block, n_past=n_past, logits_all=True)
        llm._ctx.decode(llm._batch)
        llm.input_ids[n_past : n_past + len(block)] = block
        llm.n_tokens += len(block)
        for i in range(len(block)):
            out.append(np.ctypeslib.as_array(llm._ctx.get_logits_ith(i), shape=(llm.n_vocab(),)).copy())
    return out


def score_forced(llm: Any, forced: list[int], k: int, token_text: Callable[[int], str]) -> tuple[TokenLogprobs, ...]:
    """Each of the ``forced`` tokens scored after the evaluated prompt.

    All but the last are evaluated in batches that keep every position's
    logits, so scoring a reply costs one prompt-like evaluation, not one
    decoding step per token.
    """
    rows = [last_logits(llm), *eval_rows(llm, forced[:-1])]
    return tuple(token_logprobs(row, token, k, token_text) for token, row in zip(forced, rows, strict=True))
