"""`market-spread object-store`: an S3-compatible server (s3proxy) on 127.0.0.1 (or --host), in the foreground."""

from __future__ import annotations

from pathlib import Path

from market_spread.cli.params import env_command, number, options
from market_spread.feeds.object_store import DEFAULT_BUCKET, ObjectStoreSpec, run_object_store

# The variables' command part must be a valid name: MARKET_SPREAD_OBJECT_STORE_PORT, not OBJECT-STORE.
opt = options("object_store")


@env_command("object-store")
@opt("--port", type=number(int), default=9000, help="S3 port (default 9000)")
@opt(
    "--host",
    default="127.0.0.1",
    help="address to listen on (default 127.0.0.1, this machine only); another "
    "one, such as 0.0.0.0 in a container, exposes the store to every machine that reaches it",
)
@opt(
    "--data",
    default="data/s3",
    help="data folder: its top folders are the buckets, kept across restarts (default data/s3)",
)
@opt(
    "--bucket",
    "buckets",
    multiple=True,
    metavar="NAME...",
    callback=lambda _ctx, _param, given: given or None,
    help=f"buckets to create before reporting ready (default {DEFAULT_BUCKET})",
)
@opt("--heap", default="256m", help="JVM heap (default 256m)")
@opt("--ready-timeout", type=number(float), default=60.0, help="seconds to wait for the server and its buckets")
def command(port: int, host: str, data: str, buckets: list[str] | None, heap: str, ready_timeout: float) -> int:
    """Credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (unset: market-spread and
    market-spread-secret, printed at start)."""
    return run_object_store(
        ObjectStoreSpec(Path(data), port, tuple(buckets or (DEFAULT_BUCKET,)), heap, ready_timeout, host)
    )
