"""kernel.file_json reads a landing file whole only where every row it takes is a line the reference
engine finds valid, with the very same values; every other line comes back for the line-at-a-time
way, or the whole file does. Over files of valid lines with random mutations among them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from market_spread.kernel import file_json as driver_json
from market_spread_tools.reference import parse_line
from tests.helpers.mutations import mutations as _mutations
from tests.helpers.records import T, order, quote
from tests.helpers.symbols import SYMBOLS

UNIVERSE = frozenset(SYMBOLS)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIELDS = {
    "quotes": ("symbol", "bid", "offer", "time", "seq"),
    "orders": ("order_id", "account", "symbol", "side", "qty", "price", "time", "seq"),
}


def _valid(feed: str) -> list[str]:
    if feed == "quotes":
        return [quote(s, T.format(k), "10.25", "10.5", seq=k if k % 2 else None) for k, s in enumerate(SYMBOLS)]
    return [
        order(f"O-{k}", s, T.format(k), side="SELL" if k % 2 else "BUY", qty="100", price="10.5", seq=k)
        for k, s in enumerate(SYMBOLS)
    ]


def _reference(feed: str, lines: list[str]) -> dict[str, tuple | None]:
    """Per line, the reference engine's values (time in µs), or None when it does not find it valid."""
    out: dict[str, tuple | None] = {}
    for line in lines:
        record, _ = parse_line(feed, line, set(SYMBOLS))
        if record is not None:
            record["time"] = (record["time"] - _EPOCH) // timedelta(microseconds=1)
        out[line] = None if record is None else tuple(record[f] for f in FIELDS[feed])
    return out


def test_a_file_read_whole_takes_only_valid_lines_with_the_reference_values():
    rng = random.Random(54)
    checked = taken_files = 0
    for feed in ("quotes", "orders"):
        valid = _valid(feed)
        files = [[rng.choice(valid) for _ in range(20)] for _ in range(60)]
        for lines in files[20:]:  # a few odd lines among valid ones
            for at in rng.sample(range(len(lines)), rng.randrange(1, 3)):
                lines[at] = _mutations(rng, valid, 1)[0]
        every = sorted({line for lines in files for line in lines})
        says = _reference(feed, every)
        for lines in files:
            got = driver_json.parse_file(feed, ("\n".join(lines) + "\n").encode(), UNIVERSE)
            if got is None:
                continue
            taken_files += 1
            rows, rest = got
            assert rows.num_rows + len(rest) == len(lines)
            taken = [line for line in lines if line not in set(rest.to_pylist())]
            for line, row in zip(taken, rows.to_pylist()):
                assert says[line] == tuple(row[f] for f in FIELDS[feed]), line
                checked += 1
    assert taken_files >= 40 and checked >= 800, (taken_files, checked)


def test_files_not_of_the_plain_shape_are_left_to_the_lines_way():
    good = (quote("AAPL", T.format(1), "1", "2") + "\n").encode()
    assert driver_json.parse_file("quotes", good, UNIVERSE) is not None
    for odd in (
        good.replace(b"\n", b"\r\n"),
        good[:-1],
        b"\n" + good,
        good + b"\n",
        good.replace(b'"AAPL"', b'"AA\\u0050L"'),
        good.replace(b"1,", b'"1",', 1),
        good.replace(b'"bid": 1', b'"bid": NaN'),
        b"\xef\xbb\xbf" + good,
        b"",
    ):
        assert driver_json.parse_file("quotes", odd, UNIVERSE) is None, odd
