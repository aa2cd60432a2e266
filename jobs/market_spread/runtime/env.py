"""Words and names shared by everything that reads MARKET_SPREAD_* settings from the environment
(the CLI's flags and the Airflow side's settings). Standard library only: the DAG files import it."""

from __future__ import annotations

ENV_PREFIX = "MARKET_SPREAD_"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})
