"""Which library commits to and reads a table, decided from the table's protocol as it stands now
(contract 4: users enable features at any time, from Spark, while the stream runs).

- The writer: delta-rs when it can write every feature the table has, else delta-spark (Spark
  writes every feature Delta 4.4 honours here). A feature neither can honour stops the stream with
  one line naming the table, the feature and the statement that drops it.
- The reader: delta-rs's query engine (`QueryBuilder`) when it reads every reader feature, else
  Spark. `to_pyarrow_table` is never used on a table a user owns: it refuses deletion vectors and
  v2 checkpoints, which the query engine reads.

The sets were measured on deltalake 1.6 against tables Spark 4.1 with Delta 4.4 gave each feature
(tests/lake/test_protocol.py keeps them honest): delta-rs refuses to commit to tables with row
tracking, domain metadata, clustering, in-commit timestamps, identity columns or type widening,
and cannot read type widening at all; it commits correctly to tables with deletion vectors (it
rewrites files, honouring the vectors), column mapping and v2 checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from market_spread.errors import MarketSpreadError
from market_spread.runtime.stream_contract import EXIT_FEATURE

DELTA_RS = "delta-rs"
DELTA_SPARK = "delta-spark"

DELTA_RS_WRITES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "columnMapping",
        "deletionVectors",
        "v2Checkpoint",
        "timestampNtz",
    }
)
DELTA_RS_READS = frozenset({"deletionVectors", "columnMapping", "v2Checkpoint", "timestampNtz"})
# What delta-spark 4.4 commits correctly for the product's rows. Left out, so they stop the
# stream: commit coordinators and catalog-owned tables (commits go through a service the product
# does not talk to), Iceberg compatibility (needs Delta's Iceberg module), redirects.
DELTA_SPARK_WRITES = DELTA_RS_WRITES | frozenset(
    {
        "generatedColumns",
        "identityColumns",
        "rowTracking",
        "domainMetadata",
        "clustering",
        "inCommitTimestamp",
        "typeWidening",
        "typeWidening-preview",
        "vacuumProtocolCheck",
        "variantType",
        "variantType-preview",
        "variantShredding",
        "variantShredding-preview",
        "allowColumnDefaults",
        "checkpointProtection",
    }
)
# Features a legacy protocol (no feature lists) implies, by writer version (Delta's protocol spec).
# Writer version 4 also allows generated columns and 6 identity columns, which only a table created
# with such a column uses (the product's never are): left out, or every table a user gave Change Data
# Feed under a legacy protocol would leave delta-rs.
_LEGACY_WRITER = {
    2: {"appendOnly", "invariants"},
    3: {"checkConstraints"},
    4: {"changeDataFeed"},
    5: {"columnMapping"},
}


class FeatureNotHonoured(MarketSpreadError):
    """A table has a feature no library the product uses can write: the stream stops, saying which
    table, which feature, and the statement that drops it."""

    exit_code = EXIT_FEATURE


@dataclass(frozen=True)
class Route:
    """How one table is committed to and read, and why."""

    writer: str  # DELTA_RS or DELTA_SPARK
    reader: str  # DELTA_RS or "spark"
    why: str  # the features (or CHECK constraints) that sent it to Spark ("" when delta-rs does both)


def writer_features(table: Any) -> set[str]:
    """The writer features of a delta-rs table's protocol (a legacy protocol's implied ones too)."""
    protocol = table.protocol()
    if protocol.writer_features is not None:
        return set(protocol.writer_features)
    implied: set[str] = set()
    for version, features in _LEGACY_WRITER.items():
        if protocol.min_writer_version >= version:
            implied |= features
    return implied


def reader_features(table: Any) -> set[str]:
    protocol = table.protocol()
    if protocol.reader_features is not None:
        return set(protocol.reader_features)
    return {"columnMapping"} if protocol.min_reader_version >= 2 else set()


def constraints(table: Any) -> dict[str, str]:
    """The CHECK constraints (name -> SQL) of a delta-rs table, as its metadata holds them."""
    config = table.metadata().configuration
    return {k.removeprefix("delta.constraints."): v for k, v in config.items() if k.startswith("delta.constraints.")}


def delta_rs_writes(table: Any) -> bool:
    """Whether delta-rs can write every feature of the delta-rs `table`."""
    return writer_features(table) <= DELTA_RS_WRITES


def route(table: Any, name: str, path: str) -> Route:
    """The route of table `name` (at `path`) as its protocol stands; FeatureNotHonoured when no
    library can write one of its features."""
    writes = writer_features(table)
    unknown = sorted(writes - DELTA_SPARK_WRITES)
    if unknown:
        raise FeatureNotHonoured(
            f"table {name} has the Delta feature {unknown[0]}, which neither delta-rs nor delta-spark "
            f"can write for the stream: run ALTER TABLE delta.`{path}` DROP FEATURE {unknown[0]} "
            "from Spark, then start the stream again"
        )
    spark_writes = sorted(writes - DELTA_RS_WRITES)
    if constraints(table):
        # Rows are checked by the engine that commits them: Spark (stream.constrained).
        spark_writes.append("CHECK constraints")
    spark_reads = sorted(reader_features(table) - DELTA_RS_READS)
    return Route(
        writer=DELTA_SPARK if spark_writes else DELTA_RS,
        reader="spark" if spark_reads else DELTA_RS,
        why=", ".join(sorted(set(spark_writes) | set(spark_reads))),
    )
