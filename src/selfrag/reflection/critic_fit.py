"""A fitted critic: one model's reflection heads, its sufficiency threshold, and what it was fitted on.

``selfrag critic fit`` writes one per model file (keyed by the file's SHA-256);
the fitted critic (``methods/critique/fitted.py``) reads its four heads:

* ``relevance``: P(a passage is one the answer needs), from the passage's
  evidence signals;
* ``support``: P(a candidate answer is right), from its likelihood as the reply
  to the answer prompt over the best-evidence passages;
* ``sufficiency``: P(the passages read hold the answer), from the answer's
  readings (and the hidden state at the end of the prompt, when fitted so);
* ``confidence``: P(the answer is right), from the same readings (and the
  hidden state at the answer's end).

``threshold`` is the sufficiency below which the answer's first line says the
documents do not seem to hold it, chosen on the fitting questions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .heads import Head

HEADS = ("relevance", "support", "sufficiency", "confidence")
FORMAT = 1
PACKAGED_DIR = "fits"
DEFAULT_FIT = "default.json"


@dataclass(frozen=True)
class CriticFit:
    heads: dict[str, Head]
    threshold: float
    model: str = ""
    sha256: str = ""
    layers: tuple[int, ...] = ()  # the hidden layers a head reads (asked for at the answer call)
    meta: dict[str, Any] = field(default_factory=dict)

    def head(self, name: str) -> Head | None:
        return self.heads.get(name)

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "model": self.model, "sha256": self.sha256, "threshold": self.threshold,
                "layers": list(self.layers), "meta": self.meta,
                "heads": {name: head.as_dict() for name, head in self.heads.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> CriticFit:
        try:
            if int(data.get("format", 0)) != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this selfrag reads {FORMAT}")
            heads = {name: Head.from_dict(h) for name, h in dict(data["heads"]).items() if name in HEADS}
            return cls(heads, float(data["threshold"]), str(data.get("model", "")), str(data.get("sha256", "")),
                       tuple(int(x) for x in data.get("layers", ())), dict(data.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: not readable as a fit ({exc})") from None

    @classmethod
    def read(cls, path: str | Path) -> CriticFit:
        file = Path(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"critic fit {file}: cannot be read ({exc.__class__.__name__})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"critic fit {file}: not readable as a fit (not a JSON object)")
        return cls.from_dict(data, f"critic fit {file}")

    def write(self, path: str | Path) -> None:
        """Write through a rename, so a kill leaves the old file or the new one."""
        file = Path(path)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(file.name + ".tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=1), encoding="utf-8")
        tmp.replace(file)


def packaged(name: str) -> CriticFit | None:
    """A fit shipped in the package (``reflection/fits/NAME``), None when there is none."""
    item = resources.files(__package__).joinpath(PACKAGED_DIR, name)
    if not item.is_file():
        return None
    return CriticFit.from_dict(json.loads(item.read_text(encoding="utf-8")), f"packaged {name}")
