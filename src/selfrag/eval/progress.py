"""The progress bar of a run: done/total, running EM/F1, money spent, errors (tqdm on stderr)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)


class Progress:
    """A tqdm bar on stderr: done/total, running EM/F1, spent cost, errors."""

    def __init__(self, total: int, done: Sequence[dict[str, Any]], label: str, enabled: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, initial=len(done), desc=label, unit="q", file=sys.stderr,
            disable=not enabled, dynamic_ncols=True, leave=True,
        )
        self.em = self.f1 = self.cost = 0.0
        self.scored = self.errors = 0
        for rec in done:
            self._add(rec)
        self._show()

    def _add(self, rec: dict[str, Any]) -> None:
        if rec.get("error") is not None:
            self.errors += 1
            return
        metrics = rec.get("metrics") or {}
        self.scored += 1
        self.em += metrics.get("em", 0.0)
        self.f1 += metrics.get("f1", 0.0)
        self.cost += (rec.get("accounting") or {}).get("cost_usd", 0.0) or 0.0

    def _show(self) -> None:
        n = self.scored or 1
        text = f"EM {self.em / n:.3f} F1 {self.f1 / n:.3f} ${self.cost:.4f}"
        if self.errors:
            text += f" errors {self.errors}"
        self.bar.set_postfix_str(text, refresh=False)

    def update(self, rec: dict[str, Any]) -> None:
        self._add(rec)
        self._show()
        self.bar.update(1)

    def say(self, message: str) -> None:
        if self.bar.disable:
            log.warning(message)
        else:
            self.bar.write(f"selfrag: {message}", file=sys.stderr)

    def print(self, line: str) -> None:
        """A line on stdout (e.g. ``run --trace``), printed above the bar without breaking it."""
        self.bar.write(line, file=sys.stdout)

    def close(self) -> None:
        self.bar.close()
