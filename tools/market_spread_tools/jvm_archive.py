"""Write the driver JVM's class-data-sharing archive (see market_spread.runtime.jvm_archive).

    .venv/bin/python -m market_spread_tools.jvm_archive   # make setup runs it once

Runs the product's own `stream` command on a few generated events, over a new lake and then as a
restart; the restart's JVM dumps the classes it loaded when it exits, and the archive is moved into
place. Never fatal: without an archive the product starts as it always did, only slower.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from market_spread.runtime.jvm_archive import DUMP_VARIABLE, archive_path
from market_spread.runtime.spark import session_jars


def _cli(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "market_spread.cli.main", *args], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"market-spread {args[0]} failed: {done.stderr.strip()[-600:]}")


def main() -> int:
    target = archive_path(session_jars())
    if target is None:
        print("jvm archive: disabled (MARKET_SPREAD_CDS_ARCHIVE=off)")
        return 0
    if target.is_file():
        print(f"jvm archive: {target} is there")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as work:
        work_dir = Path(work)
        partial = work_dir / "driver.jsa"
        env = {**os.environ, DUMP_VARIABLE: str(partial)}
        landing, lake = work_dir / "landing", work_dir / "lake"
        symbols = work_dir / "symbols.txt"
        symbols.write_text("".join(f"S{i:04d}\n" for i in range(200)))
        try:
            # A batch on a new lake, then a restart (committed marks, the state read back, a batch).
            for seed, start_at in ((1, "2026-11-23T14:30:00Z"), (2, "2026-11-23T15:30:00Z")):
                _cli(
                    "generate",
                    "--landing",
                    str(landing),
                    "--symbols",
                    str(symbols),
                    "--quotes",
                    "300",
                    "--orders",
                    "300",
                    "--seed",
                    str(seed),
                    "--start",
                    start_at,
                    env=os.environ.copy(),
                )
                # Only the restart dumps (dumping is slow: docs/performance.md, row 'a
                # class-data-sharing archive'): it loads what a first run does and more.
                _cli(
                    "stream",
                    "--landing",
                    str(landing),
                    "--lake",
                    str(lake),
                    "--symbols",
                    str(symbols),
                    "--available-now",
                    env=env if seed == 2 else os.environ.copy(),
                )
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"jvm archive: not written ({exc}); the product runs without it", file=sys.stderr)
            return 0
        if not partial.is_file() or partial.stat().st_size == 0:
            print("jvm archive: the JVM wrote no archive; the product runs without it", file=sys.stderr)
            return 0
        # Renamed into place whole: a session starting meanwhile sees no archive, never half of one.
        staged = target.with_suffix(".partial")
        shutil.move(str(partial), staged)
        os.replace(staged, target)
    print(f"jvm archive: wrote {target} ({target.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
