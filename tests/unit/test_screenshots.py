"""The README's screenshots come from `make screenshots` (tools/market_spread_tools/screenshots.py),
which stores the text each page showed in its PNG: none may show an absolute path of the machine
that made it, and the README shows each with its caption (issue 68)."""

from __future__ import annotations

import re
from pathlib import Path

from market_spread_tools.screenshots import SHOTS, page_text, with_text
from tests.helpers.paths import ROOT

# A path from the root of a machine's file system, as pages would print it (not a URL's path).
ABSOLUTE = re.compile(r"(?<![\w.:/-])/(?:tmp|work|root|home|Users|var|opt|srv|mnt|private|usr|data)/")


def absolute_paths(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if ABSOLUTE.search(line)]


def test_every_screenshot_shows_its_page_without_an_absolute_path() -> None:
    for shot in SHOTS:
        text = page_text(ROOT / "docs" / shot.file)
        assert text, f"docs/{shot.file} was not made by make screenshots (no page text in it)"
        assert absolute_paths(text) == [] and str(ROOT) not in text, f"docs/{shot.file}: {absolute_paths(text)}"


def test_the_check_sees_an_absolute_path_in_a_screenshot(tmp_path: Path) -> None:
    from PIL import Image

    plain = tmp_path / "plain.png"
    Image.new("RGB", (4, 4)).save(plain)
    png = tmp_path / "shot.png"
    png.write_bytes(
        with_text(plain.read_bytes(), "checkpoint /tmp/run-7/lake/_checkpoints/stream\nsource files data/landing")
    )
    assert absolute_paths(page_text(png) or "") == ["checkpoint /tmp/run-7/lake/_checkpoints/stream"]
    assert page_text(plain) is None
    assert absolute_paths("GET /api/v2/dags and https://example.org/tmp/x, data/lake") == []


def test_the_readme_shows_each_screenshot_with_its_caption() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for shot in SHOTS:
        assert f"(docs/{shot.file})" in readme, shot.file
        assert shot.caption in readme, f"the caption of {shot.file}"
