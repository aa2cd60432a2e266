"""The move of a quotes-first checkpoint to orders first: its steps, a kill between them, and what it
refuses to touch. (tests/stream/test_source_order.py runs a moved checkpoint through Spark.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from market_spread.runtime.stream_contract import EXIT_REFUSED
from market_spread.stream import checkpoint_layout as layout
from tests.helpers.cli import market_spread

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def _legacy(checkpoint: Path, offsets: list[tuple[int, int]]) -> None:
    """A checkpoint as the version before wrote it: quotes in sources/0, orders in sources/1."""
    for n, feed in (("0", "quotes"), ("1", "orders")):
        (checkpoint / "sources" / n).mkdir(parents=True)
        (checkpoint / "sources" / n / "0").write_text(
            f'v1\n{{"path":"file:///l/{feed}/a.jsonl","timestamp":1,"batchId":0}}'
        )
    (checkpoint / "offsets").mkdir()
    for i, (q, o) in enumerate(offsets):
        (checkpoint / "offsets" / str(i)).write_text(f'v1\n{META}\n{{"logOffset":{q}}}\n{{"logOffset":{o}}}')
        (checkpoint / "offsets" / f".{i}.crc").write_bytes(b"stale")
    (checkpoint / "metadata").write_text('{"id":"x"}')


def _feed_of(folder: Path) -> str:
    return Path((folder / "0").read_text().split('"path":"')[1].split('"')[0]).parent.name


def _assert_moved(checkpoint: Path) -> None:
    assert layout.recorded_order(checkpoint) == ("orders", "quotes")
    assert _feed_of(checkpoint / "sources" / "0") == "orders" and _feed_of(checkpoint / "sources" / "1") == "quotes"
    assert (checkpoint / "offsets" / "1").read_text() == f'v1\n{META}\n{{"logOffset":0}}\n{{"logOffset":1}}'
    assert not (checkpoint / "offsets" / ".1.crc").exists(), "a stale checksum would fail Spark's read"
    assert (checkpoint / "metadata").read_text() == '{"id":"x"}'
    assert not layout._staging(checkpoint).exists() and not layout._retired(checkpoint).exists()


def test_a_new_checkpoint_is_orders_first_from_the_start(tmp_path):
    checkpoint = tmp_path / "stream"
    assert layout.prepare(checkpoint) is None
    assert layout.recorded_order(checkpoint) == ("orders", "quotes")
    assert layout.prepare(checkpoint) is None  # and stays so


def test_a_quotes_first_checkpoint_is_moved_once(tmp_path):
    checkpoint = tmp_path / "stream"
    _legacy(checkpoint, [(0, 0), (1, 0)])
    message = layout.prepare(checkpoint)
    assert message and "2 batches" in message
    _assert_moved(checkpoint)
    assert layout.prepare(checkpoint) is None  # a second start moves nothing back


def test_a_planning_killed_before_its_offsets_still_counts_as_quotes_first(tmp_path):
    checkpoint = tmp_path / "stream"
    _legacy(checkpoint, [])
    assert layout.prepare(checkpoint)
    assert _feed_of(checkpoint / "sources" / "0") == "orders"


def test_a_kill_while_copying_redoes_the_move(tmp_path):
    checkpoint = tmp_path / "stream"
    _legacy(checkpoint, [(0, 0), (1, 0)])
    partial = layout._staging(checkpoint)
    shutil.copytree(checkpoint / "sources", partial / "sources")  # half a copy, no layout file
    assert layout.prepare(checkpoint)
    _assert_moved(checkpoint)


def test_a_kill_between_the_two_renames_finishes_the_move(tmp_path):
    checkpoint = tmp_path / "stream"
    _legacy(checkpoint, [(0, 0), (1, 0)])
    reference = tmp_path / "reference" / "stream"
    shutil.copytree(checkpoint, reference)
    layout.prepare(reference)
    # The state right after `checkpoint.rename(retired)`: the old one aside, the complete copy beside it.
    shutil.copytree(reference, layout._staging(checkpoint))
    checkpoint.rename(layout._retired(checkpoint))
    assert layout.prepare(checkpoint) is None
    _assert_moved(checkpoint)


def test_offsets_of_another_kind_are_refused_untouched(tmp_path):
    checkpoint = tmp_path / "stream"
    _legacy(checkpoint, [(0, 0)])
    # Three file sources: not a checkpoint this stream wrote (a Kafka one is refused before, as such).
    (checkpoint / "offsets" / "0").write_text(f'v1\n{META}\n{{"logOffset":0}}\n{{"logOffset":0}}\n{{"logOffset":0}}')
    before = {p.relative_to(checkpoint): p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()}
    with pytest.raises(layout.CheckpointLayoutError, match="not the offsets of two file sources"):
        layout.prepare(checkpoint)
    assert {p.relative_to(checkpoint): p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()} == before
    assert not layout._staging(checkpoint).exists()
    # The command says so in one line and exits 'refused', before any Spark starts.
    lake = tmp_path / "lake"
    done = market_spread(
        "stream",
        "--landing",
        str(tmp_path / "in"),
        "--lake",
        str(lake),
        "--checkpoint",
        str(checkpoint),
        "--available-now",
        timeout=120,
    )
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert "not the offsets of two file sources" in done.stderr and "Traceback" not in done.stderr
