"""The reflection vocabulary: Self-RAG's special tokens and the label words of instruction models.

Fine-tuned Self-RAG models (Asai et al., 2024) write their own critique as
special tokens: ``[Retrieval]`` / ``[No Retrieval]`` / ``[Continue to Use
Evidence]`` before a segment, ``[Relevant]`` / ``[Irrelevant]`` after a
``<paragraph>…</paragraph>``, a support token after the segment and a
``[Utility:1…5]`` token at the end. Instruction models without those tokens
are asked the same questions and answer with label words ("yes"/"no",
"relevant"/"irrelevant", "fully"/"partially"/"no", "1".."5").

Both vocabularies map onto the same canonical labels per *group*, so the
scoring formulas in :mod:`selfrag.reflection.score` never care which one the
probabilities came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..types import Document, TokenLogprobs

RETRIEVAL_TOKEN = "[Retrieval]"
NO_RETRIEVAL_TOKEN = "[No Retrieval]"
CONTINUE_TOKEN = "[Continue to Use Evidence]"
RELEVANT_TOKEN = "[Relevant]"
IRRELEVANT_TOKEN = "[Irrelevant]"
FULLY_SUPPORTED_TOKEN = "[Fully supported]"
PARTIALLY_SUPPORTED_TOKEN = "[Partially supported]"
NO_SUPPORT_TOKEN = "[No support / Contradictory]"
UTILITY_TOKENS = tuple(f"[Utility:{i}]" for i in range(1, 6))
PARAGRAPH_OPEN = "<paragraph>"
PARAGRAPH_CLOSE = "</paragraph>"

# The prompt format the Self-RAG models were fine-tuned on (Alpaca style).
INSTRUCTION_FORMAT = "### Instruction:\n{instruction}\n\n### Response:\n"

# End-of-sequence markers as different servers render them.
EOS_TOKENS = ("</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>")

# Canonical labels of each group, in a fixed order.
RETRIEVE_LABELS = ("yes", "no", "continue")
RELEVANCE_LABELS = ("relevant", "irrelevant")
SUPPORT_LABELS = ("fully", "partially", "no")
UTILITY_LABELS = ("1", "2", "3", "4", "5")
FINAL_LABELS = ("yes", "no")

_STRIP = " \t\r\n*_\"'`[](){}<>:.,;!?-"


def normalise_word(token: str) -> str:
    """A token as a candidate label word: no surrounding spaces, quotes, brackets or punctuation; lower case."""
    return token.strip(_STRIP).lower()


@dataclass(frozen=True)
class TokenGroup:
    """The alternatives of one critique and how tokens map onto their labels.

    ``exact`` groups (the reflection tokens) match a token's stripped text
    exactly. Word groups match any surface form of a label word: case, leading
    spaces and punctuation are ignored, and a token that is the first part
    (two characters or more) of exactly one label of the group counts for that
    label, because tokenizers split words ("Irrelevant" -> "Ir" + "relevant").
    """

    name: str
    labels: tuple[str, ...]
    surface: Mapping[str, str] = field(default_factory=dict)  # exact token -> label
    exact: bool = False

    def label_of(self, token: str) -> str | None:
        if self.exact:
            return self.surface.get(token.strip())
        word = normalise_word(token)
        if not word:
            return None
        if word in self.labels:
            return word
        if len(word) < 2:
            return None
        matches = [label for label in self.labels if label.startswith(word)]
        return matches[0] if len(matches) == 1 else None

    def tokens(self) -> tuple[str, ...]:
        """The reflection tokens of an exact group, in label order."""
        by_label = {label: tok for tok, label in self.surface.items()}
        return tuple(by_label[label] for label in self.labels if label in by_label)


def _exact(name: str, pairs: Sequence[tuple[str, str]]) -> TokenGroup:
    return TokenGroup(name, tuple(label for _, label in pairs), dict(pairs), exact=True)


# Groups of the fine-tuned models' special tokens.
REFLECTION_GROUPS: dict[str, TokenGroup] = {
    "retrieve": _exact("retrieve", [(RETRIEVAL_TOKEN, "yes"), (NO_RETRIEVAL_TOKEN, "no"), (CONTINUE_TOKEN, "continue")]),
    "relevance": _exact("relevance", [(RELEVANT_TOKEN, "relevant"), (IRRELEVANT_TOKEN, "irrelevant")]),
    "support": _exact(
        "support",
        [(FULLY_SUPPORTED_TOKEN, "fully"), (PARTIALLY_SUPPORTED_TOKEN, "partially"), (NO_SUPPORT_TOKEN, "no")],
    ),
    "utility": _exact("utility", [(tok, str(i)) for i, tok in enumerate(UTILITY_TOKENS, start=1)]),
}

# Groups of label words for instruction models.
LABEL_GROUPS: dict[str, TokenGroup] = {
    "retrieve": TokenGroup("retrieve", RETRIEVE_LABELS),
    "relevance": TokenGroup("relevance", RELEVANCE_LABELS),
    "support": TokenGroup("support", SUPPORT_LABELS),
    "utility": TokenGroup("utility", UTILITY_LABELS),
    "final": TokenGroup("final", FINAL_LABELS),
}

ALL_REFLECTION_TOKENS = frozenset(tok for group in REFLECTION_GROUPS.values() for tok in group.surface)


# Bracketed markers of selfrag's own protocols: the reflection tokens and the
# [IsRel] / [IsSup] / [IsUse] critique tags, however spaced or cased.
_MARKER = re.compile(
    r"\[(\s*(?:is\s*_?\s*(?:rel|sup|use)|retrieval|no\s+retrieval|continue\s+to\s+use\s+evidence|"
    r"relevant|irrelevant|fully\s+supported|partially\s+supported|no\s+support[^\]]{0,20}|"
    r"utility\s*:\s*\d)\s*)\]",
    re.IGNORECASE,
)
# A critique tag in parentheses: the neutral form, which the critique parsers
# (selfrag.reflection.parse) read as a quote, never as a verdict.
QUOTED_TAG = r"\(\s*is\s*_?\s*(?:rel|sup|use)\s*\)"
# A critique tag without brackets ("IsSup: fully supported"), as small models write
# their own verdicts and as a passage can plant one.
BARE_TAG = r"\bis_?(?:rel|sup|use)\b"
_NEUTRAL = re.compile(
    f"(?P<marker>{_MARKER.pattern})|(?P<quoted>{QUOTED_TAG})|(?P<bare>{BARE_TAG})", re.IGNORECASE
)
_PASSES = 8
_INSTRUCTION_MARK = re.compile(r"^(\s*)###(?=\s*(?:instruction|response)\s*:)", re.IGNORECASE | re.MULTILINE)


def _neutral(match: re.Match[str]) -> str:
    if match.group("marker") is not None:
        return f"({match.group(2)})"
    if match.group("quoted") is not None:
        return match.group()
    return f"({match.group()})"


def neutralize(text: str) -> str:
    """Untrusted text (a passage, a question) with selfrag's own markers defanged.

    ``[Relevant]`` becomes ``(Relevant)``, ``[IsSup]`` and a bare ``IsSup``
    become ``(IsSup)``, a ``<document>`` or ``<paragraph>`` tag in any case or
    spacing becomes ``(document)`` (:func:`defang_tag`), and a line starting
    ``### Response:`` loses its hashes,
    so text planted in a passage can neither become a reflection token of a
    fine-tuned model nor be read back as a critique verdict when the model
    quotes it: the parsers take a parenthesised tag for a quote. Ordinary text
    is unchanged, and neutralised text is left as it is (applying this twice is
    applying it once), so a question neutralised where it enters a prompt may
    be neutralised again inside an instruction.
    """
    # Block delimiters of selfrag's prompts: a question or a passage cannot open or end a block.
    text = defang_tag(defang_tag(text, "document"), "paragraph")
    # One pass can leave a marker for the next ("[no support IsSup]" -> "(no support IsSup)"):
    # repeat until nothing changes. Each pass only removes brackets and hashes or wraps a bare
    # tag once, so a few passes reach the end; the bound keeps hostile text linear.
    for _ in range(_PASSES):
        done = _INSTRUCTION_MARK.sub(r"\1", _NEUTRAL.sub(_neutral, text))
        if done == text:
            break
        text = done
    return text


def defang_tag(text: str, name: str) -> str:
    """``text`` with every ``<name ...>`` / ``</name>`` tag, in any case and spacing, put in parentheses.

    ``</DOCUMENT >``, ``< /document>``, ``<Document index="9">``, a ``<document``
    without its ``>`` and full-width ``\uff1c/document\uff1e`` all become ``(/DOCUMENT )``,
    ``( /document)``, ... so text in a
    block can neither end it early nor open another; the parenthesised form is no tag
    (applying this twice changes nothing). Other text is unchanged.
    """
    pattern = _TAG_PATTERNS.get(name)
    if pattern is None:
        pattern = _TAG_PATTERNS[name] = re.compile(
            rf"{_LT}(?P<tag>\s*[/\uff0f]?\s*{re.escape(name)}\b)(?P<rest>[^<>\uff1c\uff1e]{{0,200}}{_GT})?",
            re.IGNORECASE,
        )
    return pattern.sub(_parenthesised, text)


_TAG_PATTERNS: dict[str, re.Pattern[str]] = {}
# "<" and ">" and their full-width and small forms, which a model reads alike.
_LT, _GT = "[<\uff1c\ufe64]", "[>\uff1e\ufe65]"


def _parenthesised(match: re.Match[str]) -> str:
    rest = match.group("rest")
    return f"({match.group('tag')}{rest[:-1]})" if rest is not None else f"({match.group('tag')})"


def instruction_prompt(instruction: str) -> str:
    """``### Instruction:\\n{instruction}\\n\\n### Response:\\n`` (the instruction neutralized)."""
    return INSTRUCTION_FORMAT.format(instruction=neutralize(instruction))


