"""A class-data-sharing archive for the driver JVM: Spark's and Delta's classes loaded from a
memory-mapped archive instead of parsed and verified from the JARs at every start.

`make setup` writes it once (`market_spread_tools.jvm_archive`: a tiny stream run with
`-XX:ArchiveClassesAtExit`); every later session maps it, and a short command starts seconds
sooner (measured: docs/performance.md, row 'a class-data-sharing archive'). The name carries the
Java binary, the Spark version and the JAR list, so another JDK or Spark never meets a stale
archive; should one not match anyway, the JVM ignores it (`-Xshare:auto`, its default) and runs as
without it. `MARKET_SPREAD_CDS_ARCHIVE=off` disables it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from market_spread.runtime.paths import project_home
from market_spread.runtime.settings import value

VARIABLE = "MARKET_SPREAD_CDS_ARCHIVE"
# Set by the tool that writes the archive: the path this JVM dumps its classes to at exit.
DUMP_VARIABLE = "MARKET_SPREAD_CDS_DUMP"
# The JVM's own notes about the archive (a mismatch, a dump) would land in a command's output.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path(jars: list[str]) -> Path | None:
    """Where the archive for this Java, this Spark and these JARs lives (None: disabled)."""
    setting = value(VARIABLE)
    if setting == "off":
        return None
    if setting:
        return Path(setting)
    import pyspark

    java = os.path.realpath(shutil.which("java") or os.environ.get("JAVA_HOME", "java"))
    key = "\n".join([java, pyspark.__version__, *sorted(os.path.basename(j) for j in jars)])
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return project_home() / ".cache" / "jvm" / f"driver-{pyspark.__version__}-{digest}.jsa"


def java_options(jars: list[str]) -> str:
    """Driver JVM options: map the archive when it exists, or dump one when asked to."""
    dump = value(DUMP_VARIABLE)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {_QUIET}"
    path = archive_path(jars)
    if path is not None and path.is_file() and path.stat().st_size > 0:
        return f"-XX:SharedArchiveFile={path} {_QUIET}"
    return ""


def retire_archive(jars: list[str]) -> bool:
    """After a JVM failed to start with the archive mapped: rename it `.bad` (the next `make setup`
    writes a new one) and say so. False when no archive was in use (the failure is another's)."""
    if value(DUMP_VARIABLE) or "SharedArchiveFile" not in java_options(jars):
        return False
    path = archive_path(jars)
    assert path is not None
    bad = path.with_name(path.name + ".bad")
    os.replace(path, bad)
    print(
        f"market-spread: warning: the JVM did not start with the class archive {path}; moved it to {bad} "
        "and starting without it (make setup writes a new one)",
        file=sys.stderr,
        flush=True,
    )
    return True


def restore_archive(jars: list[str]) -> None:
    """Undo `retire_archive` when the JVM failed to start without the archive too: the failure was
    another one (a bad option, no memory), and the archive is kept for the next start."""
    path = archive_path(jars)
    if path is None:
        return
    bad = path.with_name(path.name + ".bad")
    if bad.is_file() and not path.exists():
        os.replace(bad, path)
