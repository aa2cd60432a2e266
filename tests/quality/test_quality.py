"""`market-spread validate`: real Spark, real Delta, real Great Expectations on tiny hand-built lakes.

The lakes are written with the exact schemas of market_spread.lake.tables (the stream is not needed), built
once and copied per scenario: a GX run costs seconds here, so scenarios share runs where they can.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal as D
from pathlib import Path

import pytest

from market_spread.cli import main as cli
from market_spread.lake import tables as lake_mod
from tests.helpers import symbols
from tests.helpers.lake import read_table
from tests.helpers.paths import ROOT

UTC = dt.UTC
T0 = dt.datetime(2026, 11, 23, 14, 30, tzinfo=UTC)
SYMBOLS = ["AAPL", "MSFT", "IBM", "GOOG", "AMZN", "NFLX", "META", "TSLA", "NVDA", "ORCL"]


def sec(n: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=n)


def alert(order_id: str | None, batch_id: int | None, **over) -> dict:
    """A valid wide_spread alert (AAPL, spread 0.10 >= 0.05) unless fields are overridden."""
    row = dict(
        order_id=order_id,
        account=7,
        symbol="AAPL",
        side="BUY",
        qty=D("100"),
        price=D("189.05"),
        order_time=sec(10),
        reason="wide_spread",
        bid=D("189.00"),
        offer=D("189.10"),
        quote_time=sec(5),
        detected_at=sec(60),
        batch_id=batch_id,
        order_seq=None,
        quote_seq=None,
    )
    row.update(over)
    return row


def no_market(order_id: str, batch_id: int, **over) -> dict:
    fields = dict(symbol="GOOG", reason="no_market_data", bid=None, offer=None, quote_time=None)
    return alert(order_id, batch_id, **{**fields, **over})


def state(symbol: str, bid: str | None, offer: str | None, reject: bool | None, **over) -> dict:
    row = dict(
        symbol=symbol,
        bid=None if bid is None else D(bid),
        offer=None if offer is None else D(offer),
        quote_time=sec(5),
        seq=None,
        should_reject_trades=reject,
        updated_at=sec(61),
        batch_id=0,
    )
    row.update(over)
    return row


def append(spark, lake: Path, table: str, rows: list[dict]) -> None:
    from pyspark.sql.types import _parse_datatype_string

    schema = _parse_datatype_string(lake_mod.SCHEMAS[table])
    data = [tuple(r.get(f.name) for f in schema.fields) for r in rows]
    spark.createDataFrame(data, schema).write.format("delta").mode("append").save(lake_mod.table_path(lake, table))


def metrics(batches: dict[int, int]) -> list[dict]:
    return [
        dict(batch_id=b, started_at=sec(50), finished_at=sec(51), quotes=1, orders=n, alerts=n, quarantined=0)
        for b, n in batches.items()
    ]


def validate(lake, docs, symbols_file: Path, *extra: str, capsys=None) -> tuple[int, str]:
    """`validate` in-process; `lake` and `docs` local paths or S3 locations (given as s3:// URIs)."""
    from tests.helpers.storage import arg

    code = cli.main(["validate", "--lake", arg(lake), "--docs", arg(docs), "--symbols", str(symbols_file), *extra])
    out = capsys.readouterr().out if capsys is not None else ""
    return code, out


@pytest.fixture(scope="module")
def symbols_file(tmp_path_factory) -> Path:
    return symbols.symbols_file(tmp_path_factory.mktemp("symbols"), SYMBOLS, comment="test universe")


@pytest.fixture(scope="module")
def clean_template(spark, tmp_path_factory) -> Path:
    """A clean lake: alerts in two appends (batches 0 and 2; batch 1 had none), metrics, state."""
    lake = tmp_path_factory.mktemp("clean") / "lake"
    lake_mod.ensure_tables(spark, lake)
    append(spark, lake, "alerts", [alert("O-1", 0), no_market("O-2", 0)])
    # O-4 sits exactly on the threshold: spread 0.05 >= max_spread rejects.
    append(
        spark,
        lake,
        "alerts",
        [
            alert("O-3", 2, symbol="MSFT", bid=D("10.00"), offer=D("10.50"), price=D("10.2")),
            alert("O-4", 2, bid=D("50.00"), offer=D("50.05"), quote_time=sec(10)),
        ],
    )
    append(spark, lake, "batch_metrics", metrics({0: 2, 1: 0, 2: 2}))
    append(
        spark,
        lake,
        "symbol_state",
        [
            state("AAPL", "189.00", "189.10", True),
            state("MSFT", "10.00", "10.50", True),
            state("IBM", "100.02", "100.01", False),  # crossed: never rejects
        ],
    )
    return lake


def copy_lake(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest)
    return dest


@pytest.fixture(scope="module")
def first_run(spark, clean_template, symbols_file, tmp_path_factory):
    """The clean lake validated once through the CLI; later scenarios continue from copies of it."""
    base = tmp_path_factory.mktemp("first")
    lake = copy_lake(clean_template, base / "lake")
    docs = base / "docs"
    code = cli.main(["validate", "--lake", str(lake), "--docs", str(docs), "--symbols", str(symbols_file)])
    return lake, docs, code


def test_clean_lake_passes_with_data_docs(spark, first_run, capsys):
    lake, docs, code = first_run
    assert code == 0
    index = docs / "index.html"
    assert index.is_file()
    html = index.read_text()
    assert "alerts" in html and "symbol_state" in html
    # Nothing written into the repository: the GX project lives under the docs folder.
    assert (docs / "gx").is_dir() and not (ROOT / "gx").exists()

    results = read_table(spark, lake, "quality_results")
    rows = results.collect()
    assert {r.suite for r in rows} == {"alerts", "symbol_state"}
    assert len({r.run_id for r in rows}) == 1
    assert all(r.success for r in rows) and all(r.run_passed for r in rows)
    alert_rows = [r for r in rows if r.suite == "alerts"]
    assert len(alert_rows) == len(json.loads((ROOT / "expectations" / "alerts.json").read_text())["expectations"])
    assert {(r.from_version, r.to_version, r.rows_validated) for r in alert_rows} == {(None, 2, 4)}
    # The batches validated (1 wrote no alerts and counted none) are what later runs skip.
    assert {(r.batches, r.to_batch) for r in alert_rows} == {("0-2", 2)}
    assert any(
        r.expectation == "expect_column_values_to_be_in_set(column=side, value_set=[BUY, SELL])" for r in alert_rows
    )

    # quality_results stays readable without Spark, like the product's tables.
    from deltalake import DeltaTable

    assert len(DeltaTable(lake_mod.table_path(lake, "quality_results")).to_pandas()) == len(rows)


def test_incremental_runs_failed_run_keeps_mark_full_revalidates(
    spark, first_run, symbols_file, tmp_path, capsys, monkeypatch
):
    from market_spread.quality import gx_run

    monkeypatch.setattr(gx_run, "KEEP_DOCS_RUNS", 2)  # Data Docs keep the last runs only
    lake = copy_lake(first_run[0], tmp_path / "lake")
    docs = tmp_path / "docs"

    # Batch 3 is complete; batch 4's alerts are committed but its batch_metrics row is not yet
    # (the stream is mid-batch): only batch 3 is validated, batch 4 is held back.
    append(spark, lake, "alerts", [alert("O-5", 3)])  # version 3
    append(spark, lake, "batch_metrics", metrics({3: 1}))
    append(spark, lake, "alerts", [alert("O-6", 4)])  # version 4
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 0, out
    assert (
        "suite alerts: PASSED, 26/26 expectations passed, 0 failed "
        "(1 alert(s) appended after version 2 up to version 4)"
    ) in out
    assert "note: alerts of batch 4 have no batch_metrics row yet (batch in progress): held back" in out
    assert "note: batches validated: 1 (3)" in out
    assert "suite symbol_state: PASSED, 10/10 expectations passed, 0 failed (3 row(s) at version 1)" in out
    assert "alerts high-water mark: version 4" in out
    assert f"Data Docs: {(docs / 'index.html').resolve()}" in out
    assert out.rstrip().endswith("result: PASSED (every critical expectation holds)")

    # Batch 4 completes, batch 5 brings one bad alert: the run fails, names the expectation and
    # batches 4 and 5 stay to be validated.
    append(spark, lake, "batch_metrics", metrics({4: 1}))
    append(spark, lake, "alerts", [alert("O-7", 5, side="HOLD")])  # version 5
    append(spark, lake, "batch_metrics", metrics({5: 1}))
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 1, out
    assert "(2 alert(s) appended after version 4 up to version 5)" in out
    assert "note: batches validated: 2 (4-5)" in out
    assert "CRITICAL expect_column_values_to_be_in_set(column=side, value_set=[BUY, SELL]), 1 unexpected" in out
    assert "HOLD" in out
    assert "alerts high-water mark: version 4" in out
    assert "result: FAILED (1 critical expectation(s) failed)" in out

    # Clean alerts after the bad one: the next run checks batches 4-6 again, so it still sees O-7.
    append(spark, lake, "alerts", [alert("O-8", 6)])  # version 6
    append(spark, lake, "batch_metrics", metrics({6: 1}))
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 1, out
    assert "(3 alert(s) appended after version 4 up to version 6)" in out
    assert "note: batches validated: 3 (4-6)" in out

    # --full validates every alert whatever the mark.
    code, out = validate(lake, docs, symbols_file, "--full", capsys=capsys)
    assert code == 1
    assert "(8 alert(s) appended after the start up to version 6)" in out

    for suite in ("alerts", "symbol_state"):
        assert len(list((docs / "validations" / suite).glob("*/*/*.html"))) == 2
        assert len(list((docs / "gx" / "uncommitted" / "validations" / suite).glob("*/*/*.json"))) == 2

    runs = (
        read_table(spark, lake, "quality_results")
        .where("suite = 'alerts'")
        .groupBy("run_id", "from_version", "to_version", "rows_validated", "run_passed")
        .count()
        .collect()
    )
    assert sorted(
        (-1 if r.from_version is None else r.from_version, r.to_version, r.rows_validated, r.run_passed) for r in runs
    ) == [(-1, 2, 4, True), (-1, 6, 8, False), (2, 4, 1, True), (4, 5, 2, False), (4, 6, 3, False)]


def test_orphan_alerts_are_held_only_while_their_batch_can_finish(spark, first_run, symbols_file, tmp_path, capsys):
    """A batch whose batch_metrics row never comes must not stop the high-water mark for good."""
    lake = copy_lake(first_run[0], tmp_path / "lake")
    docs = tmp_path / "docs"
    append(spark, lake, "alerts", [alert("O-9", 9)])  # version 3: batch 9 never writes its metrics

    # Within the grace period it may still be a batch in flight: held back, the run passes.
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 0, out
    assert "held back" in out and "(0 alert(s) appended" in out and "batches validated: none" in out

    # Grace 0: it can no longer finish; validated, named as orphans, the run fails.
    code, out = validate(lake, docs, symbols_file, "--orphan-grace-seconds", "0", capsys=capsys)
    assert code == 1, out
    assert "(1 alert(s) appended after version 3 up to version 3)" in out
    assert "validated as orphans" in out
    assert "CRITICAL alerts_have_a_batch_metrics_row, 1 unexpected: orphan alerts: batch(es) [9]" in out
    assert "result: FAILED" in out

    # A later batch commits its metrics: batch 9 cannot finish any more, whatever the grace period.
    append(spark, lake, "alerts", [alert("O-10", 10)])  # version 4
    append(spark, lake, "batch_metrics", metrics({10: 1}))
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 1, out
    assert "held back" not in out
    assert "(2 alert(s) appended after version 3 up to version 4)" in out  # batches 9 and 10
    assert "orphan alerts: batch(es) [9]" in out


def test_lake_from_the_pipeline_passes_and_thresholds_are_parameters(spark, place, symbols_file, capsys):
    """On local disk and on S3 (lake and Data Docs both there: `--docs s3://...`)."""
    from tests.helpers.lake import stream  # the pipeline's own test helpers
    from tests.helpers.landing import land
    from tests.helpers.records import T, order, quote

    landing, lake, docs = place / "landing", place / "lake", place / "docs"
    land(
        landing,
        "quotes",
        [
            quote("AAPL", T.format(1), "1.00", "1.10"),  # wide
            quote("MSFT", T.format(1), "10.00", "10.01"),  # tight
            quote("IBM", T.format(1), "100.02", "100.01"),  # crossed: never rejects
        ],
    )
    land(
        landing,
        "orders",
        [
            order("O-1", "AAPL", T.format(2)),  # wide_spread
            order("O-2", "MSFT", T.format(2)),  # accepted
            order("O-3", "GOOG", T.format(2)),  # no_market_data
            order("O-4", "AAPL", T.format(0)),  # before any quote: no_market_data
            '{"not": "an order"',  # quarantined
        ],
    )
    assert stream(spark, landing, lake) == 0
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 0, out
    assert "suite alerts: PASSED, 26/26 expectations passed, 0 failed (3 alert(s) appended after the start" in out
    assert "suite symbol_state: PASSED, 10/10 expectations passed, 0 failed (3 row(s)" in out
    assert "alerts" in (docs / "index.html").read_text(), "the Data Docs site is where --docs says"
    assert len(place.open_delta(lake / "quality_results").to_pandas()) == 26 + 10, "read back with delta-rs"

    # The same lake judged with other thresholds: the reject rule no longer holds for O-1 and AAPL.
    code, out = validate(
        lake, docs, symbols_file, "--full", "--max-spread", "1", "--max-spread-ratio", "0.5", capsys=capsys
    )
    assert code == 1
    assert "(max_spread=1, max_spread_ratio=0.5)" in out
    assert (
        "CRITICAL unexpected_rows_expectation: wide_spread alerts cite a quote that the reject rule "
        "rejects at the configured thresholds, 1 unexpected"
    ) in out
    assert (
        "CRITICAL unexpected_rows_expectation: should_reject_trades equals the reject rule at the configured "
        "thresholds, 1 unexpected"
    ) in out
    assert "result: FAILED (2 critical expectation(s) failed)" in out


def critical_names(suite: str) -> list[str]:
    from market_spread.quality.suites import load_suite

    loaded = load_suite(ROOT / "expectations" / f"{suite}.json", ["symbols"])
    return [i.name for i in loaded.infos if i.critical]


def test_each_critical_expectation_catches_its_violating_row(spark, symbols_file, tmp_path):
    """One lake, one violating row per critical expectation; each row breaks exactly one of them."""
    from market_spread.quality.validate import ValidateOptions, validate_lake

    lake = tmp_path / "lake"
    lake_mod.ensure_tables(spark, lake)
    dirty = [
        alert("ok-1", 10),
        no_market("ok-2", 10),
        alert(None, 10),  # order_id null
        alert("a", 10, account=None),
        alert("b", 10, symbol=None),
        alert("c", 10, side=None),
        alert("d", 10, qty=None),
        alert("e", 10, price=None),
        alert("f", 10, order_time=None),
        alert("g", 10, reason=None, bid=None, offer=None, quote_time=None),
        alert("h", 10, detected_at=None),
        alert("i", None),  # batch_id null
        alert("j", 10, reason="fat_finger", bid=None, offer=None, quote_time=None),
        alert("k", 10, side="HOLD"),
        alert("l", 10, symbol="ZZZZ"),
        alert("m", 10, qty=D("0")),
        alert("n", 10, price=D("-1")),
        alert("o", 10, bid=None),
        alert("p", 10, offer=None),
        alert("q", 10, quote_time=None),
        alert("r", 10, quote_time=sec(11)),  # after the order's time
        alert("s", 10, bid=D("189.00"), offer=D("189.01")),  # spread 0.01: the rule does not reject
        no_market("t", 10, bid=D("1")),
        no_market("u", 10, offer=D("1")),
        no_market("v", 10, quote_time=sec(1)),
        alert("w", 11),  # batch 11 counts 2 alerts, has 1 row
        alert("x", 10, bid=D("-1"), offer=D("1")),  # warning only: a non-positive cited bid
    ]
    append(spark, lake, "alerts", dirty)
    per_batch = sum(1 for r in dirty if r["batch_id"] == 10)
    append(spark, lake, "batch_metrics", metrics({10: per_batch, 11: 2}))
    append(
        spark,
        lake,
        "symbol_state",
        [
            state("AAPL", "189.00", "189.10", True),
            state("MSFT", "10.00", "10.50", True),
            state("MSFT", "10.00", "10.50", True),  # one row per symbol
            state("ZZZZ", "1.00", "1.01", False),  # outside the universe
            state("IBM", None, "1.00", False),
            state("GOOG", "1.00", None, False),
            state("AMZN", "1.00", "1.01", False, quote_time=None),
            state("NFLX", "1.00", "1.01", None),
            state("META", "0", "1.00", True),  # bid not positive
            state("TSLA", "1.00", "-1", False),  # offer not positive (crossed: no reject)
            state("NVDA", "100.00", "100.01", True),  # flag contradicts the rule
            state("ORCL", "1.00", "1.01", False, updated_at=None),  # warning only
        ],
    )
    summary = validate_lake(spark, lake, SYMBOLS, ValidateOptions(docs=tmp_path / "docs"))
    assert not summary.passed
    text = summary.text()
    by_suite = {s.suite: {o.name: o for o in s.outcomes} for s in summary.suites}
    for suite in ("alerts", "symbol_state"):
        outcomes = by_suite[suite]
        for name in critical_names(suite):
            assert not outcomes[name].success, name
            # GX counts every row of a duplicated value; every other check sees exactly its row.
            expected = 2 if name == "expect_column_values_to_be_unique(column=symbol)" else 1
            assert outcomes[name].unexpected_count == expected, (name, outcomes[name])
            assert f"CRITICAL {name}" in text
        warnings = [o for o in outcomes.values() if not o.critical]
        assert warnings and not all(o.success for o in warnings)


def _break_side_entry(suite: dict) -> None:
    entry = next(e for e in suite["expectations"] if e["kwargs"].get("column") == "side" and "value_set" in e["kwargs"])
    entry["kwargs"]["valu_set"] = entry["kwargs"].pop("value_set")


MALFORMED = {
    "json": (None, "not valid JSON"),
    "type": (
        lambda s: s["expectations"][0].update(type="expect_column_values_to_be_purple"),
        "expectation #1 (expect_column_values_to_be_purple) is invalid",
    ),
    "kwargs": (_break_side_entry, "(expect_column_values_to_be_in_set) is invalid"),
    "critical": (
        lambda s: s["expectations"][2].pop("meta"),
        "expectation #3 (expect_column_values_to_not_be_null): meta.critical must be true or false",
    ),
    "parameter": (
        lambda s: next(
            e for e in s["expectations"] if e["kwargs"].get("column") == "symbol" and "value_set" in e["kwargs"]
        )["kwargs"].update(value_set={"$PARAMETER": "symbol"}),
        "uses unknown suite parameter(s) ['symbol']",
    ),
    "key": (lambda s: s["expectations"][1].update(kwarg={}), "unknown key(s) ['kwarg']"),
    "empty": (lambda s: s.update(expectations=[]), "'expectations' must be a non-empty list"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_suite_file_is_an_error_naming_the_file(case, tmp_path):
    from market_spread.quality.suites import SuiteFileError, load_suites

    folder = tmp_path / "expectations"
    shutil.copytree(ROOT / "expectations", folder)
    target = folder / "alerts.json"
    change, message = MALFORMED[case]
    if change is None:
        target.write_text(target.read_text()[:-20])
    else:
        suite = json.loads(target.read_text())
        change(suite)
        target.write_text(json.dumps(suite))
    with pytest.raises(SuiteFileError) as err:
        load_suites(folder, ["symbols"])
    assert str(err.value).startswith(f"{target}: ")
    assert message in str(err.value)


def test_malformed_suite_stops_the_command_before_spark(clean_template, symbols_file, tmp_path, capsys):
    folder = tmp_path / "expectations"
    shutil.copytree(ROOT / "expectations", folder)
    suite = json.loads((folder / "symbol_state.json").read_text())
    suite["expectations"][0]["type"] = "expect_column_values_to_be_unique_please"
    (folder / "symbol_state.json").write_text(json.dumps(suite))
    code = cli.main(
        [
            "validate",
            "--lake",
            str(clean_template),
            "--symbols",
            str(symbols_file),
            "--docs",
            str(tmp_path / "docs"),
            "--expectations",
            str(folder),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"{folder / 'symbol_state.json'}: expectation #1 (expect_column_values_to_be_unique_please)" in err
    assert not (tmp_path / "docs").exists()


def test_bad_arguments_exit_2(tmp_path, symbols_file, capsys):
    assert cli.main(["validate", "--lake", str(tmp_path / "nowhere"), "--symbols", str(symbols_file)]) == 2
    assert "lake not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["validate", "--lake", str(tmp_path / "empty"), "--symbols", str(symbols_file)]) == 2
    assert "no Delta table alerts" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["validate", "--lake", str(tmp_path), "--max-spread", "abc"])
    assert exit_info.value.code == 2


def test_a_mark_whose_version_left_the_log_continues_from_its_batch(spark, first_run, symbols_file, tmp_path, capsys):
    """The tables keep 5 minutes of log and the stream compacts them: alerts are selected by batch,
    so a run after compaction and log clean-up validates the alerts of the batches not validated
    yet, not every alert again."""
    from deltalake import DeltaTable

    from market_spread.quality.versions import newest_data_commit

    lake = copy_lake(first_run[0], tmp_path / "lake")
    docs = tmp_path / "docs"
    assert first_run[2] == 0  # batches 0-2 validated
    append(spark, lake, "alerts", [alert("O-5", 3)])  # version 3
    append(spark, lake, "batch_metrics", metrics({3: 1}))
    alerts_log = Path(lake_mod.table_path(lake, "alerts")) / "_delta_log"
    table = DeltaTable(str(alerts_log.parent))
    table.optimize.compact()  # version 4: files rewritten, no row changed
    assert newest_data_commit(alerts_log.parent, table.version())[1] == {3}  # the compaction is passed over
    table.create_checkpoint()  # version 4 readable without 0-2
    for version in range(3):
        (alerts_log / f"{version:020d}.json").unlink()  # what log retention does
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 0, out
    assert "(1 alert(s) appended after version 2 up to version 4)" in out
    assert "note: batches validated: 1 (3)" in out
    assert "alerts high-water mark: version 4" in out
    from market_spread.quality.results_table import validated_batches

    assert validated_batches(lake) == [(0, 3)]


def test_a_table_whose_log_delta_rs_cannot_read_is_pinned_by_spark(spark, clean_template, monkeypatch):
    """A reader feature delta-rs lacks (geospatial) leaves the version to Spark, which reads the table."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from market_spread.quality import versions

    path = lake_mod.table_path(clean_template, "alerts")
    expected = DeltaTable(path).version()

    def unreadable(table):
        raise DeltaError("Kernel error: Unsupported: Feature 'geospatial' is not supported")

    monkeypatch.setattr(versions, "latest_version", unreadable)
    assert versions.version_to_read(spark, path) == expected


def test_an_older_results_table_gets_the_batches_columns(spark, tmp_path):
    from market_spread.lake.deltalog import properties_and_columns
    from market_spread.quality.results_table import (
        RESULTS_SCHEMA,
        RESULTS_TABLE,
        ensure_results_table,
        validated_batches,
    )

    lake = tmp_path / "lake"
    path = lake_mod.table_path(lake, RESULTS_TABLE)
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({RESULTS_SCHEMA.replace(', to_batch BIGINT, batches STRING', '')}) USING DELTA"
    )
    assert "to_batch" not in properties_and_columns(path)[1]
    assert validated_batches(lake) == []
    ensure_results_table(spark, lake)
    assert properties_and_columns(path)[1][-2:] == ["to_batch", "batches"]
    # A passing run recorded before the batches column validated every batch up to its to_batch.
    spark.sql(
        f"INSERT INTO delta.`{path}` (run_id, suite, run_passed, to_version, to_batch) "
        "VALUES ('old', 'alerts', true, 4, 7), ('new', 'alerts', true, 6, 12)"
    )
    spark.sql(f"UPDATE delta.`{path}` SET batches = '9-10,12' WHERE run_id = 'new'")
    assert validated_batches(lake) == [(None, 7), (9, 10), (12, 12)]


def test_a_finished_batch_is_checked_though_an_unfinished_one_came_before(
    spark, first_run, symbols_file, tmp_path, capsys
):
    """The operator's scenario: an alert commit of a batch that never finished (its id above every
    finished batch), then a finished batch with a corrupted alert. The finished batch is checked at
    once, and the unfinished one, no longer the newest commit, cannot be in flight: an orphan."""
    lake = copy_lake(first_run[0], tmp_path / "lake")
    docs = tmp_path / "docs"
    append(spark, lake, "alerts", [alert("O-9", 9)])  # version 3: batch 9 never writes its metrics
    append(spark, lake, "alerts", [alert("O-5", 3), alert("O-6", 3, side="HOLD")])  # version 4
    append(spark, lake, "batch_metrics", metrics({3: 2}))
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 1, out
    assert "held back" not in out
    assert "(3 alert(s) appended" in out
    assert "CRITICAL expect_column_values_to_be_in_set(column=side, value_set=[BUY, SELL]), 1 unexpected" in out
    assert "CRITICAL alerts_have_a_batch_metrics_row, 1 unexpected: orphan alerts: batch(es) [9]" in out
    assert "result: FAILED" in out


def test_a_finished_batch_is_validated_once_and_an_in_flight_one_holds_back_only_itself(
    spark, first_run, symbols_file, tmp_path, capsys
):
    lake = copy_lake(first_run[0], tmp_path / "lake")
    docs = tmp_path / "docs"
    # Nothing new since the first run: no batch is validated again.
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 0, out
    assert "(0 alert(s) appended" in out and "note: batches validated: none" in out

    # Batch 3 finished with a corrupted alert, then batch 4 (newest, young, no metrics yet): only
    # batch 4 waits; batch 3 fails the run now.
    append(spark, lake, "alerts", [alert("O-5", 3, side="HOLD")])
    append(spark, lake, "batch_metrics", metrics({3: 1}))
    append(spark, lake, "alerts", [alert("O-6", 4)])
    code, out = validate(lake, docs, symbols_file, capsys=capsys)
    assert code == 1, out
    assert "alerts of batch 4 have no batch_metrics row yet (batch in progress): held back" in out
    assert "note: batches validated: 1 (3)" in out
    assert "CRITICAL expect_column_values_to_be_in_set(column=side, value_set=[BUY, SELL]), 1 unexpected" in out
