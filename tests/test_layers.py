"""No module imports from a layer above its own (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "selfrag"


def layers() -> dict[str, int]:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    for number, names in re.findall(r"^(\d+)\. (.+)$", section, flags=re.MULTILINE):
        for name in names.split(","):
            out[name.strip()] = int(number)
    return out


def unit_of(module: str) -> str:
    """The layer unit of a dotted module under selfrag: its first component."""
    return module.split(".", 1)[0] if module else "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, target unit) of every import of a selfrag module in ``path``, at any depth."""
    rel = path.relative_to(SRC).with_suffix("")
    package = list(rel.parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                # "from . import x" at the top level names modules in its aliases
                targets = [target] if target else [alias.name for alias in node.names]
            elif node.module and node.module.startswith("selfrag"):
                targets = [node.module.removeprefix("selfrag").lstrip(".")]
            else:
                continue
            found += [(node.lineno, unit_of(t)) for t in targets]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("selfrag."):
                    found.append((node.lineno, unit_of(alias.name.removeprefix("selfrag."))))
    return found


def test_every_unit_has_a_layer():
    known = layers()
    units = {p.stem if p.parent == SRC else p.relative_to(SRC).parts[0] for p in SRC.rglob("*.py")}
    assert units - set(known) == set(), "add these to docs/architecture.md's layer list"


def test_no_module_imports_from_a_higher_layer():
    known = layers()
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for line, target in imports(path):
            if target in known and known[target] > known[own]:
                upward.append(f"{rel}:{line} ({own}, layer {known[own]}) imports {target} (layer {known[target]})")
    assert upward == []


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    # A self-check on a module of this package known to import relatively inside functions.
    found = {t for _, t in imports(SRC / "config.py")}
    assert "methods" in found and "errors" in found
