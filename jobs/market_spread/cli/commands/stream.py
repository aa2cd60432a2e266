"""`market-spread stream`: the streaming job over a landing folder (or Kafka topics) into a lake."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from market_spread.cli.commands import kafka
from market_spread.cli.options import PLACEMENTS, lake, master, place, required_place, symbols, thresholds, whole_number
from market_spread.cli.params import choice, env_command, number, options
from market_spread.domain.rules import Thresholds
from market_spread.sinks.topic_settings import alerts_topic
from market_spread.sources.kafka_source import kafka_settings

opt = options("stream")


@env_command("stream", exclusive=[("available_now", "interval")])
@opt("--landing", help="landing folder with quotes/ and orders/ (with --source files)")
@lake("stream")
@symbols("stream")
@opt("--checkpoint", help="streaming checkpoint folder (default: LAKE/_checkpoints/stream)")
@opt("--available-now", is_flag=True, help="process every file present, then exit 0")
@opt(
    "--interval",
    type=number(float),
    help="seconds between the starts of micro-batches when running continuously; default 0: a batch "
    "starts as soon as input waits (idle, the stream looks every MARKET_SPREAD_POLL_SECONDS, 0.25 s)",
)
@opt(
    "--max-files-per-batch",
    type=number(int),
    metavar="N",
    help="take at most N new files per feed in one micro-batch (default: all): bounds the size and "
    "memory of batches when catching up on a backlog",
)
@opt(
    "--archive",
    metavar="DIR",
    help="move each landing file here once its micro-batch is committed (Spark's cleanSource=archive), "
    "so the landing folder, and its listing at every trigger, stays small; each start also drops archived "
    "files from the file source's log in the checkpoint (default: leave files in place)",
)
@master("stream")
@opt(
    "--progress-every",
    type=whole_number(1),
    default=1,
    metavar="N",
    help="print one summary line per N batches (and at least every minute while batches run) instead of "
    "one per batch (default 1); per-batch figures are in the batch_metrics table",
)
@thresholds("stream")
@opt(
    "--placement",
    type=choice(*PLACEMENTS),
    default="auto",
    help="where a batch's checks run: in the driver process (driver), in Spark's tasks (executors), or "
    "chosen per batch by its size and the cluster's cores (auto, default); the results are the same",
)
@kafka.source("stream")
@opt(
    "--alerts-topic",
    metavar="TOPIC",
    help="also publish every alert to this Kafka topic at --bootstrap-servers, exactly once for "
    "read_committed consumers, whatever the input (the topic must exist: the stream never creates it)",
)
def command(**params) -> int:
    # Imported here: the stream job loads pyspark, which `market-spread --help` must not wait for.
    from market_spread.domain.symbols import load_symbols
    from market_spread.stream.job import run_stream
    from market_spread.stream.spec import StreamSpec

    kafka = kafka_settings(
        params["source"],
        params["bootstrap_servers"],
        params["quotes_topic"],
        params["orders_topic"],
        params["starting_offsets"],
        params["max_records_per_batch"],
    )
    code = run_stream(
        StreamSpec(
            lake=required_place(params["lake"], "--lake"),
            symbols=load_symbols(Path(params["symbols"])),
            landing=place(params["landing"]),
            checkpoint=place(params["checkpoint"]),
            available_now=params["available_now"],
            interval=params["interval"] or 0.0,
            max_files_per_batch=params["max_files_per_batch"],
            archive=place(params["archive"]),
            master=params["master"],
            progress_every=params["progress_every"],
            thresholds=Thresholds(params["max_spread"], params["max_spread_ratio"]),
            kafka=kafka,
            placement=params["placement"],
            alerts_topic=alerts_topic(params["alerts_topic"], params["bootstrap_servers"], kafka),
        )
    )
    # Everything is committed, settled and closed by now. The process ends here, without finalizing
    # the interpreter: delta-rs's and obstore's native threads may still drop Python objects then, and
    # CPython aborts the process (exit 134) after a clean stop.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
