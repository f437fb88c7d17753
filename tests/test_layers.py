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


def unit_of(module: str, known: dict[str, int] | None = None) -> str:
    """The layer unit of a dotted module under selfrag: the longest dotted prefix the layer list
    names (``methods.core``), else its first component."""
    if not module:
        return "__init__"
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        if known is not None and ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return parts[0]


def imports(path: Path, known: dict[str, int] | None = None, rel: Path | None = None) -> list[tuple[int, str]]:
    """(line, target unit) of every import of a selfrag module in ``path`` (at ``rel`` under selfrag), at any
    depth."""
    rel = (rel or path.relative_to(SRC)).with_suffix("")
    package = list(rel.parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                if node.module:
                    targets = [".".join([*base, *node.module.split(".")])]
                else:
                    # "from .. import x": x is a module of that package, or a name its __init__ defines
                    # (``from .. import __version__``: the package itself, the top-level one at the root).
                    targets = [".".join([*base, alias.name]) if _is_module(base, alias.name)
                               else ".".join(base) or "__init__" for alias in node.names]
            elif node.module and node.module.startswith("selfrag"):
                targets = [node.module.removeprefix("selfrag").lstrip(".")]
            else:
                continue
            found += [(node.lineno, unit_of(t, known)) for t in targets]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("selfrag."):
                    found.append((node.lineno, unit_of(alias.name.removeprefix("selfrag."), known)))
    return found


def _is_module(package: list[str], name: str) -> bool:
    where = SRC.joinpath(*package, name)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def own_unit(path: Path, known: dict[str, int]) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return unit_of(".".join(parts), known) if parts else "__init__"


def test_every_unit_has_a_layer():
    known = layers()
    units = {own_unit(p, known) for p in SRC.rglob("*.py")}
    assert units - set(known) == set(), "add these to docs/architecture.md's layer list"


def test_no_module_imports_from_a_higher_layer():
    known = layers()
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        own = own_unit(path, known)
        for line, target in imports(path, known):
            if target in known and known[target] > known[own]:
                upward.append(f"{rel}:{line} ({own}, layer {known[own]}) imports {target} (layer {known[target]})")
    assert upward == []


def test_the_layer_list_splits_methods_and_puts_serve_below_cli():
    known = layers()
    order = ["methods.core", "methods.steps", "methods.critique", "methods.catalog", "methods"]
    assert [known[u] for u in order] == sorted(known[u] for u in order) and len({known[u] for u in order}) == 5
    assert known["serve"] < known["cli"]


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    # A self-check on a module of this package known to import relatively inside functions.
    found = {t for _, t in imports(SRC / "config" / "files.py", layers())}
    assert any(t.startswith("methods") for t in found) and "errors" in found


def test_the_checker_sees_a_name_imported_from_a_package_init(tmp_path):
    """``from .. import __version__`` imports the package above (here the top-level one, the highest
    layer): it used to be read as a module named ``__version__`` and skipped."""
    probe = tmp_path / "probe.py"
    probe.write_text("from .. import __version__\nfrom ..reflection import tokens\nfrom .. import errors\n")
    found = sorted({t for _, t in imports(probe, layers(), rel=Path("cli") / "probe.py")})
    assert found == ["__init__", "errors", "reflection"]
