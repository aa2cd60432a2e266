"""`replay`: Wallaroo's own fixish and FIX text files -> landing files; corrupt inputs reported by offset."""

from __future__ import annotations

import json
import re
import struct
from itertools import islice
from pathlib import Path

import pytest

from market_spread.cli.main import main
from market_spread.domain.wallaroo_files import decode_file, detect_format
from market_spread.domain.wallaroo_records import DecodeError, Order, Quote, Record, decimal_text
from market_spread_tools.reference import parse_line

PAIRS = [  # (fixish conversion, FIX text original), relative to the Wallaroo data folder
    ("converted/small-nbbo-fixish.msg", "history/demos/marketspread/small-nbbo.msg"),
    ("converted/small-trades-fixish.msg", "history/demos/marketspread/small-trades.msg"),
    ("converted/initial-nbbo-fixish.msg", "history/demos/marketspread/initial-nbbo.msg"),
    (
        "converted/fixgen-initial-nbbo-20160901-fixish.msg",
        "history/fix-generator/initial-nbbo-generator/initial-nbbo.msg",
    ),
    ("converted/10000trades-fixish.msg", "history/demos/marketspread/10000trades.msg"),
    ("history/demos/marketspread/100nbbo-fixish.msg", "history/demos/marketspread/100nbbo.msg"),
    ("history/demos/marketspread/1000nbbo-fixish.msg", "history/demos/marketspread/1000nbbo.msg"),
    ("history/demos/marketspread/1000trades-fixish.msg", "history/demos/marketspread/1000trades.msg"),
]
NUMBER = re.compile(r'"(?:bid|offer|qty|price)": (-?\d+(?:\.\d+)?)[,}]')


def message_files(root: Path) -> list[Path]:
    """Every fixish or FIX message file (symbol lists share the .msg suffix but are not messages)."""
    return sorted(p for p in root.rglob("*.msg") if not p.name.endswith("-legal-symbols.msg"))


def count_units(path: Path) -> int:
    """Frames of a fixish file (walking the length prefixes) or non-blank lines of FIX text."""
    data = path.read_bytes()
    if detect_format(data[:64]) == "fix":
        return sum(1 for line in data.split(b"\n") if line.strip())
    at, frames = 0, 0
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        at, frames = at + 4 + length, frames + 1
    assert at == len(data), f"{path} does not end on a frame boundary"
    return frames


def kinds(path: Path) -> set[str]:
    """Message kinds among a file's first records (enough to tell an nbbo file from an order file)."""
    return {type(i.message).__name__ for i in islice(decode_file(path), 5) if isinstance(i, Record)}


def replay(landing: Path, *args: str) -> int:
    return main(["replay", "--landing", str(landing), *args])


def landing_lines(landing: Path, stream: str, stem: str | None = None) -> list[str]:
    files = sorted((landing / stream).glob("*.jsonl"))
    if stem is not None:
        files = [f for f in files if f.name.endswith(f"-{stem}.jsonl")]
    return [line for f in files for line in f.read_text().splitlines()]


# --- Wallaroo's own files ----------------------------------------------------------------------


def test_every_wallaroo_message_file_replays(wallaroo_dir: Path, tmp_path: Path, capsys) -> None:
    files = message_files(wallaroo_dir)
    assert len(files) >= 25
    nbbo = [f for f in files if "Quote" in kinds(f)]
    orders = [f for f in files if "Order" in kinds(f)]
    assert set(nbbo) | set(orders) == set(files)
    inputs = [("quotes", f) for f in nbbo] + [("orders", f) for f in orders]  # replay's input order

    assert replay(tmp_path, "--nbbo", *map(str, nbbo), "--orders", *map(str, orders)) == 0
    out = capsys.readouterr().out
    found = re.findall(r"replay: (\S+) -> (\w+): read (\d+), written (\d+), rejected (\d+)", out)
    assert [(stream, str(f)) for stream, f in inputs] == [(stream, path) for path, stream, *_ in found]
    for index, ((stream, f), (_, _, read, written, rejected)) in enumerate(zip(inputs, found)):
        read, written, rejected = int(read), int(written), int(rejected)
        assert read == count_units(f) and read == written + rejected, f
        if f.name != "repeat_order.msg":  # 1 quote and 2 orders in one file: the other kind is rejected
            assert rejected == 0, f
        lines = [
            line
            for p in sorted((tmp_path / stream).glob(f"replay-*-{index:03d}-*.jsonl"))
            for line in p.read_text().splitlines()
        ]
        assert len(lines) == written
        seqs = [json.loads(line)["seq"] for line in lines]
        assert seqs == sorted(seqs) and (rejected or seqs == list(range(written)))
    total = sum(count_units(f) for _, f in inputs)
    assert f"replay: total: read {total}, " in out


