"""Reading YES/NO decisions, search queries and ReAct actions from free text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfrag.reflection.decisions import (
    Action,
    Decision,
    clean_query,
    normalize_query,
    parse_action,
    parse_decision,
)


@pytest.mark.parametrize(
    ("text", "verdict", "reason", "source"),
    [
        ("DECISION: yes\nREASON: Doc A names Paris.", "YES", "Doc A names Paris.", "label"),
        ("DECISION: NO\nREASON: the year is missing", "NO", "the year is missing", "label"),
        ("**Decision:** No\n**Reason:** lacks the year", "NO", "lacks the year", "label"),
        ("Decision - YES", "YES", "", "label"),
        ("Let me think.\nDECISION: no\nREASON: only Mars is covered\nextra", "NO", "only Mars is covered extra", "label"),
        ("Yes.", "YES", "", "leading"),
        ("No, the documents do not mention 2006.", "NO", "the documents do not mention 2006.", "leading"),
        ("yes REASON: it is there", "YES", "it is there", "leading"),
        ('{"decision": "YES", "reason": "all there"}', "YES", "all there", "json"),
        ('Sure: {"Decision": "no", "Explanation": "missing"} done', "NO", "missing", "json"),
        ('```json\n{"sufficient": true}\n```', "YES", "", "json"),
        ('{"can_answer": false, "reason": 3}', "NO", "3", "json"),
    ],
)
def test_decisions_in_many_forms(text, verdict, reason, source):
    d = parse_decision(text)
    assert (d.verdict, d.reason, d.parsed, d.source) == (verdict, reason, True, source)
    assert d.accepted is (verdict == "YES")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I am not sure.",
        "DECISION: YES or NO\nREASON: <explanation>",  # the template echoed back
        "DECISION: maybe",
        '{"decision": "perhaps"}',
        "None of these.",
        "{not json",
    ],
)
def test_unreadable_decisions_are_no_and_flagged(text):
    d = parse_decision(text)
    assert d == Decision("NO", "", parsed=False, source="none")


def test_json_without_decision_falls_back_to_text():
    d = parse_decision('{"note": "x"}\nDECISION: yes')
    assert (d.verdict, d.source) == ("YES", "label")


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("moons of Mars", "moons of Mars"),
        ("Query: moons of mars", "moons of mars"),
        ('Reformulated query: "Pluto dwarf planet 2006"', "Pluto dwarf planet 2006"),
        ("Here is a better search query:\n\"TLS 1.2 port 8443\"", "TLS 1.2 port 8443"),
        ("Sure! Here you go:\nUranus discovery Herschel 1781\nThis targets the name.", "Uranus discovery Herschel 1781"),
        ("**Search query:** Ganymede size", "Ganymede size"),
        ("Query:\nJupiter moons", "Jupiter moons"),
        ("```\nSaturn rings\n```", "Saturn rings"),
        ("", ""),
        ("Query:", ""),
    ],
)
def test_clean_query(text, query):
    assert clean_query(text) == query


def test_clean_query_limits_length_at_a_word():
    q = clean_query("word " * 200, limit=23)
    assert q == "word word word word" and len(q) <= 23


def test_normalize_query():
    assert normalize_query("  What is the Red Planet?? ") == "what is the red planet"
    assert normalize_query("what-is the red  planet") == normalize_query("What is the red planet?")
    assert normalize_query("...") == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thought: look it up\nAction: search[moons of Mars]", Action("search", "moons of Mars", "look it up")),
        ("Thought: got it\nAction: finish[Phobos and Deimos]\nObservation: invented", Action("finish", "Phobos and Deimos", "got it")),
        ("Action 2: Finish[ 'Herschel' ]", Action("finish", "Herschel", "")),
        ("I should search.\nsearch[Pluto 2006]", Action("search", "Pluto 2006", "I should search.")),
        ("Action: search(Pluto reclassified", Action("search", "Pluto reclassified", "")),
        ("Action: search[Jupiter largest moon\nmore", Action("search", "Jupiter largest moon", "")),
        ("Action: search: Uranus discovery", Action("search", "Uranus discovery", "")),
        ("Thought: x\nAction: search\nAction Input: Mars moons", Action("search", "Mars moons", "x")),
        ("Thought: known\nFinal Answer: 2006", Action("finish", "2006", "known")),
        ("**Action:** `search[Venus temperature]`", Action("search", "Venus temperature", "")),
    ],
)
def test_actions_in_many_forms(text, expected):
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Thought: hmm\nAction: lookup[x]", "unknown action 'lookup'"),
        ("Action: finish[]", "finish needs an answer inside the brackets"),
        ("Action: search[   ]", "search needs a query inside the brackets"),
        ("I do not know what to do", "no action found"),
        ("", "no action found"),
        ("Action: ???", "the action is empty"),
        ("Observation: search[x]", "no action found"),  # only invented observation text
    ],
)
def test_invalid_actions_say_why(text, error):
    a = parse_action(text)
    assert a.kind == "invalid" and a.error == error


# -- never raise, on any input -------------------------------------------------

messy = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from(list("{}[]()\":,\n *_`DECISIONREASONyesnoActiontsearchfinish"))),
    st.builds(lambda a, b: f"{a}DECISION:{b}\nREASON:{a}", st.text(), st.text()),
    st.builds(lambda a, b: f"Thought: {a}\nAction: {b}[{a}", st.text(), st.text()),
)


@given(messy)
def test_parse_decision_is_total(text):
    d = parse_decision(text)
    assert d.verdict in ("YES", "NO")
    assert isinstance(d.reason, str) and len(d.reason) <= 500
    assert d.parsed or d.verdict == "NO"


@given(messy)
def test_parse_action_is_total(text):
    a = parse_action(text)
    assert a.kind in ("search", "finish", "invalid")
    assert (a.kind == "invalid") == bool(a.error)
    if a.kind != "invalid":
        assert a.argument and len(a.argument) <= 500


@given(messy, st.integers(min_value=-5, max_value=400))
def test_clean_query_is_total_and_one_line(text, limit):
    q = clean_query(text, limit=limit)
    assert "\n" not in q and len(q) <= max(1, limit)


@given(messy)
def test_normalize_query_is_idempotent(text):
    once = normalize_query(text)
    assert normalize_query(once) == once


@pytest.mark.parametrize("value", [None, 42, b"DECISION: yes", ["Yes"], {"decision": "yes"}])
def test_non_text_inputs_do_not_raise(value):
    assert parse_decision(value).parsed is False
    assert parse_action(value).kind == "invalid"
    assert clean_query(value) == "" and normalize_query(value) == ""
