"""The benchmark's storage comparison (part `s3`): the same figures on local disk and on the local
S3 server, in one run and one Spark session, so that their ratio is that of the storage alone:
- the median 2,000-event micro-batch (one file pair per batch; local, S3, S3, local);
- latency at 1,000 events/s (bench_latency): a file pair lands when its second PUT has completed;
- the throughput of `stream --available-now` over the plan's backlog (2M events in the full plan:
  the longest part on S3, hence its progress lines).

The server is `market-spread object-store` (s3proxy, filesystem backend) on a free loopback port,
its data in the work folder; the S3 runs write under s3://BUCKET/bench-XXXXXXXX/, their lakes
under the lease the stream command takes on S3. The local and the S3 run of each figure follow
each other (the median batch's in the order local, S3, S3, local), so that other load on the
machine falls on both alike.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from market_spread.feeds.broker import free_port
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.runtime.storage import Location, S3Config, location
from market_spread_tools.bench_latency import file_latency
from market_spread_tools.bench_measure import bench_symbols, plan_backlog, run_stream, say
from market_spread_tools.bench_plans import Plan

BUCKET = "market-spread"
RATE = 1_000  # events/s of the latency run (the S3 target's rate)
READY = "market-spread object-store: ready on "
# The server's keys for this run only: it listens on loopback and is gone when the part ends.
ACCESS_KEY, SECRET_KEY, REGION = "market-spread-bench", "market-spread-bench-secret", "us-east-1"


def s3_unavailable() -> str | None:
    """None when the S3 server's and Spark's S3A JARs are there, else why the part is skipped (the
    product's own look-ups: the part is skipped exactly when `object-store` or an s3:// lake would fail)."""
    from market_spread.errors import UsageError
    from market_spread.feeds.object_store import s3proxy_jar
    from market_spread.runtime.spark import s3_jars

    try:
        s3proxy_jar()
        s3_jars()
    except (UsageError, SystemExit) as exc:
        return str(exc)
    return None


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (the server stops s3proxy), then the whole group killed should anything be left."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


@contextmanager
def object_store(folder: Path, bucket: str = BUCKET, timeout: float = 120.0) -> Iterator[S3Config]:
    """`market-spread object-store` over FOLDER/data on a free loopback port; inside, this process's
    AWS variables point at it (boto3 and delta-rs read them at each use); stopped after."""
    folder.mkdir(parents=True, exist_ok=True)
    endpoint = f"http://127.0.0.1:{free_port()}"
    config = S3Config(endpoint, ACCESS_KEY, SECRET_KEY, REGION)
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
    }
    log = folder / "object-store.out"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "market_spread.cli.main",
                "object-store",
                "--port",
                endpoint.rsplit(":", 1)[1],
                "--data",
                str(folder / "data"),
                "--bucket",
                bucket,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    before = {name: os.environ.get(name) for name in env}
    try:
        deadline = time.monotonic() + timeout
        while READY not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"market-spread object-store did not report ready:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        os.environ.update(env)
        yield config
    finally:
        for name, earlier in before.items():
            if earlier is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = earlier
        _stop(process)


