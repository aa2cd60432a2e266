"""`market-spread object-store`: an S3-compatible server on 127.0.0.1 (or `--host`), in the foreground
(contract 3c).

s3proxy (`org.gaul:s3proxy`, its `jar-with-dependencies` build, fetched by `make setup` into
.cache/s3proxy) with its filesystem backend: the top folders of the data folder are the buckets, the
files under them the objects, so a restart on the same folder keeps them. From 4.0 it answers
`If-None-Match: *` (put-if-absent) atomically, which delta-rs' commits and the writer's lease rely
on. The buckets are created before the ready line; the credentials are the AWS variables', with
defaults printed at start so that a developer can copy them. Ctrl-C (or SIGTERM) stops it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from market_spread.errors import UsageError
from market_spread.feeds.broker import port_open
from market_spread.feeds.foreground import forward_stop_signals
from market_spread.runtime.settings import value

PROG = "market-spread object-store"
DEFAULT_BUCKET = "market-spread"
# When AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are unset: printed at start, for local use only.
DEFAULT_ACCESS_KEY = "market-spread"
DEFAULT_SECRET_KEY = "market-spread-secret"
# S3's bucket naming rules, the part every S3-compatible store enforces.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class ObjectStoreSpec:
    """One server: its data folder (the buckets are its top folders), its address and port."""

    data: Path = Path("data/s3")
    port: int = 9000
    buckets: tuple[str, ...] = field(default=(DEFAULT_BUCKET,))
    heap: str = "256m"
    ready_timeout: float = 60.0  # seconds to wait for the server to answer and the buckets to exist
    # The address it listens on: the loopback unless told otherwise (0.0.0.0 in a container, where
    # the other services reach it by its service name: that exposes the store to the network).
    host: str = "127.0.0.1"

    @property
    def local_endpoint(self) -> str:
        """Where this machine reaches it: a wildcard address is reached on the loopback."""
        return f"http://{_reachable(self.host)}:{self.port}"


def _reachable(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def credentials() -> tuple[str, str]:
    """The access key and secret the server accepts: the AWS variables', or the defaults."""
    return (value("AWS_ACCESS_KEY_ID") or DEFAULT_ACCESS_KEY, value("AWS_SECRET_ACCESS_KEY") or DEFAULT_SECRET_KEY)


def s3proxy_jar() -> str:
    """The s3proxy JAR `make setup` fetched; UsageError says what to do when it is missing."""
    # Imported here: runtime.spark loads pyspark, and `market-spread --help` imports this module.
    from market_spread.runtime.spark import MissingJars, cached_jars

    try:
        jars = cached_jars("MARKET_SPREAD_S3PROXY_JARS", "s3proxy", "s3proxy-", "s3proxy (the S3 server)")
    except MissingJars as exc:
        raise UsageError(str(exc)) from None
    return next(j for j in jars if Path(j).name.startswith("s3proxy-"))


