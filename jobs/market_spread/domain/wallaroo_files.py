"""Decoding one Wallaroo input file of either format, fixish frames or FIX text, detected from its
first bytes."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from market_spread.domain.fix_text import decode_fix_text
from market_spread.domain.fixish import decode_fixish
from market_spread.domain.wallaroo_records import DecodeError, Item, Kind, StrictDecodeError


def detect_format(head: bytes) -> Literal["fix", "fixish"]:
    """FIX text starts (after blanks, a BOM or a quote) with the 8=FIX begin string."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lstrip(b'"')
    return "fix" if text.startswith(b"8=FIX") else "fixish"


def decode_file(path: str | Path, expect: Kind | None = None, strict: bool = False) -> Iterator[Item]:
    """Decode one file of either format (detected from its first bytes), in file order."""
    path = Path(path)
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return  # mmap cannot map an empty file
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            decoder = decode_fix_text if detect_format(data[:64]) == "fix" else decode_fixish
            for item in decoder(data, str(path), expect):
                if strict and isinstance(item, DecodeError):
                    raise StrictDecodeError(item)
                yield item
