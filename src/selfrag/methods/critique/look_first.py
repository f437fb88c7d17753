"""The retrieval decision with documents at hand: look at them first, then decide.

Asked with the question alone, a small model decides badly whether documents
are needed, and its fallback rule ("retrieve when the question names
something") never reads one's own notes for a lower-case question. When a
corpus is given, retrieving costs milliseconds (BM25 over a local folder),
less than the decision call itself, so ``retrieval_mode: look_first``
retrieves first and lets the decision see what was found:

* the best passage's **coverage**, the share of the question's content words
  (stemmed, stop words left out) that occur in its title or text;
* coverage of at least :data:`READ_COVERAGE`: the documents speak to the
  question, so they are read, with no model call;
* coverage of 0: no document shares a word with the question, so the answer
  is written without them, and the trace says so (every surface then says
  the answer used no document);
* in between: the model is shown the best passage and asked whether it helps
  (``prompts/self_rag_look.txt``; P(yes) >= 0.5 where the backend gives
  log-probabilities, else its written yes/no).

The passages looked at are the ones the method then reads: the retrieval is
not repeated (:meth:`selfrag.methods.core.trace.Run.keep_for_reuse`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from ...llm.base import chat
from ...prompts import load_prompt, render
from ...reflection import score as S
from ...reflection.parse import parse_retrieval_decision
from ...reflection.tokens import LABEL_GROUPS
from ...types import Document, Question
from ..core.context import format_passage, truncate_to_tokens
from ..core.trace import Run, shorten

READ_COVERAGE = 0.5
ASK_THRESHOLD = 0.5
PASSAGE_TOKENS = 300
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP_WORDS = """
a an and are as at be been being but by can could did do does doing for from had has have how i if in into
is it its me my of on or our should so than that the their them then there these they this those to was we
were what when where which while who whom whose why will with would you your about any some much many
"""
_STOP = frozenset(_STOP_WORDS.split())


@cache
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def content_words(text: str) -> set[str]:
    """Stemmed words of ``text`` that carry content (no stop words, no one-letter words)."""
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOP]
    return set(_stemmer().stemWords(words))


def coverage(question: str, doc: Document) -> float:
    """The share of the question's content words found in the passage's title or text (0 without any)."""
    wanted = content_words(question)
    if not wanted:
        return 0.0
    return len(wanted & content_words(f"{doc.title}\n{doc.text}")) / len(wanted)


@dataclass(frozen=True)
class Look:
    needed: bool
    coverage: float
    best: Document | None
    source: str  # "coverage", "nothing_found", "label_probs" or "text"


async def look_first(run: Run, question: Question, top_k: int, max_tokens: int) -> Look:
    """Retrieve, then decide from what was found (see the module docstring); records a
    ``retrieval_decision`` step whose observation says why."""
    result = await run.retrieve(question.text, top_k, thought="Look at the documents first: retrieval is cheap.")
    run.keep_for_reuse(result, question.text, top_k)
    found = [(coverage(question.text, d), i) for i, d in enumerate(result.documents)]
    share, index = max(found, key=lambda x: (x[0], -x[1]), default=(0.0, -1))
    best = result.documents[index] if index >= 0 else None
    name = f"'{best.title or best.id}'" if best is not None else "none"
    details = {"retrieval_mode": "look_first", "coverage": round(share, 3), "best_passage": best.id if best else None}
    if share >= READ_COVERAGE:
        run.note("retrieval_decision", thought="The best passage covers most of the question: read the documents.",
                 action_input=question.text,
                 observation=f"retrieval needed: yes (passage {name} holds {share:.0%} of the question's words)",
                 details={**details, "retrieval_needed": True, "decision_source": "coverage"})
        return Look(True, share, best, "coverage")
    if share == 0.0 or best is None:
        why = "no document was found" if best is None else "none of the documents shares a word with the question"
        run.note("retrieval_decision", thought="Nothing in the documents matches the question.",
                 action_input=question.text, observation=f"retrieval needed: no ({why})",
                 details={**details, "retrieval_needed": False, "decision_source": "nothing_found"})
        return Look(False, share, best, "nothing_found")
    passage = format_passage(best, text=truncate_to_tokens(best.text, PASSAGE_TOKENS, run.llm.count_tokens))
    prompt = chat(None, render(load_prompt("self_rag_look"), question=question.text, passage=passage))
    logprobs = bool(getattr(run.llm, "supports_logprobs", False))
    step = await run.generate(prompt, action="retrieval_decision",
                              thought="Some of the question is in the documents: ask whether the best passage helps.",
                              action_input=question.text, max_tokens=1 if logprobs else max_tokens,
                              **({"top_logprobs": 20} if logprobs else {}))
    p_yes = None
    if step.gen is not None and step.gen.logprobs:
        p_yes = S.p_retrieve(S.group_probs(step.gen.logprobs[0].top, LABEL_GROUPS["retrieve"]))
    if p_yes is not None:
        needed, source, how = p_yes >= ASK_THRESHOLD, "label_probs", f"P(yes)={p_yes:.3f}"
    else:
        needed, source, how = parse_retrieval_decision(step.text), "text", f"model said {shorten(step.text, 40)!r}"
    verdict = "helps" if needed else "does not help"
    step.observation = (f"retrieval needed: {'yes' if needed else 'no'} (passage {name} holds {share:.0%} of the "
                        f"question's words; {how}: it {verdict})")
    step.details.update(details, retrieval_needed=needed, decision_source=source,
                        p_yes=None if p_yes is None else round(p_yes, 4), threshold=ASK_THRESHOLD)
    return Look(needed, share, best, source)