def test_mixed_file_splits_by_role(wallaroo_dir: Path, tmp_path: Path, capsys) -> None:
    mixed = wallaroo_dir / "history/demos/marketspread/repeat_order.msg"
    assert replay(tmp_path, "--nbbo", str(mixed), "--orders", str(mixed)) == 0
    out, err = capsys.readouterr()
    assert out.count("read 3") == 2
    assert "written 1, rejected 2" in out and "written 2, rejected 1" in out
    assert f"{mixed}:0: wrong_type: quote message" in err  # the quote, first line, in the orders role
    quotes = [json.loads(line) for line in landing_lines(tmp_path, "quotes")]
    orders = [json.loads(line) for line in landing_lines(tmp_path, "orders")]
    assert [q["seq"] for q in quotes] == [0] and [o["seq"] for o in orders] == [1, 2]
    assert [o["order_id"] for o in orders] == ["HMtWvd", "xZgsNH"]


def test_converted_files_equal_their_fix_text_originals(wallaroo_dir: Path, tmp_path: Path) -> None:
    for fixish, text in PAIRS:
        a, b = tmp_path / f"a-{Path(fixish).stem}", tmp_path / f"b-{Path(fixish).stem}"
        role = "--nbbo" if "nbbo" in fixish else "--orders"
        assert replay(a, role, str(wallaroo_dir / fixish)) == 0
        assert replay(b, role, str(wallaroo_dir / text)) == 0
        stream = "quotes" if role == "--nbbo" else "orders"
        left, right = landing_lines(a, stream), landing_lines(b, stream)
        assert len(left) == count_units(wallaroo_dir / fixish)
        assert left == right, fixish


def test_landing_records_follow_the_contract(wallaroo_dir: Path, tmp_path: Path) -> None:
    demo = wallaroo_dir / "history/demos/marketspread"
    assert replay(tmp_path, "--nbbo", str(demo / "small-nbbo.msg"), "--orders", str(demo / "small-trades.msg")) == 0
    quotes, orders = landing_lines(tmp_path, "quotes"), landing_lines(tmp_path, "orders")
    assert quotes[1] == (
        '{"symbol": "LNG", "transact_time": "2015-12-04T14:30:00.000Z", "bid": 9.39, "offer": 9.4, "seq": 1}'
    )
    assert orders[0] == (
        '{"order_id": "HMtWvd", "account": 57, "symbol": "BTU", "side": "BUY", "qty": 1337900.0, '
        '"price": 0.74749102461495, "transact_time": "2015-12-04T14:30:00.000Z", "seq": 0}'
    )
    # Every replayed line is a valid landing line for the stream's own parser rules.
    universe = {json.loads(line)["symbol"] for line in quotes + orders}
    for stream, lines in (("quotes", quotes), ("orders", orders)):
        for line in lines:
            assert parse_line(stream, line, universe)[1] is None, line


def test_padded_and_long_symbols(wallaroo_dir: Path, tmp_path: Path) -> None:
    nbbo = wallaroo_dir / "testing/data/market_spread/nbbo/350-symbols_initial-nbbo-fixish.msg"
    assert replay(tmp_path, "--nbbo", str(nbbo)) == 0
    symbols = [json.loads(line)["symbol"] for line in landing_lines(tmp_path, "quotes")]
    assert all(s == s.strip() and 1 <= len(s) <= 4 for s in symbols)
    assert {"NFX", "GE", "NI"} <= set(symbols)  # " NFX", "  GE", "  NI" in the frames


def test_all_numbers_plain_decimal_text(wallaroo_dir: Path, tmp_path: Path) -> None:
    assert replay(tmp_path, "--orders", str(wallaroo_dir / "converted/10000trades-fixish.msg")) == 0
    for line in landing_lines(tmp_path, "orders"):
        assert len(NUMBER.findall(line)) == 2, line  # qty and price: plain digits, no exponent


@pytest.mark.parametrize(
    "value, text",
    [
        (9.4, "9.4"),
        (0.74749102461495, "0.74749102461495"),
        (1337900.0, "1337900.0"),
        (1e-05, "0.00001"),
        (1.3379e21, "1337900000000000000000"),
        (0.1 + 0.2, "0.30000000000000004"),
    ],
)
def test_decimal_text(value: float, text: str) -> None:
    assert decimal_text(value) == text


