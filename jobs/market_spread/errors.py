"""The errors the product raises for its callers to report: one family, each saying what to do.

The command-line layer turns a `UsageError` into a one-line message and exit code 2, any other
`MarketSpreadError` into a one-line message and exit code 1; the Airflow tasks let them fail the
task. Standard library only, and nothing of the package: every layer may import it.
"""

from __future__ import annotations


class MarketSpreadError(Exception):
    """Every error the product raises on purpose; its message says what the user can do."""


class UsageError(MarketSpreadError):
    """A bad argument or setting found after parsing (a missing file, a malformed value): exit 2."""


class SettingError(UsageError):
    """An environment variable of the settings registry holds a value its type refuses."""


DISK_FULL = (
    "no space left on device while writing the lake or its checkpoint; free some space and start the "
    "stream again: the interrupted batch is replayed, nothing is lost or doubled"
)


class DiskFull(MarketSpreadError):
    """The disk under the lake or the checkpoint is full: nothing to try again until space is freed."""

    def __init__(self, where: str = "") -> None:
        super().__init__(f"{where}: {DISK_FULL}" if where else DISK_FULL)