def paragraph(doc: Document) -> str:
    """A passage as the fine-tuned models saw them: ``<paragraph>{title}\\n{text}</paragraph>``.

    Paragraph tags (any case or spacing: ``</PARAGRAPH >``) and reflection markers
    inside the passage are neutralised, so the passage can neither end its own block
    early nor plant a reflection token.
    """
    body = f"{doc.title}\n{doc.text}" if doc.title else doc.text
    return f"{PARAGRAPH_OPEN}{neutralize(body)}{PARAGRAPH_CLOSE}"


def strip_reflection_tokens(text: str) -> str:
    """Remove reflection tokens, paragraph tags and end-of-sequence markers from model output."""
    for tok in (*ALL_REFLECTION_TOKENS, PARAGRAPH_OPEN, PARAGRAPH_CLOSE, *EOS_TOKENS):
        text = text.replace(tok, "")
    return " ".join(text.split())


@dataclass(frozen=True)
class ReflectionOutput:
    """A fine-tuned model's output split into its content and its reflection tokens.

    ``tops`` holds, for each group, the top log-probabilities at the first
    position where the model wrote a token of that group (relevance falls back
    to the first position, where the paper reads it). ``labels`` holds the
    tokens' labels as written. ``boundary`` is the token that ended the segment
    (a retrieval token or a new paragraph), ``None`` when the output ran to its
    end; ``ended`` says an end-of-sequence token was seen. ``token_logprobs``
    are the log-probabilities of the generated tokens before the boundary
    (content and reflection tokens, as the paper's sequence score uses them).
    """

    text: str
    labels: dict[str, str]
    tops: dict[str, dict[str, float]]
    boundary: str | None
    token_logprobs: tuple[float, ...]
    ended: bool = False


