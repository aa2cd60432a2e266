"""Airflow's StatsD client, connected: `[metrics] statsd_custom_client_path` names it (make run,
docker compose).

statsd's own client sends each metric with `sendto` on an unconnected UDP socket, which the kernel
binds to every interface (0.0.0.0, a random port) at the first send: a socket that would accept
datagrams from the network, against the product's promise that a local run opens nothing beyond the
loopback. Connected to the StatsD server instead, the socket takes the local address of the route
to it (127.0.0.1 for a local exporter) and accepts datagrams from that server only. A server that
is not running costs nothing: sends are dropped, as with statsd's client.
"""

from __future__ import annotations

from statsd import StatsClient


class ConnectedStatsClient(StatsClient):
    """statsd.StatsClient whose UDP socket is connected to the StatsD server."""

    def __init__(
        self,
        host: str = "localhost",
        port: int = 8125,
        prefix: str | None = None,
        maxudpsize: int = 512,
        ipv6: bool = False,
    ) -> None:
        super().__init__(host, port, prefix, maxudpsize, ipv6)
        try:
            self._sock.connect(self._addr)
        except OSError:  # no route now: sends below fail quietly until there is one
            pass

    def _send(self, data: str) -> None:
        try:
            self._sock.send(data.encode("ascii"))
        except (OSError, RuntimeError):  # nothing listening (ICMP port unreachable) or no route
            pass
