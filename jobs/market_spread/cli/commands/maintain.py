"""`market-spread maintain`: compaction, VACUUM and quote retention on the lake's tables."""

from __future__ import annotations

from market_spread.cli.options import lake, master, ranged, required_place, whole_number
from market_spread.cli.params import env_command, options
from market_spread.lake.maintenance import DEFAULT_RETAIN_HOURS, MaintainSpec, maintain

opt = options("maintain")


@env_command("maintain")
@lake("maintain")
@opt(
    "--retain-hours",
    type=whole_number(1, "hours"),
    default=DEFAULT_RETAIN_HOURS,
    help=f"VACUUM keeps files removed less than this long ago (default {DEFAULT_RETAIN_HOURS} = 7 days)",
)
@opt(
    "--tables",
    multiple=True,
    metavar="TABLE...",
    callback=lambda _ctx, _param, given: given or None,
    help="only these tables (default: every product table present)",
)
@opt("--attempts", type=ranged(int, 1, 20), default=5, help="tries per operation on Delta write conflicts (default 5)")
@opt(
    "--quote-retention-days",
    type=whole_number(0, "days", " (0 keeps everything)"),
    default=0,
    metavar="N",
    help="delete quote history rows of days before today (UTC) minus N; 0 keeps everything (default 0)",
)
@master("maintain")
def command(
    lake: str,
    retain_hours: int,
    tables: tuple[str, ...] | None,
    attempts: int,
    quote_retention_days: int,
    master: str | None,
) -> int:
    return maintain(
        MaintainSpec(required_place(lake, "--lake"), retain_hours, tables, attempts, quote_retention_days, master)
    )
