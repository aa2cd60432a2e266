"""A driver batch's input, read on the driver: its landing files straight from their folder or
bucket (the files its Spark plan names, without running it), large ones parsed whole by Arrow's
JSON reader (kernel.file_json), the other lines as Spark's text source splits them; a Kafka
batch's records by the stream's consumer (sources.kafka_read), else brought over in one Spark job.
What a stream keeps for this between batches is its DriverReader."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pyarrow as pa
from pyspark.sql import DataFrame

from market_spread.kernel import file_json, layout
from market_spread.runtime import spark_jvm
from market_spread.runtime.storage import S3Path, location
from market_spread.sources.kafka_read import KafkaReader

_BYTES_PER_LINE = 256  # a landing line is about 120-180 bytes: the bound errs towards Spark


class DriverReader:
    """What one stream keeps for reading its batches on the driver: threads for landing objects on
    S3 and for large files' parse, and a Kafka stream's consumer. `close` at the stream's end."""

    def __init__(self, kafka: KafkaReader | None = None, threads: bool = True) -> None:
        self.kafka = kafka
        self.pool = ThreadPoolExecutor(max_workers=7, thread_name_prefix="landing-get") if threads else None

    def map(self, work: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        return self.pool.map(work, items) if self.pool is not None else map(work, items)

    def close(self) -> None:
        if self.kafka is not None:
            self.kafka.close()
            self.kafka = None
        if self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None


_SERIAL = DriverReader(threads=False)  # one-off reads (tests, tools): no threads, no consumer


def plan_bytes(batch_df: DataFrame) -> int | None:
    """The bytes Spark's plan says the batch reads (its files' sizes), None when it does not know."""
    try:
        size = spark_jvm.estimated_bytes(batch_df)
    except Exception:  # noqa: BLE001 - no estimate: the batch's size is not known
        return None
    return size if size < (1 << 62) else None  # a source without an estimate says "huge"


def read_lines(batch_df: DataFrame) -> pa.Table:
    """The batch's lines (stream, value, source_file) on the driver: a landing file's read here
    straight from its folder or bucket (landing_files), Kafka records in one Spark job."""
    return read_batch(batch_df, None)[1]


_ANY_SIZE = 1 << 40  # a batch of any size is read on the driver


def read_batch(
    batch_df: DataFrame, universe: frozenset[str] | None, reader: DriverReader | None = None
) -> tuple[list[layout.ColumnBatch], pa.Table]:
    """The batch on the driver: large landing files read whole by Arrow's JSON reader where they
    can be (with a `universe`), and the other lines (stream, value, source_file); a Kafka batch's
    records by the `reader`'s consumer (sources.kafka_read), else by one Spark job."""
    reader = reader or _SERIAL
    leaves = spark_jvm.batch_leaves(batch_df)  # the plan walked once for both kinds of source
    files = _whole_files(leaves, _ANY_SIZE * _BYTES_PER_LINE)
    read = _read_files(files, universe, reader) if files else None
    if read is None and reader.kafka is not None and not files and leaves is not None:
        records = reader.kafka.read(batch_df, _ANY_SIZE, leaves)
        read = None if records is None else ([], records)
    if read is None:
        read = [], batch_df.select("stream", "value", "source_file").toArrow()
    return read


def landing_files(batch_df: DataFrame, max_bytes: int) -> list[str] | None:
    """The landing files the batch reads, whole, from the Spark plan foreachBatch hands over (its
    file scans' partitions), without running it; None for anything else (a Kafka batch, files
    larger than `max_bytes` together). Reading them here saves the batch a Spark job, which was the
    largest phase of a driver batch (measured: docs/performance.md, row 'a driver batch reads its
    landing files itself')."""
    return _whole_files(spark_jvm.batch_leaves(batch_df), max_bytes)


def _whole_files(leaves: list[spark_jvm.Leaf] | None, max_bytes: int) -> list[str] | None:
    """The files of file scans that read each of them whole, within `max_bytes`; None otherwise."""
    if not leaves or any(leaf.kind != "FileScanRDD" for leaf in leaves):
        return None  # another source, or not a batch's plan
    covered: dict[str, list[int]] = {}
    for path, length, size in (split for leaf in leaves for split in leaf.files):
        covered.setdefault(path, [0, size])[0] += length
    if any(read != size for read, size in covered.values()) or sum(s for _, s in covered.values()) > max_bytes:
        return None
    return sorted(covered)


def _file_lines(files: list[str]) -> pa.Table | None:
    """The lines of landing files as Spark's text source splits them (at \n, \r\n or \r), the feed
    from each file's folder; None when a file is not UTF-8 or cannot be read here (Spark's collect
    then reads the batch)."""
    read = _read_files(files, None, _SERIAL)
    return None if read is None else read[1]


# Files at least this big are tried whole by Arrow's JSON reader (kernel.file_json): below it,
# its start costs more than the regular expression per line saves.
JSON_FILE_BYTES = 256 << 10


def _read_files(
    files: list[str], universe: frozenset[str] | None, reader: DriverReader
) -> tuple[list[layout.ColumnBatch], pa.Table] | None:
    """The files' rows that Arrow's JSON reader takes whole (with a `universe`; kernel.file_json),
    and every other line (stream, value, source_file); None when a file is not UTF-8 or cannot be
    read here."""
    places = [location(name.removeprefix("file:") if name.startswith("file:") else name) for name in files]
    read = _contents(places, reader)
    if any(isinstance(data, Exception) for data in read):
        return None
    contents = cast(list[bytes], read)
    feeds = [place.parent.name for place in places]
    # Large files side by side: Arrow's reader lets go of the interpreter, and a file is one block.
    names = universe or frozenset()
    big = [i for i, data in enumerate(contents) if universe is not None and len(data) >= JSON_FILE_BYTES]
    fast = dict(zip(big, reader.map(lambda i: file_json.parse_file(feeds[i], contents[i], names), big)))
    parts, streams, values, sources = [], [], [], []
    for i, (name, feed, data) in enumerate(zip(files, feeds, contents)):
        got = fast.get(i)
        if got is not None:
            rows, others = got
            parts.append(layout.ColumnBatch.of(feed, rows, [name]))
            lines = others.to_pylist()
        else:
            lines = _split_lines(data)
            if lines is None:
                return None
        streams += [feed] * len(lines)
        values += lines
        sources += [name] * len(lines)
    return parts, pa.table(
        {
            "stream": pa.array(streams, pa.string()),
            "value": pa.array(values, pa.string()),
            "source_file": pa.array(sources, pa.string()),
        }
    )


def _split_lines(data: bytes) -> list[str] | None:
    """A file's lines as Spark's text source splits them; None when it is not UTF-8."""
    # Hadoop's line reader drops a UTF-8 byte-order mark at a file's start.
    data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        return [line.decode("utf-8") for line in data.splitlines()]
    except UnicodeDecodeError:  # Spark's read says what it is
        return None


def _contents(places: list, reader: DriverReader) -> list[bytes | Exception]:
    """Each file's bytes (or why it could not be read); objects on S3 fetched side by side, the
    first in this thread and the others on kept threads (a GET is a round trip to the server; a
    pool made for each batch cost more than it saved, and a local read is not worth a thread;
    measured: docs/performance.md, row 'a batch's landing objects on S3')."""

    def read(place) -> bytes | Exception:
        try:
            return place.read_bytes()
        except Exception as exc:  # noqa: BLE001 - the caller hands the batch to Spark
            return exc

    if len(places) < 2 or not any(isinstance(p, S3Path) for p in places):
        return [read(p) for p in places]
    others = reader.map(read, places[1:])  # submitted now; the first read here meanwhile
    return [read(places[0]), *others]
