"""``self_rag``'s abstention rules: one policy list (``abstain``), each rule a small class.

A rule reads what the answer was built from (:class:`Facts`) and says why to
abstain, or None. Rules are written as text in the config:

* ``relevance < X``: no retrieved passage's fused relevance (the critic's verdict and
  the lexical evidence prior, :mod:`...steps.evidence`) reaches X;
* ``support < partially_supported`` (or ``fully_supported``): the answer is chosen
  among the candidates whose support verdict is at least that good, and with none
  the method abstains;
* ``unconfirmed``: no other usable candidate gives the selected answer
  (:func:`...steps.abstention.unconfirmed_reason`);
* ``confidence < X``: the answer's confidence is below X.

A rule says what it needs read for every question (``needs``): the one-passage
candidates, the support verdicts, the confidence. Every rule is checked once,
after the answer and its confidence are read, so an abstention spends the same
calls as an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ....reflection.select import support_rank
from ....types import Candidate
from ...steps.abstention import relevance_floor_reason, unconfirmed_reason

CANDIDATES, SUPPORT, CONFIDENCE = "candidates", "support", "confidence"
_RULE = re.compile(r"^\s*(?P<name>[a-z_]+)\s*(?:<\s*(?P<floor>[a-z_]+|[0-9]*\.?[0-9]+))?\s*$")
LEVELS = ("partially_supported", "fully_supported")


@dataclass(frozen=True)
class Facts:
    """What the rules read: the best fused relevance, the usable candidates, the selection, the confidence."""

    relevance: float
    usable: Sequence[Candidate]
    best: Candidate | None
    confidence: float | None


@dataclass(frozen=True)
class Rule:
    name: str
    floor: Any = None
    needs: frozenset[str] = field(default_factory=frozenset)

    def __str__(self) -> str:
        return self.name if self.floor is None else f"{self.name} < {self.floor}"

    def admits(self, candidate: Candidate) -> bool:
        """Whether the answer may be chosen from ``candidate`` (a support rule admits the supported only)."""
        return self.name != "support" or (not _defaulted(candidate)
                                          and support_rank(candidate.support or "") >= support_rank(self.floor))

    def reason(self, facts: Facts) -> str | None:
        if self.name == "relevance":
            return relevance_floor_reason(facts.relevance, self.floor)
        if self.name == "support":
            if any(self.admits(c) for c in facts.usable):
                return None
            verdicts = ", ".join(str(c.support) for c in facts.usable) or "none"
            return f"no candidate's support reaches {self.floor.replace('_', ' ')} (verdicts: {verdicts})"
        if self.name == "unconfirmed":
            if facts.best is None:
                return None
            return unconfirmed_reason(facts.best.text, [c.text for c in facts.usable if c is not facts.best])
        if facts.confidence is None or facts.confidence >= self.floor:
            return None
        return f"the answer's confidence {facts.confidence:.2f} is below {self.floor:g}"


def _defaulted(candidate: Candidate) -> bool:
    verdict = candidate.verdicts.get("support")
    return verdict is None or verdict.default


def rule(text: str) -> Rule:
    """One rule from its text (ValueError naming the forms that are accepted)."""
    match = _RULE.match(str(text))
    name, floor = (match.group("name"), match.group("floor")) if match else (None, None)
    if name == "unconfirmed" and floor is None:
        return Rule(name, None, frozenset({CANDIDATES}))
    if name == "support" and floor in LEVELS:
        return Rule(name, floor, frozenset({CANDIDATES, SUPPORT}))
    if name in ("relevance", "confidence") and floor is not None and _number(floor) is not None:
        value = _number(floor)
        if 0.0 <= value <= 1.0:
            needs = {CANDIDATES} if name == "relevance" else {CONFIDENCE}
            return Rule(name, value, frozenset(needs))
    raise ValueError(f"abstain rule {text!r} is not one of: 'relevance < X', 'confidence < X' (X in [0, 1]), "
                     "'support < partially_supported', 'support < fully_supported', 'unconfirmed'")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_rules(value: Any) -> Any:
    """The ``abstain`` setting: a list of rule texts (one text is a list of one; off / none: no rule)."""
    if value in (None, False, "off", "none", ""):
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError("abstain is a list of rules, e.g. [relevance < 0.7, unconfirmed]")
    return tuple(r if isinstance(r, Rule) else rule(r) for r in value)


def needs(rules: Sequence[Rule]) -> frozenset[str]:
    return frozenset().union(*(r.needs for r in rules)) if rules else frozenset()


def admitted(rules: Sequence[Rule], candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates every rule lets the answer be chosen from."""
    return [c for c in candidates if all(r.admits(c) for r in rules)]


def first_reason(rules: Sequence[Rule], facts: Facts) -> str | None:
    """The first rule's reason to abstain (None: answer)."""
    return next((why for r in rules if (why := r.reason(facts)) is not None), None)
