"""The README's commands, run as a newcomer copies them into a fresh folder: they work, and what the
text around them promises (the Wallaroo demo's counts, a one-line error for a misspelt table) is
what they print. tests/unit/test_docs.py checks the links; this checks the commands."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def block_after(marker: str) -> list[str]:
    """The commands of the first bash block after `marker` in the README (continued lines joined)."""
    start = README.index(marker)
    body = README[README.index("```bash\n", start) + len("```bash\n") :]
    body = body[: body.index("```")].replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in body.splitlines() if line.strip()]


def run(command: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    args = shlex.split(command)
    assert args[0] == ".venv/bin/market-spread", command
    done = subprocess.run(
        [str(BIN / "market-spread"), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    return done


def test_the_first_query_by_hand_works_in_a_fresh_folder(tmp_path):
    commands = block_after("Or without Airflow, by hand")
    assert [c.split()[1] for c in commands] == ["generate", "stream", "sql"]
    for command in commands:
        done = run(command, tmp_path)
    assert "order_id" in done.stdout and "(10 rows)" in done.stdout, done.stdout


def test_the_wallaroo_demo_gives_what_the_readme_says(tmp_path, wallaroo_dir):
    commands = block_after("`replay` turns Wallaroo's own files into landing files")
    demo = wallaroo_dir / "history" / "demos" / "marketspread"
    assert commands[0].startswith("WALLAROO=")
    for command in commands[1:]:
        run(command.replace("$WALLAROO", str(demo)), tmp_path)
    promised = re.search(
        r"this demo gives (\d+) `no_market_data` alerts.*?and no `wide_spread` one, and quarantines (\d+) lines "
        r"\((\d+)\s+`unknown_symbol`, (\d+) `non_positive:qty`\)",
        README,
        re.S,
    )
    assert promised, "the README's sentence on the demo's figures"
    lake = "data/wallaroo/lake"
    alerts = run(
        f'.venv/bin/market-spread sql --lake {lake} "SELECT reason, count(*) AS n FROM alerts GROUP BY reason"',
        tmp_path,
    )
    assert re.findall(r"\| (\w+)\s*\| (\d+)", alerts.stdout) == [("no_market_data", promised[1])], alerts.stdout
    bad = run(
        f'.venv/bin/market-spread sql --lake {lake} "SELECT reason, count(*) AS n FROM quarantine GROUP BY reason ORDER BY n DESC"',
        tmp_path,
    )
    found = dict(re.findall(r"\| ([\w:]+)\s*\| (\d+)", bad.stdout))
    assert found == {"unknown_symbol": promised[3], "non_positive:qty": promised[4]}, bad.stdout
    assert sum(map(int, found.values())) == int(promised[2])
    # A misspelt table: one line on stderr (docs/operations.md, Errors and exit codes), nothing more.
    typo = subprocess.run(
        [str(BIN / "market-spread"), "sql", "--lake", lake, "SELECT * FROM alertz"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = typo.stderr.splitlines()
    assert typo.returncode == 1 and len(lines) == 1, typo.stderr[-3000:]
    assert lines[0].startswith("market-spread sql: error:") and "alertz" in lines[0]


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md"])
def test_the_docs_name_tests_that_exist(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    for named in re.findall(r"`(tests/[\w/]+\.py)`", text):
        assert (ROOT / named).is_file(), f"{doc} names {named}, which does not exist"
