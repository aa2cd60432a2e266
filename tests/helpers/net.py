"""Listening sockets of a set of processes (issue 44): what a careful operator would list."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8 or ::1, also as an IPv4-mapped IPv6 address (a JVM's dual-stack socket)."""
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def tree(roots: Iterable) -> list:
    """The processes and all their descendants (psutil.Process objects), each once."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for root in roots:
        proc = root if isinstance(root, psutil.Process) else psutil.Process(int(root))
        try:
            for p in [proc, *proc.children(recursive=True)]:
                found.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            continue
    return list(found.values())


def describe(proc) -> str:
    import psutil

    try:
        return f"{proc.pid} {' '.join(proc.cmdline())[:160]}"
    except psutil.Error:
        return str(proc.pid)


def listening(procs: Iterable) -> list[tuple[str, str, int]]:
    """(process, address, port) of every TCP socket in LISTEN state, and every bound UDP socket."""
    import psutil

    found = []
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN or (conn.type == 2 and conn.laddr and not conn.raddr):
                found.append((describe(proc), conn.laddr.ip, conn.laddr.port))
    return found


def not_loopback(procs: Iterable) -> list[tuple[str, str, int]]:
    """The listening sockets of `procs` that anyone on the network could reach."""
    return [entry for entry in listening(procs) if not is_loopback(entry[1])]
