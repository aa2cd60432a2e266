"""The errors the product's features raise for their callers to report.

The command-line layer turns them into a one-line message and exit code 2; the Airflow tasks let
them fail the task. Standard library only, and nothing of the package: every layer may import it.
"""
from __future__ import annotations


class UsageError(Exception):
    """A bad argument or setting found after parsing (a missing file, a malformed value): exit 2."""


class SettingError(UsageError):
    """An environment variable of the settings registry holds a value its type refuses."""
