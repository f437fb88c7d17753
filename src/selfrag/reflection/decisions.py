"""Reading decisions and actions out of free-form model text.

Used by the agentic methods (``self_corrective``, ``react_rag``). Every
function here is pure and total: any input, including non-strings, yields a
value and never an exception. A reading that fails is reported in the result
(``parsed=False`` or ``kind="invalid"``) so the caller can record it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .parse import json_objects

YES, NO = "YES", "NO"
_VERDICT_WORDS = {"yes": YES, "true": YES, "no": NO, "false": NO}
_DECISION_KEYS = ("decision", "verdict", "answer", "sufficient", "can_answer", "answerable")
_REASON_KEYS = ("reason", "explanation", "rationale", "why")
_MAX_REASON = 500
_MAX_ARGUMENT = 500

ACTIONS = ("search", "finish")


@dataclass(frozen=True)
class Decision:
    """A YES/NO judgement. ``parsed`` is False when none could be read (then it is NO)."""

    verdict: str
    reason: str = ""
    parsed: bool = True
    source: str = ""  # "json", "label", "leading" or "none"

    @property
    def accepted(self) -> bool:
        return self.verdict == YES


@dataclass(frozen=True)
class Action:
    """One ReAct action. ``kind`` is "search", "finish" or "invalid" (then ``error`` says why)."""

    kind: str
    argument: str = ""
    thought: str = ""
    error: str = ""


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _squash(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut or text[:limit]


def _strip_fences(text: str) -> str:
    return re.sub(r"```[a-zA-Z]*", " ", text).strip()


# -- YES / NO decisions --------------------------------------------------------


def _verdict_of(value: Any) -> str | None:
    """YES/NO for a bool or a text containing exactly one kind of verdict word."""
    if isinstance(value, bool):
        return YES if value else NO
    words = {_VERDICT_WORDS[w] for w in re.findall(r"[a-z]+", _as_text(value).lower()) if w in _VERDICT_WORDS}
    return words.pop() if len(words) == 1 else None


def _from_json(text: str) -> Decision | None:
    for data in json_objects(text):  # the first object that carries a verdict
        lowered = {str(k).strip().lower(): v for k, v in data.items()}
        for key in _DECISION_KEYS:
            if key in lowered:
                verdict = _verdict_of(lowered[key])
                if verdict is not None:
                    reason = next((lowered[k] for k in _REASON_KEYS if k in lowered), "")
                    return Decision(verdict, _squash(_as_text(reason) or str(reason or ""), _MAX_REASON), True, "json")
    return None


_DECISION_LABEL = re.compile(r"\bdecision\s*[*_]*\s*[:=\-]\s*(.*)", re.IGNORECASE)
_REASON_LABEL = re.compile(r"\breason(?:ing)?\s*[*_]*\s*[:=\-]\s*(.*)", re.IGNORECASE | re.DOTALL)


def _reason_after_label(text: str) -> str:
    match = _REASON_LABEL.search(text)
    if not match:
        return ""
    body = re.split(r"\n\s*decision\s*[*_]*\s*[:=\-]", match.group(1), flags=re.IGNORECASE)[0]
    return _squash(body.lstrip(" \t\n*_:"), _MAX_REASON)


def _from_label(text: str) -> Decision | None:
    for line in text.splitlines():
        match = _DECISION_LABEL.search(line)
        if match:
            verdict = _verdict_of(match.group(1))
            if verdict is not None:
                return Decision(verdict, _reason_after_label(text), True, "label")
    return None


def _from_leading_word(text: str) -> Decision | None:
    match = re.match(r"[\W_]*([A-Za-z]+)\b(.*)", text, re.DOTALL)
    if not match or match.group(1).lower() not in ("yes", "no"):
        return None
    verdict = _VERDICT_WORDS[match.group(1).lower()]
    rest = match.group(2)
    reason = _reason_after_label(rest) or _squash(rest.lstrip(" \t\n.,:;!-*_)"), _MAX_REASON)
    return Decision(verdict, reason, True, "leading")


def parse_decision(text: Any) -> Decision:
    """Read a YES/NO decision and its reason.

    Accepts JSON (``{"decision": "yes", "reason": ...}``, booleans too), a
    ``DECISION: yes`` label line with an optional ``REASON:``, or text that
    starts with Yes/No. Anything else, including a label holding both words
    (an echoed ``DECISION: YES or NO``), is NO with ``parsed=False``.
    """
    raw = _strip_fences(_as_text(text))
    for reader in (_from_json, _from_label, _from_leading_word):
        decision = reader(raw)
        if decision is not None:
            return decision
    return Decision(NO, "", False, "none")


# -- search queries -----------------------------------------------------------

_QUERY_LABEL = re.compile(
    r"^(?:here\s+is\s+)?(?:an?\s+|the\s+)?(?:new|better|improved|reformulated|rewritten|revised|search)?"
    r"\s*(?:search\s+)?query\s*[*_]*\s*[:=\-]\s*",
    re.IGNORECASE,
)


def normalize_query(text: Any) -> str:
    """Lowercase words only: two queries with the same normal form retrieve the same way."""
    return " ".join(re.findall(r"\w+", _as_text(text).lower()))


def clean_query(text: Any, limit: int = 300) -> str:
    """The search query in a reformulation reply: first real line, labels and quotes removed."""
    lines = [ln.strip() for ln in _strip_fences(_as_text(text)).splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        stripped = _QUERY_LABEL.sub("", line.strip(" \t*_#>-")).strip()
        if not stripped and i + 1 < len(lines):
            continue  # a lone "Query:" label; the query is on the next line
        if line.endswith(":") and i + 1 < len(lines) and not _QUERY_LABEL.match(line):
            continue  # "Here is a better query:" introducing the next line
        query = stripped.strip(" \t\"'`*_“”‘’")
        return _squash(query, max(1, limit))
    return ""


# -- ReAct actions ------------------------------------------------------------

_OBSERVATION = re.compile(r"^\s*observation\s*\d*\s*:", re.IGNORECASE | re.MULTILINE)
_ACTION_LABEL = re.compile(r"^[\s*_#]*action\s*\d*\s*[*_]*\s*:\s*", re.IGNORECASE | re.MULTILINE)
_ACTION_INPUT = re.compile(r"^[\s*_#]*action\s+input\s*\d*\s*[*_]*\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_THOUGHT_LABEL = re.compile(r"^[\s*_#]*thought\s*\d*\s*[*_]*\s*:\s*", re.IGNORECASE | re.MULTILINE)
_FINAL_ANSWER = re.compile(r"^[\s*_#]*final\s+answer\s*[*_]*\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_CALL = re.compile(r"([A-Za-z_]+)\s*([\[(])(.*)", re.DOTALL)
_BARE_CALL = re.compile(r"\b(search|finish)\s*[\[(]", re.IGNORECASE)
_NAME_COLON = re.compile(r"([A-Za-z_]+)\s*[:=]\s*(.+)", re.DOTALL)


def _argument(rest: str, close: str) -> str:
    end = rest.find(close)
    body = rest[:end] if end >= 0 else rest.split("\n", 1)[0]
    return _squash(body.strip().strip("\"'`“”"), _MAX_ARGUMENT)


def _thought(text: str, action_start: int) -> str:
    head = text[:action_start]
    match = _THOUGHT_LABEL.search(head)
    body = head[match.end() :] if match else head
    return _squash(body, _MAX_REASON)


def _make(name: str, argument: str, thought: str) -> Action:
    kind = name.lower()
    if kind not in ACTIONS:
        return Action("invalid", argument, thought, f"unknown action {name!r}")
    if not argument:
        what = "a query" if kind == "search" else "an answer"
        return Action("invalid", "", thought, f"{kind} needs {what} inside the brackets")
    return Action(kind, argument, thought)


def parse_action(text: Any) -> Action:
    """Read ``Thought: ...`` and ``Action: search[query]`` / ``finish[answer]``.

    Tolerates a missing ``Action:`` label, numbered labels (``Action 2:``),
    parentheses instead of brackets, a missing closing bracket, ``search: q``,
    LangChain-style ``Action Input:`` lines and ``Final Answer:``. Text from
    an invented ``Observation:`` line on is ignored.
    """
    raw = _as_text(text)
    cut = _OBSERVATION.search(raw)
    body = raw[: cut.start()] if cut else raw
    label = _ACTION_LABEL.search(body)
    if label:
        start, rest = label.start(), body[label.end() :].strip()
    else:
        bare = _BARE_CALL.search(body)
        final = _FINAL_ANSWER.search(body)
        if bare:
            start, rest = bare.start(), body[bare.start() :]
        elif final:
            return _make("finish", _squash(final.group(1), _MAX_ARGUMENT), _thought(body, final.start()))
        else:
            thought = _thought(body, len(body))
            return Action("invalid", "", thought, "no action found")
    thought = _thought(body, start)
    rest = rest.lstrip("*_` ")
    call = _CALL.match(rest)
    if call:
        name, opener, tail = call.groups()
        return _make(name, _argument(tail, "]" if opener == "[" else ")"), thought)
    named = _NAME_COLON.match(rest)
    if named:
        return _make(named.group(1), _squash(named.group(2).split("\n", 1)[0].strip("\"'`“” "), _MAX_ARGUMENT), thought)
    word = re.match(r"([A-Za-z_]+)", rest)
    if word:
        given = _ACTION_INPUT.search(body)
        argument = _squash(given.group(1).strip("\"'`“” "), _MAX_ARGUMENT) if given else ""
        return _make(word.group(1), argument, thought)
    return Action("invalid", "", thought, "the action is empty")
