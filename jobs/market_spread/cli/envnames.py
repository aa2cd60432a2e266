"""The flags' environment variable names, kept importable from the CLI; they live in runtime.envnames."""

from market_spread.runtime.envnames import AMBIGUOUS_FLAGS, env_name, env_names  # noqa: F401

__all__ = ["AMBIGUOUS_FLAGS", "env_name", "env_names"]