@contextmanager
def s3a_settings(spark, config: S3Config) -> Iterator[None]:
    """The session's S3A settings pointed at `config` (what build_session sets from the AWS
    variables, set here on a session already running); the earlier values are back after."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {key.removeprefix("spark.hadoop."): setting for key, setting in config.hadoop_conf().items()}
    before = {key: hadoop.get(key) for key in settings}
    # The session's SQL conf wins over the base Hadoop configuration where both set a key: set both.
    session_before = {key: spark.conf.get(key, None) for key in settings}
    for key, setting in settings.items():
        hadoop.set(key, setting)
        spark.conf.set(key, setting)
    try:
        yield
    finally:
        for key, earlier in before.items():
            hadoop.unset(key) if earlier is None else hadoop.set(key, earlier)
        for key, earlier in session_before.items():
            spark.conf.unset(key) if earlier is None else spark.conf.set(key, earlier)


@contextmanager
def heartbeat(label: str, every: float = 30.0) -> Iterator[None]:
    """A line every `every` seconds while the block runs: a 2M-event batch on S3 takes minutes."""
    done, began = threading.Event(), time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            say(f"{label}: still running, {time.monotonic() - began:.0f}s")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def batch_times(spark, base: Location, batches: int, symbols: list[str]) -> list[float]:
    """The times of `batches` batches of one 2,000-event file pair each, the first left out (the
    query's start; in a new lake it also creates the tables), as the growth run measures them."""
    landing, lake = base / "landing", base / "lake"
    write_backlog(
        landing,
        Generator(symbols, seed=7, profile="wallaroo", wide_share=0.05),
        1_000 * batches,
        1_000 * batches,
        batches,
        "b",
    )
    durations: list[float] = []
    run_stream(spark, landing, lake, symbols, on_batch=lambda r: durations.append(r.seconds), max_files_per_batch=1)
    return durations[1:]


def median_batches(spark, places: dict[str, Location], batches: int, symbols: list[str]) -> dict[str, dict]:
    """The median batch of each storage, measured in the order local, S3, S3, local (half the
    batches each): load that drifts during the run falls on both alike, not on the one measured first."""
    times: dict[str, list[float]] = {name: [] for name in places}
    for i, name in enumerate(list(places) + list(places)[::-1]):
        times[name] += batch_times(spark, places[name] / f"batches-{i}", max(2, batches // 2 + 1), symbols)
    out = {
        name: {"median_batch_seconds": round(statistics.median(t), 3), "batches": len(t)} for name, t in times.items()
    }
    for name, figures in out.items():
        say(f"{name}: median 2,000-event batch {figures['median_batch_seconds']} s over {figures['batches']} batches")
    return out


def latency_at_rate(spark, base: Location, plan: Plan, symbols: list[str], label: str) -> dict:
    figures, latencies, behind = file_latency(spark, base, RATE, plan.rate_seconds, symbols)
    say(
        f"{label}: latency at {RATE:,}/s: p50 {figures['p50']} ms, p99 {figures['p99']} ms over "
        f"{len(latencies)} file pairs" + (f", {behind} behind" if behind else "")
    )
    return {**figures, "file_pairs": len(latencies), "files_behind": behind}


def backlog_throughput(spark, base: Location, plan: Plan, symbols: list[str], label: str) -> dict:
    """`stream --available-now` over the plan's backlog (as the throughput part's, in this process)."""
    landing, lake = base / "tp" / "landing", base / "tp" / "lake"
    began = time.perf_counter()
    plan_backlog(landing, plan, symbols)
    say(f"{label}: {plan.events:,} events in {plan.files} file pairs written in {time.perf_counter() - began:.0f}s")
    batches: list = []

    def on_batch(result) -> None:
        batches.append(result)
        say(
            f"{label}: batch {len(batches)}: {result.input_lines:,} events in {result.seconds:.1f}s, "
            f"{sum(b.input_lines for b in batches):,} of {plan.events:,}"
        )

    start = time.perf_counter()
    with heartbeat(f"{label} throughput"):
        run_stream(spark, landing, lake, symbols, on_batch=on_batch, max_files_per_batch=plan.files_per_batch)
    seconds = time.perf_counter() - start
    events = sum(b.input_lines for b in batches)
    say(f"{label}: throughput {events:,} events in {seconds:.1f}s = {events / seconds:,.0f} events/s")
    return {
        "events": events,
        "batches": len(batches),
        "seconds": round(seconds, 2),
        "events_per_s": round(events / seconds),
    }


def ratios(local: dict, s3: dict) -> dict:
    """S3 / local of each figure (for throughput below 1 means S3 is slower)."""

    def ratio(a, b):
        return round(a / b, 3) if a is not None and b else None

    return {
        "median_batch": ratio(s3["median_batch_seconds"], local["median_batch_seconds"]),
        "p99": ratio(s3["latency"]["p99"], local["latency"]["p99"]),
        "throughput": ratio(s3["throughput"]["events_per_s"], local["throughput"]["events_per_s"]),
    }


def storage_comparison(spark, work: Path, plan: Plan, bucket: str = BUCKET, warm_batches: int = 3) -> dict:
    """Every figure on local disk, then on the S3 server; the `storage` section of latest.json.
    `warm_batches`: an unmeasured local run first, so that local disk's figures (taken first) do
    not pay for a cold JIT that S3's do not."""
    symbols = bench_symbols(3_000)
    with object_store(work / "s3", bucket) as config, s3a_settings(spark, config):
        prefix = f"s3://{bucket}/bench-{uuid.uuid4().hex[:8]}"
        places: dict[str, Location] = {"local": work / "storage", "s3": location(prefix)}
        say(f"s3: server {config.endpoint}; local disk under {places['local']}, S3 under {prefix}")
        if warm_batches:
            say(f"s3: warm-up on local disk ({warm_batches} batches, not measured)")
            batch_times(spark, work / "storage-warm", warm_batches, symbols)
        out = median_batches(spark, places, plan.storage_batches, symbols)
        for name, base in places.items():
            out[name]["latency"] = latency_at_rate(spark, base, plan, symbols, name)
        # Unmeasured: the backlog warms what the small batches before left cold, and local disk,
        # measured first, paid for it (measured: docs/performance.md, row 'the
        # S3 part's backlog run as an unmeasured warm-up').
        backlog_throughput(
            spark,
            work / "storage-warm",
            replace(plan, events=min(plan.events, 400_000), files=max(2, plan.files // 5)),
            symbols,
            "warm-up",
        )
        for name, base in places.items():
            out[name]["throughput"] = backlog_throughput(spark, base, plan, symbols, name)
    result = {
        "endpoint": config.endpoint,
        "prefix": prefix,
        "rate": RATE,
        **out,
        "ratios": ratios(out["local"], out["s3"]),
    }
    say(f"s3: S3 / local: {result['ratios']}")
    return result