# --- corrupt inputs ----------------------------------------------------------------------------


@pytest.fixture
def frames(wallaroo_dir: Path) -> dict[str, list[bytes]]:
    """Real frames (length prefix included) cut from Wallaroo's small converted files."""
    out = {}
    for name, size in (("nbbo", 46), ("trades", 57)):
        data = (wallaroo_dir / f"converted/small-{name}-fixish.msg").read_bytes()
        out[name] = [data[i : i + size] for i in range(0, len(data), size)]
    return out


def decode(path: Path, expect: str) -> tuple[list[Record], list[DecodeError]]:
    items = list(decode_file(path, expect=expect))
    return [i for i in items if isinstance(i, Record)], [i for i in items if isinstance(i, DecodeError)]


def errors_at(path: Path, expect: str) -> list[tuple[int, str]]:
    return [(e.offset, e.kind) for e in decode(path, expect)[1]]


def test_truncated_last_frame(frames, tmp_path: Path) -> None:
    f = tmp_path / "t.msg"
    f.write_bytes(b"".join(frames["nbbo"])[:-10])
    records, errors = decode(f, "quote")
    assert [r.message.symbol for r in records] == ["VLO", "LNG"]
    assert [(e.offset, e.kind) for e in errors] == [(92, "truncated")]
    assert "declares 42 payload bytes, 32 left" in errors[0].detail
    f.write_bytes(b"".join(frames["nbbo"]) + b"\x00\x00")  # a cut length prefix
    assert errors_at(f, "quote") == [(138, "truncated")]


def test_wrong_message_type(frames, tmp_path: Path) -> None:
    f = tmp_path / "w.msg"
    unknown = struct.pack(">IB", 42, 9) + frames["nbbo"][1][5:]  # a 42-byte frame of type 9
    f.write_bytes(frames["nbbo"][0] + frames["trades"][0] + unknown + frames["nbbo"][2])
    records, errors = decode(f, "quote")
    assert [(e.offset, e.kind) for e in errors] == [(46, "wrong_type"), (103, "wrong_type")]
    assert "unknown message type 9" in errors[1].detail
    assert [(r.position, r.offset, r.message.symbol) for r in records] == [(0, 0, "VLO"), (3, 149, "BTU")]


def test_zero_length_frame_and_wrong_length(frames, tmp_path: Path) -> None:
    f = tmp_path / "z.msg"
    short = struct.pack(">I", 40) + frames["nbbo"][1][4:44]  # a market data frame of 40 bytes
    f.write_bytes(frames["nbbo"][0] + b"\x00\x00\x00\x00" + short + frames["nbbo"][2])
    records, errors = decode(f, "quote")
    assert [(e.offset, e.kind) for e in errors] == [(46, "zero_length"), (50, "wrong_length")]
    assert [(r.position, r.offset) for r in records] == [(0, 0), (3, 94)]


def test_garbage_bytes(frames, tmp_path: Path) -> None:
    f = tmp_path / "g.msg"
    f.write_bytes(frames["trades"][0] + b"GARBAGE!!" + frames["trades"][1] + frames["trades"][2] + b"\xff" * 7)
    records, errors = decode(f, "order")
    assert [(e.offset, e.kind) for e in errors] == [(57, "garbage"), (180, "garbage")]
    assert errors[0].detail == "9 bytes skipped up to the next frame at offset 66"
    assert errors[1].detail == "7 bytes skipped up to the end of the file"
    assert [(r.position, r.offset, r.message.order_id) for r in records] == [
        (0, 0, "HMtWvd"),
        (1, 66, "I8Feqd"),
        (2, 123, "DGzYvS"),
    ]


def test_bad_fields(frames, tmp_path: Path) -> None:
    order = bytearray(frames["trades"][0])
    order[5] = 3  # side 3
    quote = bytearray(frames["nbbo"][0])
    quote[9 + 4 : 9 + 6] = b"13"  # month 13
    nan = bytearray(frames["nbbo"][1])
    nan[30:38] = struct.pack(">d", float("nan"))
    f = tmp_path / "o.msg"
    f.write_bytes(bytes(order) + frames["trades"][1])
    assert errors_at(f, "order") == [(0, "bad_field")]
    f.write_bytes(bytes(quote) + bytes(nan) + frames["nbbo"][2])
    records, errors = decode(f, "quote")
    assert [(e.offset, e.kind) for e in errors] == [(0, "bad_field"), (46, "bad_field")]
    assert "not a real time" in errors[0].detail and "bid is not finite" in errors[1].detail
    assert [r.position for r in records] == [2]


