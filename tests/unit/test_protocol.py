"""lake.protocol's writer and reader rule over protocols as delta-rs reports them (legacy versions
and feature lists), and the one line for a feature no library writes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from market_spread.lake.protocol import DELTA_RS, DELTA_SPARK, FeatureNotHonoured, route


def table(reader=1, writer=2, reader_features=None, writer_features=None, configuration=None):
    protocol = SimpleNamespace(
        min_reader_version=reader,
        min_writer_version=writer,
        reader_features=reader_features,
        writer_features=writer_features,
    )
    metadata = SimpleNamespace(configuration=configuration or {})
    return SimpleNamespace(protocol=lambda: protocol, metadata=lambda: metadata)


@pytest.mark.parametrize(
    ("given", "writer", "reader", "why"),
    [
        (table(), DELTA_RS, DELTA_RS, ""),
        (table(writer=4), DELTA_RS, DELTA_RS, ""),  # Change Data Feed under a legacy protocol
        (table(reader=2, writer=5), DELTA_RS, DELTA_RS, ""),  # column mapping, legacy
        (
            table(3, 7, ["deletionVectors", "v2Checkpoint"], ["deletionVectors", "v2Checkpoint", "appendOnly"]),
            DELTA_RS,
            DELTA_RS,
            "",
        ),
        (
            table(1, 7, None, ["rowTracking", "domainMetadata", "appendOnly"]),
            DELTA_SPARK,
            DELTA_RS,
            "domainMetadata, rowTracking",
        ),
        (table(3, 7, ["typeWidening"], ["typeWidening"]), DELTA_SPARK, "spark", "typeWidening"),
        (table(configuration={"delta.constraints.pos": "qty > 0"}), DELTA_SPARK, DELTA_RS, "CHECK constraints"),
    ],
)
def test_the_writer_and_reader_follow_the_tables_protocol(given, writer, reader, why):
    chosen = route(given, "alerts", "/lake/alerts")
    assert (chosen.writer, chosen.reader, chosen.why) == (writer, reader, why)


def test_a_feature_no_library_writes_is_one_line_naming_table_feature_and_statement():
    with pytest.raises(FeatureNotHonoured) as caught:
        route(table(1, 7, None, ["appendOnly", "coordinatedCommits-preview"]), "quotes", "/lake/quotes")
    message = str(caught.value)
    assert "\n" not in message and FeatureNotHonoured.exit_code == 5
    assert "table quotes has the Delta feature coordinatedCommits-preview" in message
    assert "ALTER TABLE delta.`/lake/quotes` DROP FEATURE coordinatedCommits-preview" in message
