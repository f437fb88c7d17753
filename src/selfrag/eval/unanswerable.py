"""The unanswerable control (``data.remove_gold``): questions without their gold paragraphs.

A question made unanswerable loses every paragraph of its own whose title is
one of its supporting titles, so only distractors remain and the right
behaviour is to abstain. Its gold answer and supporting titles are kept (they
still say what a right answer would be) and it is marked
``metadata["answerable"] = False``; every other question of such a run is
marked ``True``.

``remove_gold: true`` (or ``1``) makes every question unanswerable; a share
``p`` between 0 and 1 makes those whose id hashes below ``p`` unanswerable
(the first 8 bytes of the SHA-256 of the id, read as a fraction of 2**64).
The choice depends on the id alone: the same in every run, subset and
resumption, and the questions picked at ``p`` are among those picked at any
larger ``p``. About ``p`` of the questions are picked, not exactly ``p``.

A question whose paragraphs are all gold (3 of the 500 HotpotQA dev questions
in the shared file have only their two gold paragraphs) gets the
distractors of the nearest question in file order that has some (the one
before it first), recorded in ``metadata["distractors_from"]``, so every
question id stays in the run.

A question whose passages are all one source's (``metadata["gold_contexts"] ==
"all"``: a PubMedQA question over its own abstract) has no distractors of its
own: made unanswerable, it gets the passages of the other question whose
passages share the most content words with it (the nearest abstract on the
topic the file holds, the first in file order on a tie), also recorded in
``metadata["distractors_from"]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from ..errors import DataError
from ..types import Document, Question


def picked(question_id: str, share: float) -> bool:
    """Whether ``data.remove_gold: share`` makes this question unanswerable."""
    if share >= 1:
        return True
    if share <= 0:
        return False
    digest = hashlib.sha256(question_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _title(doc: Document) -> str:
    return doc.title or doc.id


def _distractors(question: Question, gold: set[str]) -> tuple[Document, ...]:
    return tuple(d for d in question.contexts if _title(d) not in gold)


def _borrowed(questions: Sequence[Question], index: int, gold: set[str]) -> tuple[tuple[Document, ...], str]:
    """The nearest other question's paragraphs that are not gold for this one, and its id."""
    for step in range(1, len(questions)):
        for j in (index - step, index + step):
            if 0 <= j < len(questions) and (docs := _distractors(questions[j], gold)):
                return docs, questions[j].id
    raise DataError(f"question {questions[index].id}: no distractor paragraph to keep after data.remove_gold; "
                    "the file has no question with paragraphs other than its gold ones")


def _nearest(questions: Sequence[Question], index: int, words: list[set[str]]) -> Question:
    """The other question whose passages share the most content words with question ``index``."""
    from ..methods.critique.look_first import content_words

    wanted = content_words(questions[index].text)
    others = [j for j in range(len(questions)) if j != index and questions[j].contexts]
    if not others:
        raise DataError(f"question {questions[index].id}: data.remove_gold needs another question's passages "
                        "to put in place of its own; the file holds only this one")
    for j in others:
        if not words[j]:
            words[j] = content_words(" ".join(d.text for d in questions[j].contexts))
    return questions[max(others, key=lambda j: (len(wanted & words[j]), -j))]


def remove_gold(questions: Sequence[Question], share: float, source: str) -> list[Question]:
    """The questions, the picked ones without their gold paragraphs, each marked answerable or not."""
    out = []
    words: list[set[str]] = [set() for _ in questions]
    for i, question in enumerate(questions):
        if not picked(question.id, share):
            out.append(replace(question, metadata={**question.metadata, "answerable": True}))
            continue
        if question.metadata.get("gold_contexts") == "all":
            donor = _nearest(questions, i, words)
            out.append(replace(question, contexts=donor.contexts, metadata={
                **question.metadata, "answerable": False, "distractors_from": donor.id}))
            continue
        gold = {t for t in question.metadata.get("supporting_titles") or [] if t}
        where = f"{source}: question {question.id}"
        if not question.contexts:
            raise DataError(f"{where} has no paragraphs of its own; data.remove_gold needs per-question contexts")
        if not gold:
            raise DataError(f"{where} has no supporting titles, so data.remove_gold cannot tell its gold "
                            "paragraphs; use a file with supporting facts or set data.remove_gold: false")
        kept = _distractors(question, gold)
        if len(kept) == len(question.contexts):
            raise DataError(f"{where}: none of its paragraphs has a supporting title "
                            f"({', '.join(sorted(gold))[:80]}), so data.remove_gold would remove nothing")
        metadata = {**question.metadata, "answerable": False}
        if not kept:
            kept, donor = _borrowed(questions, i, gold)
            metadata["distractors_from"] = donor
        out.append(replace(question, contexts=kept, metadata=metadata))
    return out
