"""Progress output of a long-running stream: one summary line per N batches (`stream --progress-every`)."""

from __future__ import annotations

import threading
from typing import Any


class ProgressSummary:
    """on_batch for a long-running stream: one line per `every` batches, or sooner when `max_seconds`
    have passed since the first batch not yet reported (also when no batch follows: a timer), so a
    supervisor's log stays bounded yet sees every batch within a minute (its stall check needs it).

    The line keeps the per-batch line's shape (`batch N: ... in S.SSs`, the newest batch's id and
    time) so the Airflow health check reads both.
    """

    last: Any  # the newest batch's result (None before the first)

    def __init__(self, every: int, max_seconds: float = 60.0, out=None) -> None:
        self.every, self.max_seconds = every, max_seconds
        self.out = out or (lambda line: print(line, flush=True))
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._reset()

    def _reset(self) -> None:
        self.count, self.first, self.last, self.seconds = 0, None, None, 0.0
        self.totals = {"lines": 0, "quotes": 0, "orders": 0, "alerts": 0, "quarantined": 0}

    def __call__(self, result) -> None:
        with self._lock:
            self.count += 1
            self.first = result.batch_id if self.first is None else self.first
            self.last, self.seconds = result, float(getattr(result, "seconds", 0.0))
            self.totals["lines"] += int(getattr(result, "input_lines", 0))
            for key in ("quotes", "orders", "alerts", "quarantined"):
                self.totals[key] += int(getattr(result, key, 0))
            due = self.count >= self.every or self.max_seconds <= 0
            if not due and self._timer is None:
                self._timer = threading.Timer(self.max_seconds, self.flush)
                self._timer.daemon = True
                self._timer.start()
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self.count:
                return
            t = self.totals
            line = (
                f"batch {self.last.batch_id}: {self.count} batches ({self.first}-{self.last.batch_id}): "
                f"{t['lines']} lines, {t['quotes']} quotes, {t['orders']} orders, {t['alerts']} alerts, "
                f"{t['quarantined']} quarantined; last in {self.seconds:.2f}s"
            )
            self._reset()
        self.out(line)
