"""A batch's writes on a local disk made durable before the batch returns to Spark (contract 5.6).

Nothing on the local-disk commit path is synced as it is written: delta-rs, Delta and Spark's
checkpoint write files and rename them, and the kernel keeps them in its page cache for a while. A
power loss could then leave an empty `_delta_log/N.json` (a table that no reader opens), or Spark's
`commits/B` on disk without the lake's commits of batch B (the batch never replayed, its rows lost).
So once a batch's last commit is made (`batch_metrics`), and before the batch function returns (its
return is what lets Spark write `commits/B`), every local file system the lake and the checkpoint
live on is flushed with syncfs(2): the batch's files, their folders and the checkpoint's `offsets/B`
are then on stable storage. One call per file system, whatever the batch wrote; S3 paths have nothing
to flush (an object is durable once its PUT has answered).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from market_spread.runtime.settings import value
from market_spread.runtime.storage import Location, S3Path


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(2) (Linux; Python 3.11 has no os.syncfs), or None where libc has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):
        return None
    call.argtypes, call.restype = [ctypes.c_int], ctypes.c_int
    return call


def sync_file_system(folder: Path) -> None:
    """Flush the file system holding `folder` to stable storage (OSError when the kernel reports a
    write it could not make: the batch fails, and its replay writes it again)."""
    call = _syncfs()
    if call is None:  # no syncfs(2): every file system, as sync(2) does
        os.sync()
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        if call(fd) != 0:  # ctypes lets go of the interpreter for the call
            err = ctypes.get_errno()
            raise OSError(err, f"could not flush the disk: {os.strerror(err)}", str(folder))
    finally:
        os.close(fd)


def make_durable(places: Iterable[Location | None]) -> float:
    """syncfs(2) of each local file system holding one of `places` (each once; S3 paths and None
    skipped), unless MARKET_SPREAD_SYNC is off. The seconds it took."""
    if not value("MARKET_SPREAD_SYNC"):
        return 0.0
    began = time.perf_counter()
    flushed: set[int] = set()
    for place in places:
        if place is None or isinstance(place, S3Path):
            continue
        folder = _existing(Path(place))
        device = os.stat(folder).st_dev
        if device not in flushed:
            flushed.add(device)
            sync_file_system(folder)
    return time.perf_counter() - began


def _existing(path: Path) -> Path:
    """`path`, or its nearest folder that exists (a checkpoint not made yet lives on its parent's disk)."""
    path = path.absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def fsync_files(paths: Iterable[Location]) -> float:
    """fsync(2) of each local file of `paths` that exists, then of their folders (S3 paths skipped),
    unless MARKET_SPREAD_SYNC is off: a few known files, without writing out the whole file system
    as syncfs does (other processes' files too). The seconds it took."""
    if not value("MARKET_SPREAD_SYNC"):
        return 0.0
    began = time.perf_counter()
    folders: set[Path] = set()
    for place in paths:
        if isinstance(place, S3Path) or not Path(place).is_file():
            continue
        _fsync(Path(place), os.O_RDONLY)
        folders.add(Path(place).parent)
    for folder in folders:
        _fsync(folder, os.O_RDONLY | os.O_DIRECTORY)
    return time.perf_counter() - began


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
