"""A TCP proxy in front of an S3 server that holds one request until the test releases it: the
window between a writer's decision to publish an object and the PUT reaching the server, opened
as wide as a test needs (issue 64: a Spark commit racing a delta-rs commit of the same version).

    with HoldingProxy("127.0.0.1", 9000, b"PUT /bucket/t/_delta_log/00000000000000000001.json ") as proxy:
        ...                                  # point the client at proxy.endpoint
        proxy.held.wait(30)                  # the request arrived; nothing of it reached the server
        ...                                  # another writer's turn
        proxy.release.set()                  # the request goes on; proxy.answer is the server's status line

Bytes are relayed as they come, one thread each way per connection. The held request is found by
the start of its request line in what the client sent (a client writes a request's line and
headers in one go); once released, nothing more is held.
"""

from __future__ import annotations

import re
import socket
import threading
from types import TracebackType


class HoldingProxy:
    def __init__(self, host: str, port: int, request_start: bytes) -> None:
        self.target = (host, port)
        self.request_start = request_start
        self.held = threading.Event()  # set when the request arrived (and is being held)
        self.release = threading.Event()  # set by the test: the held request goes on
        self.answer: bytes | None = None  # the server's status line for the held request
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._closed = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> HoldingProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self._closed = True
        self.release.set()
        try:  # wakes the accepting thread up
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for sock in self._sockets:
            try:  # wakes the relaying threads up: a pooled connection is idle, not closed
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            watch = _Watch()
            self._spawn(self._upstream, client, server, watch)
            self._spawn(self._downstream, server, client, watch)

    def _upstream(self, client: socket.socket, server: socket.socket, watch: _Watch) -> None:
        """Client to server; the held request's bytes wait here until released."""
        while chunk := _receive(client):
            if not self.held.is_set() and self.request_start in chunk:
                watch.holding = True
                self.held.set()
                self.release.wait()
            _send(server, chunk)
        _shut(server)

    def _downstream(self, server: socket.socket, client: socket.socket, watch: _Watch) -> None:
        """Server to client; the first final status line after the held request is its answer."""
        while chunk := _receive(server):
            if watch.holding and self.answer is None:
                # "100 Continue" is an interim answer (the client asked before sending the body)
                final = [line for line in re.findall(rb"HTTP/1\.1 \d{3}[^\r\n]*", chunk) if b" 100 " not in line]
                if final:
                    self.answer = final[0]
            _send(client, chunk)
        _shut(client)


class _Watch:
    """One connection's state: whether the held request went through it."""

    holding = False


def _receive(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, chunk: bytes) -> None:
    try:
        sock.sendall(chunk)
    except OSError:
        pass


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
