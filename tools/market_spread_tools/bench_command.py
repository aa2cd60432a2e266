"""`market-spread bench`: the benchmark, offered as a command where the developer tools are installed."""

from __future__ import annotations

import argparse

from market_spread.cli.params import env_command, options
from market_spread.runtime.paths import project_home
from market_spread_tools.bench_plans import PARTS

opt = options("bench")


@env_command("bench")
@opt(
    "--quick",
    is_flag=True,
    help="a smaller run: about 10 minutes on 2 cores (120k events, 2 rates, 20 batches, 2 symbol counts, local disk and S3)",
)
@opt("--out", default=None, help="results folder (default bench/results/quick or bench/results/full: the current runs)")
@opt("--work", default=str(project_home() / "bench" / "work"), help="scratch folder (deleted)")
@opt(
    "--growth-batches",
    type=int,
    default=None,
    help="stop the growth run after this many batches (full run: 10,000, several hours on 2 cores)",
)
@opt("--only", help=f"comma-separated parts: {','.join(PARTS)}")
def command(**params) -> int:
    from market_spread_tools.bench import run

    if params["out"] is None:
        params["out"] = str(project_home() / "bench" / "results" / ("quick" if params["quick"] else "full"))
    return run(argparse.Namespace(**params))
