"""The environment variable names of the CLI's flags (standard library only: the Airflow side reads
them to pass each job only the variables its command reads, without importing the CLI)."""

from __future__ import annotations

from market_spread.runtime.env import ENV_PREFIX

# Flags that mean different things in different commands (`generate --orders N` is a count,
# `replay --orders FILE...` a file list): only the command's own variable is read for them
# (MARKET_SPREAD_GENERATE_ORDERS, MARKET_SPREAD_REPLAY_ORDERS); the shared name is refused.
AMBIGUOUS_FLAGS = frozenset({"--orders"})


def env_name(flag: str, command: str | None = None) -> str:
    """MARKET_SPREAD_<FLAG>, or MARKET_SPREAD_<COMMAND>_<FLAG> for a command's own name."""
    stem = flag.lstrip("-").replace("-", "_").upper()
    return ENV_PREFIX + (f"{command.upper()}_" if command else "") + stem


def env_names(flag: str, command: str | None) -> list[str]:
    """The variables a flag is read from, first match wins: the command's own name, then the shared
    one unless the flag is ambiguous across commands."""
    names = [env_name(flag, command)] if command else []
    if not (command and flag in AMBIGUOUS_FLAGS):
        names.append(env_name(flag))
    return names
