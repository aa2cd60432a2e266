"""The stream's Prometheus metrics: counters of what its batches committed, histograms of batch time
and end-to-end latency, gauges of the last batch and of the input waiting; served on
`MARKET_SPREAD_METRICS_HOST:MARKET_SPREAD_METRICS_PORT/metrics` (127.0.0.1:9407; port 0: no endpoint).

Recorded from each batch's BatchResult after its commits (the `on_batch` callback): a few counter
increments on the batch's thread; everything that reads files, object storage or Kafka (latency,
backlog, the health record) runs on the sampler's own thread (observation.health_sampler). The counters
add up to `batch_metrics`: a replayed batch whose row an earlier run committed is not counted again.
"""

from __future__ import annotations

import errno
import sys
import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, ProcessCollector


class BatchResult(Protocol):
    """What a committed batch's result gives its metrics (stream.batch_run.BatchResult has it)."""

    batch_id: int
    seconds: float
    skipped: list[str]
    placement: str


PREFIX = "market_spread"
BATCH_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
LATENCY_SECONDS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)
WRITERS = ("delta-rs", "delta-spark")  # lake.protocol's writers, named here: metrics import no lake
# batch_metrics' counts, by BatchResult field: (metric name, help)
COUNTS = {
    "input_lines": (
        "input_lines_total",
        "Non-blank input lines taken by committed batches (batch_metrics.input_lines).",
    ),
    "quotes": ("quotes_total", "Valid quotes in committed batches (batch_metrics.quotes)."),
    "orders": ("orders_total", "Valid orders in committed batches (batch_metrics.orders)."),
    "alerts": ("alerts_total", "Alerts committed (batch_metrics.alerts)."),
    "quarantined": ("quarantined_lines_total", "Input lines sent to quarantine (batch_metrics.quarantined)."),
}


class StreamMetrics:
    """The stream's instruments in a registry of their own (the process's CPU and memory too)."""

    def __init__(self, source: str, alerts_topic: bool = False) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        r = self.registry
        self.batches = Counter(f"{PREFIX}_batches", "Micro-batches committed (batch_metrics rows).", registry=r)
        self.counts = {
            field: Counter(f"{PREFIX}_{name.removesuffix('_total')}", text, registry=r)
            for field, (name, text) in COUNTS.items()
        }
        self.batch_seconds = Histogram(
            f"{PREFIX}_batch_duration_seconds",
            "A micro-batch's own time, from its start to its last commit.",
            buckets=BATCH_SECONDS,
            registry=r,
        )
        self.latency = Histogram(
            f"{PREFIX}_end_to_end_latency_seconds",
            "From a landing file's modification time "
            "(or the timestamp of a batch's oldest Kafka record, per partition) to the commit of "
            "its batch; one observation per file or partition.",
            buckets=LATENCY_SECONDS,
            registry=r,
        )
        self.last_batch_id = Gauge(f"{PREFIX}_last_batch_id", "The id of the last committed batch.", registry=r)
        self.last_batch_time = Gauge(
            f"{PREFIX}_last_batch_timestamp_seconds", "Unix time the last batch committed.", registry=r
        )
        self.backlog_files = Gauge(
            f"{PREFIX}_backlog_files",
            "Landing files not yet committed by a batch (source files).",
            ["feed"],
            registry=r,
        )
        self.kafka_lag = Gauge(
            f"{PREFIX}_kafka_lag_records",
            "Kafka records past the offsets of the last committed batch (source kafka).",
            ["topic"],
            registry=r,
        )
        self.waiting = Gauge(
            f"{PREFIX}_input_waiting_seconds",
            "Age of the oldest input not yet committed by a batch "
            "(0 when none waits): a stall shows as a growing value.",
            registry=r,
        )
        self.table_writer = Gauge(
            f"{PREFIX}_table_writer",
            "1 for the library each table's commits go through now (delta-rs, or delta-spark for a "
            "feature delta-rs cannot write), 0 for the other.",
            ["table", "writer"],
            registry=r,
        )
        self.placed = Counter(
            f"{PREFIX}_batches_placed",
            "Micro-batches by where their kernel ran: driver or executors (why: batch_metrics.placement).",
            ["placement"],
            registry=r,
        )
        # With --alerts-topic only (sinks.alerts_topic): the publisher's lag behind the alerts table.
        self.unpublished = (
            Gauge(
                f"{PREFIX}_alerts_unpublished",
                "Alert rows committed to the alerts table and not yet published to the alerts topic.",
                registry=r,
            )
            if alerts_topic
            else None
        )
        self.started = Gauge(
            f"{PREFIX}_stream_start_time_seconds", "Unix time this stream process started.", registry=r
        )
        self.started.set(time.time())
        Info(f"{PREFIX}_stream", "The stream's source.", registry=r).info({"source": source})

    def record(self, result: BatchResult, committed_at: float) -> bool:
        """Count a committed batch; False (nothing counted) for a replay whose batch_metrics row an
        earlier run already committed."""
        if "batch_metrics" in result.skipped:
            return False
        self.batches.inc()
        for field, counter in self.counts.items():
            counter.inc(int(getattr(result, field, 0) or 0))
        self.batch_seconds.observe(float(result.seconds))
        self.last_batch_id.set(result.batch_id)
        self.last_batch_time.set(committed_at)
        self.placed.labels(result.placement.split(":")[0]).inc()
        for table, (writer, _why) in getattr(result, "writers", {}).items():
            for library in WRITERS:
                self.table_writer.labels(table, library).set(1 if library == writer else 0)
        return True


def off_reason(host: str, port: int, exc: OSError) -> str:
    """Why there is no endpoint on `host:port`, with what to do: for the warning and the Stream page."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} in use: set MARKET_SPREAD_METRICS_PORT"
    return f"{host}:{port}: {(exc.strerror or str(exc)).lower()}: set MARKET_SPREAD_METRICS_HOST or _PORT"


def serve(metrics: StreamMetrics, host: str, port: int, out: Callable[[str], None] | None = None):
    """Start the /metrics endpoint (a daemon thread). Returns (the server, its URL) or (None, why
    there is none) when the port is 0 or cannot be bound (said in one line: metrics are never a
    reason not to run the stream)."""
    say = out or (lambda line: print(line, file=sys.stderr, flush=True))
    if not port:
        return None, "off (MARKET_SPREAD_METRICS_PORT=0)"
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        reason = off_reason(host, port, exc)
        say(f"market-spread stream: warning: no metrics endpoint: {reason} (port 0 turns it off)")
        return None, f"none: {reason}"
    url = f"http://{host}:{server.server_port}/metrics"
    print(f"market-spread stream: metrics at {url}", flush=True)
    return server, url
