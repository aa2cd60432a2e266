"""Settings for running the stream's driver against a Spark standalone cluster.

`session_conf(master)` gives the extra settings `runtime.spark.build_session` applies when the master
is not `local[...]`, all taken from the environment, so the DAGs switch to a cluster through
configuration alone. Nothing changes for a local master. Where the driver listens and the cluster's
authentication (`spark.authenticate`, its secret from SPARK_CONF_DIR) are `runtime.network`'s.

What executors need: the Delta JARs reach them through `spark.jars` (the driver serves them and
every executor fetches them before its first task); the package's Python code, for the batch kernel
of the executors placement (stream.executors), through `spark.submit.pyFiles`: an archive of the
package's modules, built at the session's start. Their Python comes from `PYSPARK_PYTHON` (default
`python3`), which needs pyarrow and NumPy (as PySpark's Arrow functions do). A local master's
Python workers run this process's own interpreter.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from market_spread.runtime.settings import value

# Environment variable -> Spark setting, applied only for a non-local master.
ENV_SETTINGS: dict[str, str] = {
    # The address executors use to reach the driver: set it when the default (the address of this
    # host's name) is not reachable from the workers, e.g. behind NAT or with several interfaces.
    "MARKET_SPREAD_DRIVER_HOST": "spark.driver.host",
    "MARKET_SPREAD_DRIVER_BIND_ADDRESS": "spark.driver.bindAddress",
    # Fixed ports, for firewalls between the driver and the workers.
    "MARKET_SPREAD_DRIVER_PORT": "spark.driver.port",
    "MARKET_SPREAD_BLOCK_MANAGER_PORT": "spark.blockManager.port",
    "MARKET_SPREAD_EXECUTOR_MEMORY": "spark.executor.memory",
    "MARKET_SPREAD_EXECUTOR_CORES": "spark.executor.cores",
    # Without a cap a standalone app takes every free core of the cluster.
    "MARKET_SPREAD_CORES_MAX": "spark.cores.max",
}
EVENT_LOG_ENV = "MARKET_SPREAD_EVENT_LOG_DIR"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def session_conf(master: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """Extra Spark settings for `master`; empty for a local master (local behaviour is unchanged).

    For a master on this machine's loopback the executors run here too, so unless PYSPARK_PYTHON is
    set they get the driver's own interpreter (same version by construction): this sets
    PYSPARK_PYTHON in this process's environment, where PySpark reads it when the context starts.
    """
    environ = os.environ if env is None else env
    if is_local(master):
        environ.setdefault("PYSPARK_PYTHON", sys.executable)  # its Python workers run here
        return {}
    given = {key: value(name, environ) for name, key in ENV_SETTINGS.items()}
    conf = {key: str(given[key]) for key in given if given[key] is not None}
    event_log = value(EVENT_LOG_ENV, environ)
    if event_log:
        # A shared folder (or any Hadoop URI): the history server reads finished apps from it.
        if "://" not in event_log:
            Path(event_log).mkdir(parents=True, exist_ok=True)
        conf["spark.eventLog.enabled"] = "true"
        conf["spark.eventLog.dir"] = event_log
    host = urlparse(master.split(",")[0]).hostname if master.startswith("spark://") else None
    if host in LOOPBACK_HOSTS and not environ.get("PYSPARK_PYTHON"):
        environ["PYSPARK_PYTHON"] = sys.executable
    conf["spark.submit.pyFiles"] = package_archive()
    return conf


def package_archive() -> str:
    """A zip of the package's Python modules, for the executors' Python workers (their sys.path)."""
    package = Path(__file__).resolve().parent.parent
    fd, name = tempfile.mkstemp(prefix="market_spread-", suffix=".zip")
    with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for module in sorted(package.rglob("*.py")):
            archive.write(module, str(module.relative_to(package.parent)))
    return name
