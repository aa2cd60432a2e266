"""What the local servers (`broker`, `object-store`) share: running one in the foreground."""

from __future__ import annotations

import signal
import subprocess


def forward_stop_signals(process: subprocess.Popen, prog: str) -> list[int]:
    """On SIGINT/SIGTERM, say so once and pass SIGTERM on to the server `process` (it shuts down
    cleanly); returns the list of signals received, which grows as they come."""
    stopping: list[int] = []

    def stop(signum, _frame):
        if not stopping:
            print(f"{prog}: {signal.Signals(signum).name}: shutting down", flush=True)
        stopping.append(signum)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    return stopping
