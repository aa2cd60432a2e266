"""`market-spread replay`: Wallaroo's fixish frames and FIX text files -> landing files.

Every `--nbbo` file becomes `DIR/quotes/*.jsonl`, every `--orders` file `DIR/orders/*.jsonl`
(quote files first, so quotes land no later than the orders they should affect). Output goes out
in chunks of `--records-per-file` lines, each written aside under a dot name, fsynced and renamed
in. Names `replay-<UTC stamp>-<input #>-<chunk #>-<input stem>.jsonl` sort in landing order and
never collide with an earlier replay. `seq` is the record's position in its input file.

Bad frames and lines are reported (file:offset) and skipped; `--strict` checks every input first
and writes nothing unless all of them decode cleanly.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from market_spread.domain.wallaroo_files import decode_file
from market_spread.domain.wallaroo_records import DecodeError, Kind, Order, Quote, StrictDecodeError, decimal_text
from market_spread.errors import UsageError
from market_spread.feeds.producer import KafkaSink, KafkaTarget, open_sink
from market_spread.runtime.storage import Location, S3Path, is_s3, list_names

DEFAULT_RECORDS_PER_FILE = 100_000
MAX_ERRORS_SHOWN = 100  # per input file; the count in the summary is always complete
STAMP_FORMAT = "%Y%m%dT%H%M%S%fZ"
_STAMP_IN_NAME = re.compile(r"^replay-(\d{8}T\d{12}Z)-")


@dataclass
class FileSummary:
    path: Location
    stream: str  # quotes or orders
    read: int = 0
    written: int = 0
    rejected: int = 0
    files: int = 0


# --- landing lines -----------------------------------------------------------------------------


def quote_line(quote, seq: int) -> str:
    """A landing line for a wallaroo_records.Quote; doubles as their shortest exact decimal text."""
    return (
        f'{{"symbol": {json.dumps(quote.symbol)}, "transact_time": "{quote.transact_time}", '
        f'"bid": {decimal_text(quote.bid)}, "offer": {decimal_text(quote.offer)}, "seq": {seq}}}'
    )


def order_line(order, seq: int) -> str:
    """A landing line for a wallaroo_records.Order."""
    return (
        f'{{"order_id": {json.dumps(order.order_id)}, "account": {order.account}, '
        f'"symbol": {json.dumps(order.symbol)}, "side": "{order.side}", "qty": {decimal_text(order.qty)}, '
        f'"price": {decimal_text(order.price)}, "transact_time": "{order.transact_time}", "seq": {seq}}}'
    )


# --- atomic chunked output ---------------------------------------------------------------------


def write_atomically(folder: Location, name: str, lines: list[str]) -> Location:
    """Write under a dot name (readers skip it), fsync, rename into place, fsync the folder. On
    object storage, one put-if-absent: the object is whole once listed, and never overwritten."""
    if isinstance(folder, S3Path):
        obj = folder / name
        if not obj.create(("\n".join(lines) + "\n").encode("utf-8")):
            raise FileExistsError(f"landing object already exists: {obj}")
        return obj
    final = folder / name
    if final.exists():  # the stamp makes this impossible short of a clock trick: never overwrite
        raise FileExistsError(f"landing file already exists: {final}")
    temp = folder / f".{name}.tmp"
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, final)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)
    return final


def replay_stamp(landing: Location, now: datetime | None = None) -> str:
    """A UTC stamp later than every earlier replay's in this landing folder (names sort in order)."""
    stamp = now or datetime.now(UTC)
    for folder in (landing / "quotes", landing / "orders"):
        for name in list_names(folder) or ():
            m = _STAMP_IN_NAME.match(name)
            if m:
                earlier = datetime.strptime(m.group(1), STAMP_FORMAT).replace(tzinfo=UTC)
                if earlier >= stamp:
                    stamp = earlier + timedelta(microseconds=1)
    return stamp.strftime(STAMP_FORMAT)


def _safe_stem(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem)[:60] or "input"


# --- the command -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplaySpec:
    """One `replay` run: the input files, and exactly one of `landing` and `kafka`."""

    nbbo: tuple[Path, ...] = ()  # market data files
    orders: tuple[Path, ...] = ()  # order files
    landing: Location | None = None
    kafka: KafkaTarget | None = None
    records_per_file: int = DEFAULT_RECORDS_PER_FILE
    strict: bool = False  # stop at the first bad frame or line, writing nothing


