"""Where the Spark driver listens, and the authentication a cluster's channels need (issue 44).

A local master (the default) keeps every socket of the driver on the loopback: Spark's RPC carries
serialised objects, and anyone who reaches the driver's ports talks to it. A non-local master needs
Spark's RPC authentication (`spark.authenticate` with a shared secret): the master, the workers, the
driver and the executors all check it. The secret reaches the driver the standard way, from
`$SPARK_CONF_DIR/spark-defaults.conf`, never through a setting of the session: PySpark passes those
to the JVM on its command line, which every user of the machine can read. docs/operations.md (Network) says how
to supply it on real machines and what a mismatch looks like.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path

from market_spread.errors import UsageError
from market_spread.runtime.settings import value

LOOPBACK = "127.0.0.1"
AUTH_SETTING = "MARKET_SPREAD_SPARK_AUTH"
DEFAULTS_FILE = "spark-defaults.conf"
# Java properties syntax: the key ends at the first blank, '=' or ':'.
_PROPERTY = re.compile(r"([^\s=:]+)\s*[=:\s]\s*(.*)")


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith(("local[", "local-cluster["))


def driver_conf(master: str, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings for the driver's network: loopback for a local master; for any other, none,
    after checking that RPC authentication is configured (UsageError otherwise)."""
    env = os.environ if environ is None else environ
    if _is_local(master):
        # The web UI (off unless MARKET_SPREAD_SPARK_UI) binds to SPARK_LOCAL_IP, read by the JVM
        # when it starts (PySpark passes this process's environment on), else to every interface.
        env["SPARK_LOCAL_IP"] = LOOPBACK
        return {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK}
    check_authentication(master, env)
    return {}


def spark_defaults_path(environ: MutableMapping[str, str]) -> Path:
    """The spark-defaults.conf spark-submit reads: $SPARK_CONF_DIR's, else $SPARK_HOME/conf's."""
    if environ.get("SPARK_CONF_DIR"):
        return Path(environ["SPARK_CONF_DIR"]) / DEFAULTS_FILE
    home = environ.get("SPARK_HOME")
    if not home:
        from pyspark.find_spark_home import _find_spark_home

        home = _find_spark_home()
    return Path(home) / "conf" / DEFAULTS_FILE


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file's keys and values (the subset spark-defaults.conf uses)."""
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        match = _PROPERTY.fullmatch(line) if line and line[0] not in "#!" else None
        if match:
            props[match.group(1)] = match.group(2).strip()
    return props


def check_authentication(master: str, environ: MutableMapping[str, str]) -> None:
    """UsageError unless the driver's spark-defaults.conf turns authentication on with a secret that
    only its owner can read, or MARKET_SPREAD_SPARK_AUTH=off says to run without it."""
    path = spark_defaults_path(environ)
    try:
        props = read_properties(path) if path.is_file() else {}
    except OSError as exc:
        raise UsageError(f"cannot read {path} (Spark's authentication secret): {exc.strerror}") from None
    enabled = props.get("spark.authenticate", "").lower() == "true" and bool(props.get("spark.authenticate.secret"))
    if enabled and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"{path} holds Spark's authentication secret but others may read it: chmod 600 it")
    if enabled or not value(AUTH_SETTING, environ):
        return
    raise UsageError(
        f"Spark master {master} is not local and Spark's RPC authentication is not configured: put "
        f"`spark.authenticate true` and `spark.authenticate.secret <the cluster's secret>` into {path} "
        f"(mode 0600), or point SPARK_CONF_DIR at a folder holding such a spark-defaults.conf (docs/operations.md, Network); "
        f"{AUTH_SETTING}=off runs unauthenticated"
    )


@contextmanager
def refused_by_cluster(master: str) -> Iterator[None]:
    """Around the session's start: a standalone master that refuses the driver (a secret that does
    not match, or none) makes Spark retry 3 times 20 s apart, stop the context and fail with "Cannot
    call methods on a stopped SparkContext"; this turns that into a UsageError that says why."""
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        if _is_local(master) or "stopped SparkContext" not in str(exc):
            raise
        raise UsageError(
            f"the Spark master {master} did not accept this driver (Spark gave up after 3 tries, 20 s apart): "
            f"most likely the secret in {spark_defaults_path(os.environ)} differs from the cluster's (the log "
            f"above says `SaslException: ... Mismatched response`, or `Expected SaslMessage` without one), "
            f"else the master is not reachable from here"
        ) from None
