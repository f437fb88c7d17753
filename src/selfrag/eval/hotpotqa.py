"""HotpotQA (distractor setting): each question answered over its own 10 paragraphs.

Two file layouts are read:

* the official JSON list: ``{_id, question, answer, type, level,
  supporting_facts: [[title, sent_id], ...], context: [[title, [sentences]], ...]}``;
* the Hugging Face JSON Lines schema: ``{id, question, answer, type, level,
  supporting_facts: {title: [...], sent_id: [...]}, context: {title: [...],
  sentences: [[...], ...]}}``.

Each paragraph becomes a :class:`Document` whose id and title are the
Wikipedia title; the question keeps its type, level and supporting titles
(for ``retrieval_recall@k``) in ``Question.metadata``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..types import Document, Question
from .records import InvalidRecord, RecordErrors, iter_records, need_object, need_str


def _paragraphs(context: Any) -> list[tuple[str, list[str]]]:
    if isinstance(context, dict):
        titles, sentences = context.get("title"), context.get("sentences")
        if not isinstance(titles, list) or not isinstance(sentences, list) or len(titles) != len(sentences):
            raise InvalidRecord("'context' needs 'title' and 'sentences' lists of the same length")
        pairs = list(zip(titles, sentences, strict=True))
    elif isinstance(context, list):
        pairs = []
        for item in context:
            if not isinstance(item, list) or len(item) != 2:
                raise InvalidRecord("each 'context' entry must be [title, [sentences]]")
            pairs.append((item[0], item[1]))
    else:
        raise InvalidRecord("missing 'context' (the question's paragraphs)")
    out = []
    for title, sents in pairs:
        if not isinstance(title, str) or not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
            raise InvalidRecord("a paragraph needs a string title and a list of sentence strings")
        out.append((title, sents))
    if not out:
        raise InvalidRecord("'context' has no paragraphs")
    return out


def _supporting(facts: Any) -> list[tuple[str, int]]:
    if facts is None:
        return []
    if isinstance(facts, dict):
        titles, ids = facts.get("title"), facts.get("sent_id")
        if not isinstance(titles, list) or not isinstance(ids, list) or len(titles) != len(ids):
            raise InvalidRecord("'supporting_facts' needs 'title' and 'sent_id' lists of the same length")
        pairs = list(zip(titles, ids, strict=True))
    elif isinstance(facts, list):
        if not all(isinstance(f, list) and len(f) == 2 for f in facts):
            raise InvalidRecord("each 'supporting_facts' entry must be [title, sent_id]")
        pairs = [(f[0], f[1]) for f in facts]
    else:
        raise InvalidRecord("'supporting_facts' must be a list or an object")
    if not all(isinstance(t, str) and isinstance(i, int) for t, i in pairs):
        raise InvalidRecord("supporting facts need a string title and an integer sentence id")
    return pairs


def parse_record(record: Any) -> Question:
    record = need_object(record)
    qid = need_str(record, "_id", "id")
    answer = need_str(record, "answer")
    question = need_str(record, "question")
    documents: list[Document] = []
    seen: dict[str, int] = {}
    for title, sentences in _paragraphs(record.get("context")):
        text = "".join(sentences).strip()
        if not text:
            continue
        seen[title] = seen.get(title, 0) + 1
        doc_id = title if seen[title] == 1 else f"{title} #{seen[title]}"
        documents.append(Document(id=doc_id, title=title, text=text))
    facts = _supporting(record.get("supporting_facts"))
    titles = list(dict.fromkeys(t for t, _ in facts))
    kind = record.get("type") or "open"
    level = record.get("level") or ""
    if not isinstance(kind, str) or not isinstance(level, str):
        raise InvalidRecord("'type' and 'level' must be strings")
    return Question(
        id=qid,
        text=question,
        answers=(answer,),
        type=kind,
        level=level,
        contexts=tuple(documents),
        metadata={"supporting_titles": titles, "supporting_facts": [list(f) for f in facts]},
    )


def load(path: Path, errors: RecordErrors) -> list[Question]:
    questions = []
    for line, record in iter_records(path, errors):
        try:
            questions.append(parse_record(record))
        except InvalidRecord as exc:
            errors.invalid(path, line, str(exc))
    return questions