def _inputs(spec: ReplaySpec) -> list[tuple[Path, str]]:
    inputs = [(p, "quotes") for p in spec.nbbo] + [(p, "orders") for p in spec.orders]
    if not inputs:
        raise UsageError("nothing to replay: give --nbbo FILE... and/or --orders FILE...")
    for path, _ in inputs:
        if not path.is_file():
            raise UsageError(f"input file not found: {path}")
    if spec.records_per_file < 1:
        raise UsageError(f"--records-per-file must be >= 1, got {spec.records_per_file}")
    if spec.landing is None and spec.kafka is None:
        raise UsageError("give --landing DIR (files) or --kafka HOST:PORT (topics)")
    if spec.landing is not None and spec.kafka is not None:
        raise UsageError("--landing and --kafka exclude each other: files or topics")
    if spec.landing is not None and not is_s3(spec.landing) and spec.landing.exists() and not spec.landing.is_dir():
        raise UsageError(f"--landing is not a folder: {spec.landing}")
    return inputs


def _report(error, shown: int) -> None:
    if shown < MAX_ERRORS_SHOWN:
        print(f"replay: {error}", file=sys.stderr)


@dataclass(frozen=True)
class ReplayTarget:
    """Where one replay run writes: landing files named with its stamp, or a Kafka sink."""

    landing: Location
    stamp: str  # in every file (or chunk) name of this run
    records_per_file: int
    sink: KafkaSink | None = None  # send chunks to topics instead of landing files


def replay_file(path: Path, stream: str, index: int, target: ReplayTarget, strict: bool = False) -> FileSummary:
    """Replay one input file into `landing/<stream>/` (or, with a sink, to its topic in chunks of
    `records_per_file`, each acknowledged before the next); returns its counts. `index` orders
    this input's files after the earlier inputs' files."""
    folder, sink = target.landing / stream, target.sink
    if sink is None:
        folder.mkdir(parents=True, exist_ok=True)
    summary = FileSummary(path, stream)
    expect: Kind = "quote" if stream == "quotes" else "order"
    make_line: Callable[[Any, int], str] = quote_line if stream == "quotes" else order_line
    chunk: list[str] = []

    def flush() -> None:
        name = f"replay-{target.stamp}-{index:03d}-{summary.files:05d}-{_safe_stem(path)}.jsonl"
        if sink is None:
            write_atomically(folder, name, chunk)
        else:
            sink(stream, name, chunk)
        summary.files += 1
        summary.written += len(chunk)
        chunk.clear()

    for item in decode_file(path, expect=expect, strict=strict):
        summary.read += 1
        if isinstance(item, DecodeError):
            _report(item, summary.rejected)
            summary.rejected += 1
            continue
        assert isinstance(item.message, (Quote, Order))
        chunk.append(make_line(item.message, item.position))
        if len(chunk) >= target.records_per_file:
            flush()
    if chunk:
        flush()
    if summary.rejected > MAX_ERRORS_SHOWN:
        print(f"replay: {path}: {summary.rejected - MAX_ERRORS_SHOWN} more errors not shown", file=sys.stderr)
    return summary


def check_strict(inputs: Iterable[tuple[Path, str]]) -> str | None:
    """Decode every input without writing; the first error as text, or None when all are clean."""
    for path, stream in inputs:
        try:
            for _ in decode_file(path, expect="quote" if stream == "quotes" else "order", strict=True):
                pass
        except StrictDecodeError as exc:
            return str(exc.error)
    return None


def replay(spec: ReplaySpec) -> int:
    """Replay every input into landing files or Kafka topics; the exit code (1 on a --strict error
    or a Kafka failure). UsageError for options that cannot run."""
    inputs = _inputs(spec)
    landing = spec.landing or Path(".")
    if spec.strict:
        first = check_strict(inputs)
        if first is not None:
            print(f"replay: {first}", file=sys.stderr)
            print("replay: --strict: stopped at the first error; nothing written", file=sys.stderr)
            return 1
    try:
        sink = open_sink(spec.kafka)
    except ConnectionError as exc:
        print(f"replay: error: {exc}", file=sys.stderr)
        return 1
    stamp = replay_stamp(landing) if sink is None else datetime.now(UTC).strftime(STAMP_FORMAT)
    where = spec.kafka.label if spec.kafka is not None else str(landing)  # a sink exactly when kafka is set
    target = ReplayTarget(landing, stamp, spec.records_per_file, sink)
    totals = FileSummary(landing, "")
    for index, (path, stream) in enumerate(inputs):
        try:
            s = replay_file(path, stream, index, target, strict=spec.strict)
        except ConnectionError as exc:
            print(f"replay: error: {exc}", file=sys.stderr)
            return 1
        print(
            f"replay: {path} -> {stream}: read {s.read}, written {s.written}, rejected {s.rejected} "
            f"({s.files} {'chunk(s) sent' if sink else 'landing file(s)'})",
            flush=True,
        )
        totals.read, totals.written, totals.rejected = (
            totals.read + s.read,
            totals.written + s.written,
            totals.rejected + s.rejected,
        )
    print(f"replay: total: read {totals.read}, written {totals.written}, rejected {totals.rejected} into {where}")
    return 0
