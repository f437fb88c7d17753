"""Where the sentences of an answer end, for placing citation markers after them.

A sentence ends at ``.``, ``!``, ``?`` or an ellipsis (with any closing quotes
or brackets after it) that is followed by white space or the end of the text,
and at a blank line or a new list item. Not every such period ends one:

* a period inside a token never does: decimals and amounts (``4.5``,
  ``£1.2``), versions, URLs and e-mail addresses have no space after it;
* a lower-case word after the mark continues the sentence (``e.g. the``,
  ``"Wait..." she said``, ``"Why?" he asked``);
* titles and other abbreviations that precede a name or a number never end
  one (``Dr. Smith``, ``St. Louis``, ``approx. 5``, ``vs. Spain``), and
  ``No.`` / ``p.`` / ``Fig.`` do not before a number (``No. 5``);
* initials, dotted acronyms and abbreviations that may also close a sentence
  (``J. R. R. Tolkien``, ``U.S. Army``, ``5 p.m.``, ``Apple Inc.``, ``etc.``,
  ``Jan. 5``) end one only before a word that commonly starts a sentence
  (``The``, ``It``, ``He``, ...);
* a list number (``1. Grind the beans.``, ``Steps: 1. Grind. 2. Brew.``) is
  part of its item.
"""

from __future__ import annotations

import re


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# A sentence-ending mark: its punctuation, then closing quotes or brackets, then white space or the end.
_END = re.compile(r"(?P<mark>[.!?\u2026]+)[\"'\u201d\u2019)\]]*(?=\s|$)")
# A blank line, or a new line that starts a list item.
_BREAK = re.compile(r"\n[ \t]*(?:\n|(?=[-*\u2022][ \t]|\d{1,3}[.)][ \t]))")
# The word just before a period, with any inner periods (``U.S``, ``e.g``, ``Ph.D``).
_WORD_BEFORE = re.compile(r"(?<![A-Za-z0-9.])([A-Za-z][A-Za-z.]*)$")
# A dotted acronym: U.S, Ph.D, a.m (an address such as example.com is not one).
_ACRONYM = re.compile(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")
_NEXT_WORD = re.compile(r"\s*[\"'\u201c\u2018(\[{]*(\S*)")
# Prefixes that precede a name or a number: never the end of a sentence.
_NEVER = _word_set(
    "mr mrs ms mx dr prof rev hon gen col capt lt sgt maj cmdr adm gov sen rep pres fr st mt ft vs v "
    "e.g i.e cf viz approx ca esp resp"
)
# Abbreviations that are not a sentence end before a number (``No. 5``, ``p. 12``, ``Fig. 3``).
_BEFORE_NUMBER = _word_set("no nos vol vols p pp fig figs ch sec art op ed eq eqs")
# Abbreviations that may also close a sentence: an end only before a common sentence opener.
_AMBIGUOUS = _word_set(
    "etc inc ltd co corp jr sr bros al a.m p.m dept est ave rd blvd univ assn "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
# Words that commonly open a sentence: after an ambiguous abbreviation they mark a new one.
_OPENERS = _word_set(
    "The A An It Its He She They We I You This That These Those There Their His Her Our My Your "
    "In On At By For From To With After Before During As But And Or So Yet However Also Then Thus "
    "Yes No If When While Although Though Both Each Every Today Since Because Unlike Some Many Most "
    "All One Other Another Such Here Its What Which Who Where Why How"
)


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``, without surrounding white space.

    The whole text is one sentence when nothing in it ends one.
    """
    cuts = {m.end() for m in _END.finditer(text) if _ends_sentence(text, m)}
    cuts |= {m.start() for m in _BREAK.finditer(text)}
    spans = []
    start = 0
    for cut in [*sorted(cuts), len(text)]:
        s, e = start, cut
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            spans.append((s, e))
        start = max(start, cut)
    return spans or [(0, len(text))]


def _next_word(text: str, pos: int) -> str:
    """The word after ``pos``, past white space and opening quotes or brackets ("" at the end)."""
    match = _NEXT_WORD.match(text, pos)
    return match.group(1) if match else ""


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    following = _next_word(text, match.end())
    if not following:
        return True  # the end of the text (or only quotes and brackets after the mark)
    if following[0].islower():
        return False  # the sentence goes on: "e.g. the", '"Why?" he asked'
    if match.group("mark") != ".":
        return True  # "!", "?" and ellipses before anything else
    before = text[max(0, match.start() - 40) : match.start()]  # the words just before are enough
    word_match = _WORD_BEFORE.search(before)
    if word_match is None:
        return not _list_number(text, match.start())
    word = word_match.group(1)
    lower = word.lower()
    if lower in _NEVER:
        return False
    if lower in _BEFORE_NUMBER:
        return not following[0].isdigit()
    if lower in _AMBIGUOUS or len(word) == 1 or _ACRONYM.fullmatch(word):
        opener = re.match(r"[A-Za-z]+", following)
        return opener is not None and opener.group() in _OPENERS
    return True


def _list_number(text: str, end: int) -> bool:
    """Whether ``text[:end]`` ends in a list number (1 to 3 digits) opening a line or an item
    (after a colon, a semicolon or another sentence: ``Steps: 1. Grind. 2. Brew.``)."""
    start = end
    while start > 0 and text[start - 1].isdigit():
        start -= 1
    if not 1 <= end - start <= 3:
        return False
    digits = start
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    if start == 0 or text[start - 1] in "\n:":
        return True
    return start < digits and text[start - 1] in ";.!?"  # "2. Brew" after "beans. ", not "2.718"
