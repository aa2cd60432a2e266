"""The S3 server of `make run STORAGE=s3`: `market-spread object-store` beside Airflow, with landing
and lake on it (the launcher's helper, as the Kafka broker is for SOURCE=kafka).

The server runs on a free loopback port (or S3_PORT) with its data in data/object-store, kept across
runs. The launcher's own environment, which Airflow and every job inherit, points at it: the AWS
variables and MARKET_SPREAD_LAKE / MARKET_SPREAD_LANDING as s3:// URIs. Data Docs stay local
(data/quality) so that the Airflow UI's plugin serves them.

Run as `python -m market_spread_tools.store_run`, not as `market-spread object-store`: the launcher
stops the CLI jobs first (the stream finishes its batch in flight, writing to this server) and this
server last, in its final sweep, like the broker.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from market_spread.feeds.broker import free_port, port_open
from market_spread.feeds.object_store import DEFAULT_ACCESS_KEY, DEFAULT_BUCKET, DEFAULT_SECRET_KEY
from market_spread_tools.settings import value

READY = "market-spread object-store: ready on "
# The variables of a real AWS account that would otherwise reach the local server's clients.
FOREIGN_AWS = ("AWS_SESSION_TOKEN", "AWS_PROFILE")


def storage_is_s3() -> bool:
    """`make run STORAGE=s3`; SettingError for a word other than local or s3."""
    return value("STORAGE") == "s3"


@dataclass(frozen=True)
class StorePlan:
    """Where the server of one run listens and keeps its data, and what points the run at it."""

    port: int
    data: Path
    log: Path
    bucket: str = DEFAULT_BUCKET

    @classmethod
    def for_project(cls, root: Path) -> "StorePlan":
        """S3_PORT or a free loopback port; data and log under root/data."""
        port = value("S3_PORT") or free_port()
        return cls(port, root / "data" / "object-store", root / "data" / "object-store.out")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def lake(self) -> str:
        return f"s3://{self.bucket}/lake"

    @property
    def landing(self) -> str:
        return f"s3://{self.bucket}/landing"

    def aws_env(self) -> dict[str, str]:
        """The AWS variables of this server. Its own keys, never a real account's: the server prints
        them, and the run must not write to AWS by mistake."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": DEFAULT_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": DEFAULT_SECRET_KEY,
            "AWS_REGION": value("AWS_REGION"),
        }

    def apply(self, env: MutableMapping[str, str]) -> None:
        """Point `env` (os.environ or a child's environment) at this server: the AWS variables, and
        landing and lake on it; Data Docs are left local."""
        for name in FOREIGN_AWS:
            env.pop(name, None)
        env.update(self.aws_env())
        env["MARKET_SPREAD_LAKE"] = self.lake  # registry: product
        env["MARKET_SPREAD_LANDING"] = self.landing  # registry: product

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "market_spread_tools.store_run",
            "--port",
            str(self.port),
            "--data",
            str(self.data),
            "--bucket",
            self.bucket,
        ]

    def sql_hint(self) -> str:
        """The command a person types to read the alerts of this run."""
        keys = " ".join(f"{k}={v}" for k, v in self.aws_env().items() if k != "AWS_REGION")
        return (
            f"{keys} .venv/bin/market-spread sql --lake {self.lake} "
            '"SELECT reason, count(*) FROM alerts GROUP BY reason"'
        )


def start_store(plan: StorePlan, env: dict[str, str], timeout: float = 90.0) -> subprocess.Popen:
    """Start the server in a session of its own (a Ctrl-C reaches only the launcher, which stops it
    last) and wait for its ready line; RuntimeError when it does not come."""
    if port_open(plan.port):
        raise RuntimeError(f"port {plan.port} on 127.0.0.1 is in use: stop what holds it or set S3_PORT")
    plan.log.parent.mkdir(parents=True, exist_ok=True)
    start = plan.log.stat().st_size if plan.log.exists() else 0
    with open(plan.log, "ab") as out:
        process = subprocess.Popen(
            plan.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while READY not in plan.log.read_bytes()[start:].decode("utf-8", "replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_store(process)
            tail = plan.log.read_bytes()[start:][-2000:].decode("utf-8", "replace")
            raise RuntimeError(f"the S3 server did not start on {plan.endpoint}:\n{tail}")
        time.sleep(0.2)
    return process


def stop_store(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM (the command stops s3proxy and exits), SIGKILL when it takes longer."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def main(argv: list[str]) -> int:
    """`market-spread object-store` through cli.main (its messages and exit codes), under a name
    the launcher's job stopper does not take for a job."""
    from market_spread.cli.main import main as cli_main

    return int(cli_main(["object-store", *argv]) or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