def s3proxy_properties(endpoint: str, access_key: str, secret_key: str, data: Path) -> str:
    """s3proxy's configuration: signed requests only, the filesystem backend rooted at `data`."""
    props = {
        "s3proxy.endpoint": endpoint,
        "s3proxy.authorization": "aws-v2-or-v4",
        "s3proxy.identity": access_key,
        "s3proxy.credential": secret_key,
        "jclouds.provider": "filesystem",
        "jclouds.filesystem.basedir": str(data.resolve()),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def write_private(folder: Path, name: str, text: str) -> Path:
    """`text` in a file only this user can read (it holds the secret)."""
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def create_buckets(endpoint: str, access_key: str, secret_key: str, buckets: tuple[str, ...]) -> None:
    """Each bucket, unless this server already has it (a restart on the same data folder)."""
    from market_spread.runtime.storage import S3Config, client

    s3 = client(S3Config(endpoint, access_key, secret_key, value("AWS_REGION")))
    for bucket in buckets:
        try:
            s3.create_bucket(Bucket=bucket)
        except Exception as exc:  # noqa: BLE001 - botocore's ClientError, classified by its code
            if getattr(exc, "response", {}).get("Error", {}).get("Code") not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise


def wait_ready(spec: ObjectStoreSpec, endpoint: str, keys: tuple[str, str], process: subprocess.Popen) -> str | None:
    """None once the server answers and every bucket exists; else why not."""
    deadline = time.monotonic() + spec.ready_timeout
    last = "the port never opened"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"s3proxy exited with code {process.returncode}"
        if port_open(spec.port, _reachable(spec.host)):
            try:
                create_buckets(endpoint, *keys, spec.buckets)
                return None
            except Exception as exc:  # noqa: BLE001 - not serving yet (Jetty opens the port first)
                last = f"creating the buckets failed: {' '.join(str(exc).split())[:300]}"
        time.sleep(0.2)
    return f"not ready after {spec.ready_timeout:.0f}s ({last})"


def _check(spec: ObjectStoreSpec) -> None:
    """UsageError for a port, bucket name or data folder that cannot be used."""
    if not (0 < spec.port <= 65535):
        raise UsageError(f"--port must be a TCP port, got {spec.port}")
    for bucket in spec.buckets:
        if not BUCKET_NAME.match(bucket) or ".." in bucket:
            raise UsageError(
                f"--bucket {bucket!r} is not a valid S3 bucket name (3-63 characters: lower-case "
                "letters, digits, hyphens and dots)"
            )
    if spec.data.exists() and not spec.data.is_dir():
        raise UsageError(f"--data is not a folder: {spec.data}")


def run_object_store(spec: ObjectStoreSpec) -> int:
    """Run the server in the foreground until SIGINT/SIGTERM; the exit code (0 once stopped by a
    signal, 1 when it cannot start or s3proxy exits). UsageError for arguments that cannot be used
    or a missing JAR."""
    _check(spec)
    jar = s3proxy_jar()
    java = shutil.which("java")
    if java is None:
        print(
            f"{PROG}: error: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)",
            file=sys.stderr,
        )
        return 1
    if port_open(spec.port, _reachable(spec.host)):
        print(f"{PROG}: error: port {spec.port} on {spec.host} is already in use", file=sys.stderr)
        return 1
    spec.data.mkdir(parents=True, exist_ok=True)
    # s3proxy listens on the endpoint's address; the buckets are made through the reachable one.
    endpoint = f"http://{spec.host}:{spec.port}"
    keys = credentials()
    # The configuration holds the secret: in a private folder, never in the data folder (whose
    # top folders are buckets).
    private = Path(tempfile.mkdtemp(prefix="market-spread-s3proxy-"))
    try:
        config = write_private(private, "s3proxy.properties", s3proxy_properties(endpoint, *keys, spec.data))
        # The optimising JIT, as for a continuous stream: a server lives long, and its requests
        # are slower with the quick one (measured: docs/performance.md, row 'S3: a kept table
        # reopened by its versions').
        command = [
            java,
            f"-Xmx{spec.heap}",
            "-Xms32m",
            "-DLOG_LEVEL=warn",
            "-DJETTY_LOG_LEVEL=warn",
            # logback reports its own configuration on stdout when it has a warning about it
            "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener",
            "-jar",
            jar,
            "--properties",
            str(config),
        ]
        return _serve(spec, endpoint, keys, command)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _serve(spec: ObjectStoreSpec, endpoint: str, keys: tuple[str, str], command: list[str]) -> int:
    """Start s3proxy, report ready once the buckets exist, and wait for it or a signal."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    stopping = forward_stop_signals(process, PROG)
    shown = f"AWS_ACCESS_KEY_ID={keys[0]}, AWS_SECRET_ACCESS_KEY={keys[1]}"
    defaults = " (defaults: the variables are unset)" if not value("AWS_ACCESS_KEY_ID") else ""
    print(f"{PROG}: starting s3proxy on {endpoint} (data {spec.data}; {shown}{defaults})", flush=True)
    problem = wait_ready(spec, spec.local_endpoint, keys, process)
    if problem is None:
        print(f"{PROG}: ready on {endpoint} (buckets {', '.join(spec.buckets)}; {shown})", flush=True)
    elif process.poll() is None and not stopping:
        print(f"{PROG}: error: {problem}", file=sys.stderr, flush=True)
        process.terminate()
    try:
        code = process.wait()
    except KeyboardInterrupt:
        code = process.wait()
    if stopping:
        print(f"{PROG}: stopped", flush=True)
        return 0
    print(f"{PROG}: error: s3proxy exited with code {code}", file=sys.stderr)
    return 1
