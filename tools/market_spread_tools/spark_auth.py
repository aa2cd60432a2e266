"""The shared secret of a Spark standalone cluster on this machine (a developer tool).

`ensure_spark_defaults(folder)` writes, once, a spark-defaults.conf that turns Spark's RPC
authentication on with a random secret, in a folder only its owner may enter (0700, file 0600):
the same file docker-compose.yaml's airflow-init generates. The master and the workers get it as
their SPARK_CONF_DIR, and so does a driver (`market_spread.runtime.network` reads it): the secret is
never on a command line, where every user of the machine can read it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

DEFAULTS_FILE = "spark-defaults.conf"


def ensure_spark_defaults(folder: Path) -> Path:
    """`folder/spark-defaults.conf` with spark.authenticate and a secret; kept if it exists."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / DEFAULTS_FILE
    if path.is_file() and "spark.authenticate.secret" in path.read_text():
        path.chmod(0o600)
        return path
    tmp = folder / f".{DEFAULTS_FILE}.{os.getpid()}"
    # Created 0600 from the start: no moment where another user could read the secret.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"spark.authenticate true\nspark.authenticate.secret {secrets.token_hex(32)}\n")
    os.replace(tmp, path)
    return path


def secret_of(folder: Path) -> str:
    """The secret in `folder/spark-defaults.conf` (for tests that look for leaks of it)."""
    for line in (folder / DEFAULTS_FILE).read_text().splitlines():
        key, _, rest = line.strip().partition(" ")
        if key == "spark.authenticate.secret":
            return rest.strip()
    raise ValueError(f"no spark.authenticate.secret in {folder / DEFAULTS_FILE}")
