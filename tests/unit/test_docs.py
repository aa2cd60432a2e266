"""The README stays a front door a newcomer reads in minutes, and the docs' links stay true.

Read from the files, nothing imported: every relative link in README.md and docs/*.md names a file
of the repository, and an `#anchor` in a Markdown target names one of its headings (GitHub's slugs).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 450
# Written by a generator, not by hand: docs/configuration.md comes from the settings registry
# (runtime/settings.py). A link to it is checked like any other once the file exists.
GENERATED = {Path("docs/configuration.md")}

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target); the target ends at a space (a title may follow) or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text without fenced code and code spans: a `[x](y)` there is code, not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base, n = slug(heading), 0
        name = base
        while name in found:  # GitHub numbers repeated headings: x, x-1, x-2
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def links(page: Path) -> list[str]:
    return [
        t
        for t in LINK.findall(prose(page.read_text(encoding="utf-8")))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)
    ]  # http:, https:, mailto: are not ours


def target_path(page: Path, target: str) -> Path:
    path_part = target.partition("#")[0]
    return (page.parent / path_part).resolve() if path_part else page


def is_generated(page: Path, target: str) -> bool:
    return any(target_path(page, target) == (ROOT / g).resolve() for g in GENERATED)


def broken(page: Path, target: str, root: Path = ROOT) -> str | None:
    """Why a link of `page` does not resolve, or None."""
    resolved, anchor = target_path(page, target), target.partition("#")[2]
    where = page.relative_to(root)
    if not resolved.is_relative_to(root):
        return f"{where}: {target}: outside the repository"
    if not resolved.exists():
        return f"{where}: {target}: no such file"
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"{where}: {target}: no heading #{anchor} in {resolved.relative_to(root)}"
    return None


def test_the_readme_is_read_in_minutes():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; details belong in docs/"


def test_the_readme_shows_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "make run" in text and "make test" in text


def test_the_readme_keeps_users_inside_the_repository():
    assert "../shared" not in README.read_text(encoding="utf-8")


def test_every_relative_link_resolves():
    wrong = [
        why
        for page in pages()
        for target in links(page)
        if not is_generated(page, target) and (why := broken(page, target)) is not None
    ]
    assert not wrong, "\n".join(wrong)


def test_links_to_generated_docs_resolve():
    linked = [(page, target) for page in pages() for target in links(page) if is_generated(page, target)]
    missing = sorted(
        {
            str(target_path(page, target).relative_to(ROOT))
            for page, target in linked
            if not target_path(page, target).exists()
        }
    )
    if missing:
        pytest.skip(f"{', '.join(missing)}: generated from the settings registry, not in this checkout yet")
    wrong = [why for page, target in linked if (why := broken(page, target)) is not None]
    assert not wrong, "\n".join(wrong)


def test_the_link_checker_sees_what_is_broken(tmp_path):
    (tmp_path / "other.md").write_text("## Run it\n## Run it\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# A Title: here\n\n[ok](#a-title-here) [bad](#nope) [gone](missing.md) "
        "[twice](other.md#run-it-1) ![img](other.md) [web](https://example.org/x) "
        "[out](../elsewhere.md) `[code](not-a-link.md)`\n```\n[fenced](not-a-link.md)\n```\n",
        encoding="utf-8",
    )
    assert links(page) == ["#a-title-here", "#nope", "missing.md", "other.md#run-it-1", "other.md", "../elsewhere.md"]
    found = [why for target in links(page) if (why := broken(page, target, root=tmp_path))]
    assert [f.split(": ")[1] for f in found] == ["#nope", "missing.md", "../elsewhere.md"], found


# A ratio such as "1.35x" or "25x": the form every speed and growth figure of the docs takes.
RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x\b")
QUOTING = ("README.md", "docs/architecture.md", "docs/operations.md")


def ratios(text: str) -> set[str]:
    return set(RATIO.findall(text))


def test_every_figure_the_docs_quote_stands_in_the_performance_page():
    """docs/performance.md holds every figure (issue 63: architecture.md said 1.087x growth while
    performance.md said 2.10x); a page that quotes a ratio that page does not have is stale."""
    perf = ratios((ROOT / "docs" / "performance.md").read_text(encoding="utf-8"))
    stale = {doc: sorted(ratios((ROOT / doc).read_text(encoding="utf-8")) - perf) for doc in QUOTING}
    assert not any(stale.values()), f"figures quoted but not in docs/performance.md: {stale}"


def test_the_figure_check_sees_a_stale_ratio():
    assert ratios("grows 1.087x after 10,000 batches, 25x faster; v4.1.x, 0x1f, `2.5x in code`") == {
        "1.087x",
        "25x",
        "2.5x",
    }


# docs/operations.md's Tests section holds the one current figure of make test and make test-fast
# (issue 63); the README quotes both, word for word.
LATEST = re.compile(r"\*\*Latest figure\*\*[^:]*: ([^(]+?) with set-up .*?`make test-fast` (?:in )?([^(,;]+?)[,;(]")


def latest_figures(text: str) -> tuple[str, str] | None:
    found = LATEST.search(text)
    return (found.group(1).strip(), found.group(2).strip()) if found else None


def test_the_readme_quotes_the_latest_test_figures():
    figures = latest_figures((ROOT / "docs" / "operations.md").read_text(encoding="utf-8"))
    assert figures, "docs/operations.md, Tests: no **Latest figure** line with make test and make test-fast"
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert all(figure in readme for figure in figures), f"the README does not quote {figures}"


def test_the_figure_reader_finds_both_figures():
    line = (
        "**Latest figure** (budget 20 minutes): 18 min 2 s with set-up (1,082 s), `make test-fast` 2 min 41 s (161 s)."
    )
    assert latest_figures(line) == ("18 min 2 s", "2 min 41 s")
