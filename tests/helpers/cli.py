"""`market-spread` as a child process: how the tests run the command the way a user does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# The module, not the console script: the child runs this interpreter and this checkout's code.
CLI = [sys.executable, "-m", "market_spread.cli.main"]


def market_spread(
    *args: str, timeout: float | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run `market-spread ARGS` to its end (in `cwd`, with `env` if given); its output captured as text."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
