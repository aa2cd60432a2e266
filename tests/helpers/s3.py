"""A real S3 server for tests: `market-spread object-store` (s3proxy) on a free port.

with object_store(tmp_path_factory) as store:       # or the session fixture `object_store`
    lake = store.uri("lake")                          # s3://market-spread/lake-1a2b3c4d, fresh
    subprocess.run([...], env={**os.environ, **store.env})
    with store.environ():                             # in this process: location(), delta-rs, Spark
        ...
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from market_spread.feeds.broker import free_port
from market_spread.runtime.storage import S3Config, client
from tests.helpers.paths import ROOT
from tests.helpers.processes import stop

MARKET_SPREAD = ROOT / ".venv" / "bin" / "market-spread"
ACCESS_KEY, SECRET_KEY, REGION = "market-spread-test", "market-spread-test-secret", "us-east-1"
READY = "market-spread object-store: ready on "


@dataclass
class ObjectStore:
    """A running server: where it is, the variables that point a process at it, fresh prefixes."""

    endpoint: str  # http://127.0.0.1:PORT
    bucket: str  # market-spread
    data: Path  # the server's data folder (its top folders are the buckets)
    log: Path  # the command's output
    process: subprocess.Popen

    @property
    def env(self) -> dict[str, str]:
        """AWS_ENDPOINT_URL, the keys and AWS_REGION: merge into a child's environment."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }

    @property
    def config(self) -> S3Config:
        return S3Config(self.endpoint, ACCESS_KEY, SECRET_KEY, REGION)

    def client(self) -> Any:
        """A boto3 S3 client of this server (the product's own, runtime.storage)."""
        return client(self.config)

    def uri(self, prefix: str = "t") -> str:
        """`s3://BUCKET/PREFIX-XXXXXXXX`: a prefix no test has used yet on this server."""
        return f"s3://{self.bucket}/{prefix.strip('/')}-{uuid.uuid4().hex[:8]}"

    @contextmanager
    def environ(self) -> Iterator[None]:
        """Inside, this process's AWS variables point at the server (as `env` does a child's);
        the earlier values are back after. A Spark session reads them when it is built."""
        before = {name: os.environ.get(name) for name in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for name, earlier in before.items():
                if earlier is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = earlier


def start_object_store(
    data: Path, log: Path, port: int = 0, bucket: str = "market-spread", timeout: float = 90.0
) -> ObjectStore:
    """Start `market-spread object-store` in a session of its own; returns once it reported ready."""
    port = port or free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(MARKET_SPREAD), "object-store", "--port", str(port), "--data", str(data), "--bucket", bucket],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while READY not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process, signal.SIGTERM, timeout=10)
            raise RuntimeError(f"market-spread object-store did not report ready:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    return ObjectStore(endpoint, bucket, data, log, process)


@contextmanager
def object_store(tmp_path_factory: Any, bucket: str = "market-spread") -> Iterator[ObjectStore]:
    """A server over a new data folder for the block; stopped (SIGTERM, then the group killed) after."""
    base = Path(tmp_path_factory.mktemp("object-store"))
    store = start_object_store(base / "data", base / "object-store.out", bucket=bucket)
    try:
        yield store
    finally:
        stop(store.process, signal.SIGTERM, timeout=30)
