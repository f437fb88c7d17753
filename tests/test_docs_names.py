"""Every module, name and source file the docs mention exists: a doc that names a module the code no
longer has is caught here, not by a reader."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "selfrag"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "lab" / "README.md"]
DOTTED = re.compile(r"`(selfrag(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")
PATH = re.compile(r"`((?:src/)?(?:selfrag/)?[a-z_]+(?:/[A-Za-z0-9_]+)*\.(?:py|txt|json))`")
# What the docs name in this form that is not code: JSON fields of a reply, placeholders of a pattern.
NOT_CODE = {"selfrag.details.followup", "selfrag.used_documents", "selfrag.without_documents", "selfrag.x._y"}
PLACEHOLDERS = ("NAME",)
PACKAGES = {p.stem for p in SRC.iterdir() if p.is_dir() or p.suffix == ".py"}


def resolves(dotted: str) -> bool:
    """``selfrag.a.b.name``: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def mentioned() -> list[tuple[str, str, str]]:
    """(doc, kind, name) for every dotted selfrag name and every source path the docs put in backticks."""
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        out += [(doc.name, "name", m.group(1)) for m in DOTTED.finditer(text) if m.group(1) not in NOT_CODE]
        for m in PATH.finditer(text):
            path = m.group(1).removeprefix("src/").removeprefix("selfrag/")
            if path.split("/")[0].removesuffix(".py") in PACKAGES and not any(p in path for p in PLACEHOLDERS):
                out.append((doc.name, "path", path))
    return out


def test_the_docs_mention_code_at_all():
    kinds = {kind for _, kind, _ in mentioned()}
    assert kinds == {"name", "path"} and len(mentioned()) > 50


@pytest.mark.parametrize(("doc", "kind", "name"), sorted(set(mentioned())))
def test_each_name_the_docs_mention_exists(doc, kind, name):
    if kind == "name":
        assert resolves(name), f"{doc} names {name}, which does not import"
    else:
        assert (SRC / name).exists(), f"{doc} names {name}, which is not in src/selfrag"
