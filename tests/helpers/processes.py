"""Stopping a child the tests started in a session of its own (start_new_session=True)."""

from __future__ import annotations

import os
import signal
import subprocess


def stop(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 300) -> None:
    """`sig` as a user would send it, then its whole process group killed if it has not exited
    within `timeout` s."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
