"""The lake's tables as Airflow assets, for the DAG files: the chain the UI's asset views show is
market_spread_stream -> alerts -> market_spread_quality -> quality_results.

- `alerts`: the stream's alerts table. Its watcher (alerts_trigger.NewAlertsTrigger, in the
  triggerer) records an event when the stream commits alert rows; the quality DAG is scheduled on it.
- `quality_results`: validate's results table; validate's task records an event with the run's
  figures in its `extra` when it succeeds.

Built when the DAG files are parsed, from the environment only (MARKET_SPREAD_LAKE, no Variable
lookups, no I/O): a `file://` URI of the table's folder. An Airflow Variable market_spread_lake
moves the jobs to another lake but not these assets: set the environment variable instead.
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetWatcher

from market_spread.orchestration.alerts_trigger import NewAlertsTrigger
from market_spread.orchestration.quality_summary import RESULTS_TABLE
from market_spread.runtime.paths import project_home
from market_spread.runtime.settings import ENV_PREFIX, value
from market_spread.runtime.storage import Location, S3Path, location

ALERTS = "market_spread_alerts"
QUALITY_RESULTS = "market_spread_quality_results"
ALERTS_WATCHER = "market_spread_new_alerts"
QUALITY_DAG_ID = "market_spread_quality"
GROUP = "market-spread"


def table_path(table: str) -> Location:
    """The table's folder in the lake the environment names (relative: in the project home; an
    s3:// lake: its S3 location)."""
    lake = location(value(ENV_PREFIX + "LAKE"))  # a Path (`~` expanded) or an S3Path
    return (lake if isinstance(lake, S3Path) or lake.is_absolute() else project_home() / lake) / table


def _uri(path: Location) -> str:
    return path.uri("s3") if isinstance(path, S3Path) else path.as_uri()


def alerts_asset() -> Asset:
    """The alerts table with its watcher. Every DAG file that names this asset declares it whole
    (watcher included): Airflow keeps one definition per asset, so two must not differ."""
    path = table_path("alerts")
    trigger = NewAlertsTrigger(
        table=str(path),
        poll_seconds=value(ENV_PREFIX + "ALERTS_POLL_SECONDS"),
        throttle_seconds=value(ENV_PREFIX + "ALERTS_THROTTLE_SECONDS"),
        quality_dag_id=QUALITY_DAG_ID,
    )
    return Asset(ALERTS, uri=_uri(path), group=GROUP, watchers=[AssetWatcher(name=ALERTS_WATCHER, trigger=trigger)])


def quality_results_asset() -> Asset:
    """validate's results table: the quality DAG's outlet."""
    return Asset(QUALITY_RESULTS, uri=_uri(table_path(RESULTS_TABLE)), group=GROUP)
