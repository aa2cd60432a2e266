"""lake.compaction: the stream bin-packs its append-only tables' small files every N commits."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from market_spread.errors import SettingError
from market_spread.lake import compaction
from market_spread.lake import tables as lake_mod
from market_spread.lake.deltalog import max_from_stats
from market_spread.lake.lake_tables import LakeTables
from market_spread.stream.batch import compact_quietly


def _rows(batch: int) -> pa.Table:
    return pa.table({"batch_id": pa.array([batch, batch], pa.int64()), "n": pa.array([1, 2], pa.int64())})


def _lake(tmp_path: Path, tables: tuple[str, ...]) -> LakeTables:
    lake = tmp_path / "lake"
    for table in tables:
        write_deltalake(lake_mod.table_path(lake, table), _rows(0))
    return LakeTables(str(lake))


def _sorted(path: str) -> list[tuple[int, int]]:
    table = DeltaTable(path).to_pyarrow_table()
    return sorted(zip(table["batch_id"].to_pylist(), table["n"].to_pylist()))


def test_a_table_is_compacted_every_n_commits_without_changing_a_row_or_its_last_batch(tmp_path):
    lake = _lake(tmp_path, ("alerts",))
    path = lake.path("alerts")
    compactor = compaction.Compactor(lake, every=3)
    committed = {"alerts": 0}
    done = []
    for batch in range(1, 8):
        lake.append("alerts", _rows(batch), batch)
        committed["alerts"] = batch
        compactor.wrote(["alerts", "symbol_state"])  # symbol_state is merged, never compacted
        done.append(compact_quietly(compactor, committed, wait=True))
    # First use counts the table's small files (2 by batch 1); then every 3 commits.
    assert [d.table if d else None for d in done] == [None, "alerts", None, None, "alerts", None, None]
    assert (done[1].files_removed, done[1].files_added) == (3, 1)
    assert (done[4].files_removed, done[4].files_added) == (4, 1)  # the first compaction's file and 3 new
    assert compaction.data_files(path) == 3  # the compacted file and batches 6 and 7
    assert _sorted(path) == sorted((b, n) for b in range(8) for n in (1, 2))
    history = DeltaTable(path).history(3)
    optimize = next(h for h in history if h["operation"] == "OPTIMIZE")
    assert lake_mod.tagged_batch(optimize.get("userMetadata")) == 5, "tagged with the table's last batch"
    assert lake.marks(("alerts",)) == {"alerts": 7}, "the batches' txn marks are the table's"
    assert max_from_stats(path, "batch_id") == (True, 7), "the compacted file keeps its statistics"


def test_at_most_one_table_a_batch_the_one_with_most_small_files_first(tmp_path):
    lake = _lake(tmp_path, ("alerts", "quotes", "batch_metrics"))
    compactor = compaction.Compactor(lake, every=2)
    compactor.wrote([])  # first use: one small file in each
    for table in ("alerts", "quotes", "batch_metrics"):
        lake.append(table, _rows(1), 1)
    lake.append("quotes", _rows(2), 2)
    compactor.wrote(["alerts", "quotes", "batch_metrics"])
    compactor.wrote(["quotes"])
    order = [compact_quietly(compactor, {"alerts": 1, "quotes": 2, "batch_metrics": 1}, wait=True) for _ in range(4)]
    assert [d.table if d else None for d in order] == ["quotes", "alerts", "batch_metrics", None]


def test_a_failed_compaction_does_not_fail_the_batch_and_changes_nothing(tmp_path, capsys):
    lake = _lake(tmp_path, ("alerts",))
    path = lake.path("alerts")
    for batch in (1, 2):
        lake.append("alerts", _rows(batch), batch)
    version = DeltaTable(path).version()
    next(Path(path).glob("*.parquet")).unlink()  # a data file gone: the compaction cannot read it
    compactor = compaction.Compactor(lake, every=2)
    compactor.wrote(["alerts"])
    assert compact_quietly(compactor, {"alerts": 2}, wait=True) is None
    assert "warning: compaction failed" in capsys.readouterr().err
    assert DeltaTable(path).version() == version, "no commit"


def test_compaction_is_off_with_zero(tmp_path, monkeypatch):
    lake = _lake(tmp_path, ("alerts",))
    monkeypatch.setenv("MARKET_SPREAD_COMPACT_EVERY", "0")
    off = compaction.Compactor(lake)
    off.wrote(["alerts"])
    assert off.every == 0 and off.due() is None and off.pending is None
    assert not off.enabled()
    monkeypatch.setenv("MARKET_SPREAD_COMPACT_EVERY", "often")
    with pytest.raises(SettingError, match="MARKET_SPREAD_COMPACT_EVERY"):
        compaction.Compactor(lake)


def test_a_compaction_runs_beside_the_next_batch_and_both_commits_land_with_every_row(tmp_path):
    """The compaction is started after a batch and runs on the background thread: the call returns
    at once, and the next batch's append to the same table, made meanwhile, and the compaction's
    commit both land, one after the other (whichever takes the table's writer first), with every row."""
    lake = _lake(tmp_path, ("alerts",))
    path = lake.path("alerts")
    for batch in (1, 2, 3):
        lake.append("alerts", _rows(batch), batch)
    compactor = compaction.Compactor(lake, every=2)
    compactor.wrote(["alerts"])
    assert compactor.run({"alerts": 3}) is None and compactor.running is not None, "started, not waited for"
    lake.append("alerts", _rows(4), 4)
    done = compactor.finished(wait=True)
    # 4 files (0-3), or 5 when the append took the writer first
    assert done.table == "alerts" and done.files_removed in (4, 5) and done.files_added == 1
    lake.settle()
    table = DeltaTable(path)
    assert sorted(h["operation"] for h in table.history(2)) == ["OPTIMIZE", "WRITE"] and table.version() == 5
    assert _sorted(path) == sorted((b, n) for b in range(5) for n in (1, 2))


def test_a_compaction_commits_nothing_once_the_stream_cannot_prove_it_holds_the_lake(tmp_path, capsys):
    """The stream's guard (its lease or lock) runs on the background thread before the compaction's
    commit, as before every other commit of the stream."""
    lake = _lake(tmp_path, ("alerts",))
    path = lake.path("alerts")
    for batch in (1, 2):
        lake.append("alerts", _rows(batch), batch)
    version = DeltaTable(path).version()
    compactor = compaction.Compactor(lake, every=2)
    compactor.wrote(["alerts"])

    def lost() -> None:
        raise RuntimeError("the lake's lease is lost")

    assert compact_quietly(compactor, {"alerts": 2}, wait=True, guard=lost) is None
    assert "lease is lost" in capsys.readouterr().err
    assert DeltaTable(path).version() == version and compaction.data_files(path) == 3
