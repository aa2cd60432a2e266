"""Airflow's own metrics as `make run` switches them on: the launcher's [metrics] settings read by
Airflow's own configuration and StatsD logger, datagrams received by a real UDP server on the
loopback, from a socket bound to the loopback only; and no error when nothing listens."""

from __future__ import annotations

import socket
import time

from market_spread.orchestration.statsd_client import ConnectedStatsClient
from market_spread_tools.launcher import airflow_metrics


def _udp_server() -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(10)
    return server


def test_airflow_sends_its_metrics_to_the_loopback_only(monkeypatch) -> None:
    from airflow.observability.metrics.statsd_logger import get_statsd_logger

    with _udp_server() as server:
        for key, value in airflow_metrics(server.getsockname()[1]).items():
            monkeypatch.setenv(key, value)
        logger = get_statsd_logger()  # Airflow's own: reads [metrics] from the environment
        client = logger.statsd
        assert isinstance(client, ConnectedStatsClient)
        logger.incr("ti.finish.market_spread_stream.supervise_stream.failed")
        data, sender = server.recvfrom(4096)
        assert data == b"airflow.ti.finish.market_spread_stream.supervise_stream.failed:1|c"
        # Bound to the loopback and connected to the server: no socket open to the network.
        assert client._sock.getsockname()[0] == "127.0.0.1" and sender == client._sock.getsockname()
        assert client._sock.getpeername() == server.getsockname()


class RefusalsCounted:
    """The client's socket, counting the sends the kernel refused (ICMP port unreachable)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.refused = sock, 0

    def send(self, data: bytes) -> int:
        try:
            return self.sock.send(data)
        except ConnectionRefusedError:
            self.refused += 1
            raise

    def __getattr__(self, name: str):
        return getattr(self.sock, name)


def test_nothing_listening_costs_nothing() -> None:
    with _udp_server() as server:
        port = server.getsockname()[1]  # closed when the block ends: nothing listens there after
    client = ConnectedStatsClient("127.0.0.1", port, "airflow")
    counted = client._sock = RefusalsCounted(client._sock)
    for _ in range(5):  # each send after the first meets the one before's "port unreachable"
        client.incr("scheduler_heartbeat")  # and raises nothing: the metric is dropped
        time.sleep(0.02)  # (the ICMP answer comes back over the loopback in microseconds)
    assert counted.refused >= 1, "no send met the refusal: the test did not reach the case it names"
    client.close()


def test_port_zero_leaves_airflows_metrics_off() -> None:
    assert airflow_metrics(0) == {}
    assert airflow_metrics(8125)["AIRFLOW__METRICS__STATSD_ON"] == "True"
