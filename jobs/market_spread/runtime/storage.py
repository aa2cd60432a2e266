"""Where the product's data lives: a local folder, or a prefix on S3 or an S3-compatible store
(contract 3c). `location(text)` gives a `pathlib.Path` for a local path and an `S3Path` for
`s3://bucket/prefix` (`s3a://` names the same place); both answer the small part of the `Path`
API the product uses, so the code that walks a lake, a checkpoint or a landing folder reads the same
for both. `str()` of an `S3Path` is its `s3a://` URI, the one Spark's S3A connector reads;
delta-rs gets `s3://` with `delta_rs_options()`.

One configuration for every component, from the standard AWS variables (runtime/settings.py):
AWS_ENDPOINT_URL (unset: AWS itself), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION. boto3
is imported only when an S3 location is used.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from market_spread.runtime.s3 import S3Config, S3Path, client  # noqa: F401 - the storage API callers import

SCHEMES = ("s3://", "s3a://")


def is_s3(place: object) -> bool:
    """True for an S3 location or URI (`s3://` or `s3a://`)."""
    return isinstance(place, S3Path) or str(place).lower().startswith(SCHEMES)


def location(place: "str | Path | S3Path") -> "Location":
    """A local path (as given, `~` expanded) or an S3Path for an `s3://`/`s3a://` URI."""
    if isinstance(place, S3Path):
        return place
    text = str(place)
    if text.lower().startswith(SCHEMES):
        rest = text.split("://", 1)[1]
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ValueError(f"{text}: an S3 URI names a bucket: s3://bucket/prefix")
        return S3Path(bucket, key.strip("/"))
    return Path(text).expanduser()


def delta_rs_target(table: "str | Path | S3Path") -> tuple[str, dict[str, str] | None]:
    """(uri, storage_options) for delta-rs: `s3://` with the S3 options, or the local path."""
    place = location(table)
    if isinstance(place, S3Path):
        return place.uri("s3"), S3Config.from_env().delta_rs_options()
    return str(place), None


Location = Path | S3Path


def list_names(folder: Location) -> list[str] | None:
    """The names in a folder; None when a local folder is missing (an S3 prefix without objects
    lists empty: object storage cannot tell a missing folder from an empty one)."""
    if isinstance(folder, S3Path):
        return [child.name for child in folder.iterdir()]
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None


def put_if_absent(place: Location, data: bytes) -> bool:
    """Create `place` holding `data`, atomically, unless it exists (then False)."""
    if isinstance(place, S3Path):
        return place.create(data)
    temporary = place.with_name(f".{place.name}.{uuid.uuid4().hex}.tmp")
    temporary.write_bytes(data)
    try:
        os.link(temporary, place)  # fails when `place` exists: never replaces a commit
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: an exclusive create, then the bytes
        try:
            with open(place, "xb") as out:
                out.write(data)
        except FileExistsError:
            return False
    finally:
        temporary.unlink(missing_ok=True)
    return True


def open_delta(table: "str | Path | S3Path") -> Any:
    """delta-rs's DeltaTable at a local path or an S3 location (with the S3 options)."""
    from deltalake import DeltaTable

    uri, options = delta_rs_target(table)
    return DeltaTable(uri, storage_options=options)


def read_rows(table: Any, columns: list[str] | None = None, where: str | None = None) -> Any:
    """Rows of an open delta-rs table as an Arrow table, through delta-rs's query engine, which reads
    deletion vectors, column mapping and v2 checkpoints a user may turn on (`to_pyarrow_table` refuses
    them). Strings as plain Arrow strings, not DataFusion's views."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    picked = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    sql = f"SELECT {picked} FROM t" + (f" WHERE {where}" if where else "")
    rows = pa.table(QueryBuilder().register("t", table).execute(sql))
    plain = [pa.field(f.name, pa.string()) if f.type == pa.string_view() else f for f in rows.schema]
    return rows.cast(pa.schema(plain))


@contextmanager
def local_copy(folder: Location) -> Iterator[Path]:
    """A local folder to work in: `folder` itself when local; for an S3 prefix, a temporary copy of
    its objects, whose new or changed files are uploaded when the block ends without an error (for
    tools that write only to local files, such as GX's file stores and its Data Docs site)."""
    if not isinstance(folder, S3Path):
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="market-spread-") as work:
        root = Path(work)
        before: dict[str, int] = {}
        for obj, info in folder.listing():
            relative = obj.key[len(folder.key) :].lstrip("/")
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(obj.read_bytes())
            before[relative] = info.size
        yield root
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            relative = path.relative_to(root).as_posix()
            data = path.read_bytes()
            if before.get(relative) != len(data) or (folder / relative).read_bytes() != data:
                (folder / relative).write_bytes(data)


def in_place(path: str, copy: Path, folder: Location) -> str:
    """Where a file of a `local_copy` lives in `folder` once uploaded (its s3:// URI, for people)."""
    if not isinstance(folder, S3Path):
        return path
    try:
        return (folder / Path(path).relative_to(copy).as_posix()).uri("s3")
    except ValueError:
        return path
