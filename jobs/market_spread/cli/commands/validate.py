"""`market-spread validate`: the Great Expectations suites on the lake, with Data Docs."""

from __future__ import annotations

from pathlib import Path

from market_spread.cli.options import lake, required_place, symbols, thresholds
from market_spread.cli.params import Converted, env_command, options
from market_spread.domain.rules import Thresholds
from market_spread.quality.defaults import DEFAULT_DOCS, DEFAULT_ORPHAN_GRACE_S

opt = options("validate")


def grace_seconds(text: str) -> float:
    """--orphan-grace-seconds: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be >= 0 seconds: {text!r}")
    return value


@env_command("validate")
@lake("validate")
@symbols("validate")
@opt("--docs", default=str(DEFAULT_DOCS), help="folder for the Data Docs site and GX files (default: data/quality)")
@opt("--full", is_flag=True, help="validate every alert, not only those since the last passing run")
@opt(
    "--orphan-grace-seconds",
    type=Converted(grace_seconds, "seconds"),
    default=DEFAULT_ORPHAN_GRACE_S,
    metavar="S",
    help="alerts of a batch with no batch_metrics row wait this long for it (a batch in flight), then are "
    f"validated and reported as orphans, failing the run (default {DEFAULT_ORPHAN_GRACE_S:g})",
)
@opt("--expectations", default=None, help="folder of alerts.json and symbol_state.json (default: expectations/)")
@thresholds("validate")
def command(**params) -> int:
    # Imported here: validation loads pyspark, which `market-spread --help` must not wait for.
    from market_spread.quality.command import ValidateSpec, run_validation
    from market_spread.quality.validate import ValidateOptions

    expectations = params["expectations"]
    options = ValidateOptions(
        docs=required_place(params["docs"], "--docs"),
        full=params["full"],
        thresholds=Thresholds(params["max_spread"], params["max_spread_ratio"]),
        expectations_dir=Path(expectations) if expectations is not None else None,
        orphan_grace_s=params["orphan_grace_seconds"],
    )
    return run_validation(ValidateSpec(required_place(params["lake"], "--lake"), Path(params["symbols"]), options))