def _group_of(token: str) -> tuple[str, str] | None:
    for name, group in REFLECTION_GROUPS.items():
        label = group.label_of(token)
        if label is not None:
            return name, label
    return None


def parse_reflection_positions(positions: Sequence[TokenLogprobs]) -> ReflectionOutput:
    """Split generated positions (with their top log-probabilities) into content and critique.

    A retrieval token or a ``<paragraph>`` after some content ends the segment;
    an end-of-sequence token ends the output.
    """
    parts: list[str] = []
    labels: dict[str, str] = {}
    tops: dict[str, dict[str, float]] = {}
    logprobs: list[float] = []
    boundary = None
    ended = False
    for pos in positions:
        token = pos.token
        stripped = token.strip()
        if stripped in EOS_TOKENS:
            ended = True
            break
        found = _group_of(token)
        started = bool("".join(parts).strip())
        if (found and found[0] == "retrieve" and (started or labels)) or stripped == PARAGRAPH_OPEN:
            boundary = stripped
            break
        logprobs.append(pos.logprob)
        if found is None:
            parts.append(token)
            continue
        name, label = found
        if name not in labels:
            labels[name] = label
            tops[name] = dict(pos.top)
    if "relevance" not in tops and positions:
        tops["relevance"] = dict(positions[0].top)
    return ReflectionOutput(
        text=strip_reflection_tokens("".join(parts)),
        labels=labels,
        tops=tops,
        boundary=boundary,
        token_logprobs=tuple(logprobs),
        ended=ended,
    )


def parse_reflection_text(text: str) -> ReflectionOutput:
    """The same split from text alone (a backend that returns no log-probabilities).

    Only the tokens the server rendered into the text can be found.
    """
    labels: dict[str, str] = {}
    boundary = None
    ended = False
    cut = len(text)
    first_content = None
    i = 0
    while i < len(text):
        hit = None
        for tok in (*ALL_REFLECTION_TOKENS, PARAGRAPH_OPEN, *EOS_TOKENS):
            if text.startswith(tok, i):
                hit = tok
                break
        if hit is None:
            if first_content is None and not text[i].isspace():
                first_content = i
            i += 1
            continue
        if hit in EOS_TOKENS:
            cut, ended = i, True
            break
        found = _group_of(hit)
        if hit == PARAGRAPH_OPEN or (found and found[0] == "retrieve" and (first_content is not None or labels)):
            boundary, cut = hit, i
            break
        if found and found[0] not in labels:
            labels[found[0]] = found[1]
        i += len(hit)
    return ReflectionOutput(
        text=strip_reflection_tokens(text[:cut]),
        labels=labels,
        tops={},
        boundary=boundary,
        token_logprobs=(),
        ended=ended,
    )


def find_label(text: str, group: TokenGroup) -> str | None:
    """The first label of ``group`` written in ``text`` (a text critique, read without probabilities).

    Exact groups look for their reflection tokens; word groups take the first
    word that is a whole label word ("Relevant.", "**yes**", "4/5").
    """
    if group.exact:
        hits = [(text.find(tok), label) for tok, label in group.surface.items() if tok in text]
        return min(hits)[1] if hits else None
    for raw in text.replace("/", " ").split():
        word = normalise_word(raw)
        if word in group.labels:
            return word
    return None