def test_fix_text_errors(wallaroo_dir: Path, tmp_path: Path) -> None:
    lines = (wallaroo_dir / "history/demos/marketspread/small-trades.msg").read_bytes().splitlines(keepends=True)
    f = tmp_path / "t.msg"
    bad_price = lines[1].replace(b"44=47.96475794714856", b"44=47.9x")
    no_symbol = lines[2].replace(b"\x0155=VLO", b"")
    f.write_bytes(lines[0] + b"\n" + bad_price + b"not fix at all\n" + no_symbol)
    records, errors = decode(f, "order")
    starts = [0, len(lines[0]) + 1, len(lines[0]) + 1 + len(bad_price), len(lines[0]) + 1 + len(bad_price) + 15]
    assert [(e.offset, e.kind) for e in errors] == [
        (starts[1], "bad_field"),
        (starts[2], "not_fix"),
        (starts[3], "bad_field"),
    ]
    assert "missing tag 55" in errors[2].detail
    assert [(r.position, r.offset) for r in records] == [(0, 0)]  # the blank line is not a record


def test_cli_reports_offsets_and_goes_on(frames, tmp_path: Path, capsys) -> None:
    f = tmp_path / "bad-nbbo.msg"
    f.write_bytes(frames["nbbo"][0] + b"\x00\x00\x00\x00" + frames["nbbo"][1] + b"junk" + frames["nbbo"][2][:-1])
    assert replay(tmp_path / "landing", "--nbbo", str(f)) == 0
    out, err = capsys.readouterr()
    assert f"{f}:46: zero_length" in err
    assert f"{f}:96: garbage" in err
    assert f"{f}:100: truncated" in err
    assert f"{f} -> quotes: read 5, written 2, rejected 3" in out
    assert [json.loads(x)["seq"] for x in landing_lines(tmp_path / "landing", "quotes")] == [0, 2]


def test_strict_stops_at_the_first_error_and_writes_nothing(frames, tmp_path: Path, capsys) -> None:
    good, bad = tmp_path / "good.msg", tmp_path / "bad.msg"
    good.write_bytes(b"".join(frames["nbbo"]))
    bad.write_bytes(frames["trades"][0] + frames["nbbo"][0] + b"\x00\x00\x00\x00")
    landing = tmp_path / "landing"
    assert replay(landing, "--strict", "--nbbo", str(good), "--orders", str(bad)) == 1
    err = capsys.readouterr().err
    assert f"{bad}:57: wrong_type" in err and "zero_length" not in err
    assert not landing_lines(landing, "quotes") and not landing_lines(landing, "orders")
    assert replay(landing, "--strict", "--nbbo", str(good)) == 0
    assert len(landing_lines(landing, "quotes")) == 3


# --- output files ------------------------------------------------------------------------------


def test_chunks_sort_in_landing_order_across_replays(wallaroo_dir: Path, tmp_path: Path) -> None:
    nbbo = wallaroo_dir / "history/demos/marketspread/100nbbo-fixish.msg"
    assert replay(tmp_path, "--records-per-file", "30", "--nbbo", str(nbbo)) == 0
    first = sorted(p.name for p in (tmp_path / "quotes").iterdir())
    assert len(first) == 4 and all(not n.startswith(".") for n in first)
    assert replay(tmp_path, "--records-per-file", "30", "--nbbo", str(nbbo)) == 0
    names = sorted(p.name for p in (tmp_path / "quotes").iterdir())
    assert len(names) == 8 and names[:4] == first  # the second replay sorts after the first
    seqs = [json.loads(x)["seq"] for x in landing_lines(tmp_path, "quotes")]
    assert seqs == list(range(100)) * 2


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "nothing to replay"),
        (["--nbbo", "/nonexistent.msg"], "input file not found"),
        (["--records-per-file", "0", "--nbbo", __file__], "--records-per-file must be >= 1"),
    ],
)
def test_bad_arguments_exit_2(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    assert replay(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_decoded_messages_are_typed(wallaroo_dir: Path) -> None:
    items = list(decode_file(wallaroo_dir / "converted/small-trades-fixish.msg", expect="order"))
    assert items[0] == Record(
        0, 0, Order("BUY", 57, "HMtWvd", "BTU", 1337900.0, 0.74749102461495, "2015-12-04T14:30:00.000Z")
    )
    quote = next(iter(decode_file(wallaroo_dir / "converted/small-nbbo-fixish.msg")))
    assert quote.message == Quote("VLO", "2015-12-04T14:30:00.000Z", 16.64, 16.64)
