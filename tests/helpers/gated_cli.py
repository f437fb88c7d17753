"""The real ``selfrag`` CLI, with every scripted backend behind the delay wrapper and a gate.

Run as a script: ``python gated_cli.py run ...`` (same arguments as ``selfrag``).
Environment:

* ``GATE_DELAY``: seconds each call waits (the delay wrapper), default 0.
* ``GATE_LOG``: a file that gets one line per call: ``held`` when the call
  starts waiting at the gate, ``answered`` when the scripted backend has
  produced its answer (the call is paid). Appended and flushed at once, so it
  survives a SIGKILL.
* ``GATE_AFTER`` and ``GATE_FILE``: once ``GATE_AFTER`` calls have started,
  later calls wait until ``GATE_FILE`` exists. A test can then kill the
  process at a point where nothing else is happening.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from selfrag.cli.main import main
from selfrag.llm.delayed import DelayedBackend
from selfrag.llm.scripted import ScriptedBackend

DELAY = float(os.environ.get("GATE_DELAY", "0"))
AFTER = int(os.environ.get("GATE_AFTER", "-1"))
GATE = Path(os.environ["GATE_FILE"]) if os.environ.get("GATE_FILE") else None
LOG = Path(os.environ["GATE_LOG"]) if os.environ.get("GATE_LOG") else None


def _log(event: str) -> None:
    if LOG is not None:
        with LOG.open("a") as fh:
            fh.write(event + "\n")
            fh.flush()


class GatedDelay(DelayedBackend):
    """The delay wrapper, plus the gate and the log of paid calls."""

    started = 0

    async def generate_request(self, request):
        GatedDelay.started += 1
        if GATE is not None and GatedDelay.started > AFTER >= 0:
            _log("held")
            while not GATE.exists():
                await asyncio.sleep(0.02)
        gen = await super().generate_request(request)
        _log("answered")
        return gen


_from_file = ScriptedBackend.from_file.__func__


def _gated_from_file(cls, path):
    return GatedDelay(_from_file(cls, path), DELAY)


ScriptedBackend.from_file = classmethod(_gated_from_file)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
