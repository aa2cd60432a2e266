"""The network surface of a local run (issue 44): while `stream` with a local master (the default)
writes alerts, no process of its tree (the driver, its JVM, any Python worker) listens on anything
but the loopback, its metrics endpoint included. tests/e2e/test_airflow_e2e.py checks the same of a whole `make run`, and
tests/e2e/test_cluster.py the authentication of a cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.cli import CLI
from tests.helpers.net import is_loopback, listening, not_loopback, tree
from tests.helpers.processes import stop


def test_loopback_is_told_from_the_network():
    assert is_loopback("127.0.0.1") and is_loopback("127.0.1.1") and is_loopback("::1")
    assert is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.5")
    assert not is_loopback("::ffff:172.17.0.2")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alerts_committed(lake: Path) -> bool:
    return any((lake / "alerts" / "_delta_log").glob("[0-9]*.json"))


@pytest.mark.slow
def test_a_local_stream_listens_on_loopback_only(tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    metrics_port = _free_port()
    env = dict(
        os.environ, MARKET_SPREAD_DRIVER_MEMORY="1g", PYTHONUNBUFFERED="1", MARKET_SPREAD_METRICS_PORT=str(metrics_port)
    )
    env.pop("SPARK_LOCAL_IP", None)  # what the product does by itself, not what the caller set
    subprocess.run(
        [*CLI, "generate", "--landing", str(landing), "--quotes", "300", "--orders", "300", "--files", "2"],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    log = tmp_path / "stream.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*CLI, "stream", "--landing", str(landing), "--lake", str(lake), "--interval", "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 600
        while not _alerts_committed(lake):
            assert proc.poll() is None, f"the stream exited ({proc.returncode}):\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, "no alerts after 10 minutes"
            time.sleep(1)
        procs = tree([proc.pid])
        sockets = listening(procs)
        # The JVM does listen (Py4J's gateway at least): the check looks at real sockets.
        assert sockets, "no listening socket found: is psutil allowed to see them?"
        assert not_loopback(procs) == [], f"listening beyond the loopback: {not_loopback(procs)}"
        # The stream's metrics endpoint is one of them, on the loopback (docs/operations.md, Network).
        assert ("127.0.0.1", metrics_port) in {(address, port) for _, address, port in sockets}, sockets
    finally:
        stop(proc, signal.SIGTERM, timeout=120)
