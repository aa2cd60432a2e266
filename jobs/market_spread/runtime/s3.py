"""S3 from Python: `S3Path`, an object or key prefix with the `Path` methods the product uses (its
reads and writes of one object through runtime.s3_objects, the rest through boto3's client), and
`S3Config` (runtime.s3_config) again. Callers import both from runtime.storage; boto3 is imported
only when an S3 location is used."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from market_spread.runtime import s3_objects
from market_spread.runtime.s3_config import S3Config  # noqa: F401 - imported from here too


@lru_cache(maxsize=4)
def _client(config: S3Config) -> Any:
    import boto3
    from botocore.config import Config

    # Checksums only where S3 requires them: some S3-compatible servers reject the newer headers.
    options = Config(
        s3={"addressing_style": "path" if config.endpoint else "auto"},
        retries={"max_attempts": 5},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.client(
        "s3",
        endpoint_url=config.endpoint,
        region_name=config.region,
        aws_access_key_id=config.access_key,
        aws_secret_access_key=config.secret_key,
        config=options,
    )


def client(config: "S3Config | None" = None) -> Any:
    """The boto3 S3 client of `config` (default: the AWS variables); one per configuration."""
    return _client(config or S3Config.from_env())


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    modified: datetime


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


class S3Path:
    """An object or a "folder" (a key prefix) in a bucket, with the Path methods the product uses.

    A folder exists while any object lies under it (or its `key/` marker, which S3A reads as an
    empty folder and `mkdir` writes). One PUT is atomic: an object is whole once it is listed, so
    `write_text` needs no rename."""

    __slots__ = ("bucket", "key")

    def __init__(self, bucket: str, key: str = "") -> None:
        self.bucket, self.key = bucket, key.strip("/")

    # -- naming ---------------------------------------------------------------------------------
    def uri(self, scheme: str = "s3a") -> str:
        return f"{scheme}://{self.bucket}/{self.key}" if self.key else f"{scheme}://{self.bucket}"

    def __str__(self) -> str:
        return self.uri()

    def __repr__(self) -> str:
        return f"S3Path({self.uri('s3')!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3Path) and (self.bucket, self.key) == (other.bucket, other.key)

    def __hash__(self) -> int:
        return hash((self.bucket, self.key))

    def __lt__(self, other: "S3Path") -> bool:
        # Ordered as Path is (callers sort folders: stream.source_log); by bucket, then key.
        if not isinstance(other, S3Path):
            return NotImplemented
        return (self.bucket, self.key) < (other.bucket, other.key)

    def __truediv__(self, part: str) -> "S3Path":
        return S3Path(self.bucket, posixpath.join(self.key, str(part)) if self.key else str(part))

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    @property
    def parent(self) -> "S3Path":
        return S3Path(self.bucket, posixpath.dirname(self.key))

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.bucket, *self.key.split("/")) if self.key else (self.bucket,)

    def with_name(self, name: str) -> "S3Path":
        return self.parent / name

    def absolute(self) -> "S3Path":
        return self

    expanduser = resolve = absolute

    # -- reading --------------------------------------------------------------------------------
    def _prefix(self) -> str:
        return self.key + "/" if self.key else ""

    def _pages(self, delimiter: bool) -> Iterator[dict]:
        args = {"Bucket": self.bucket, "Prefix": self._prefix()}
        if delimiter:
            args["Delimiter"] = "/"
        yield from client().get_paginator("list_objects_v2").paginate(**args)

    def stat(self) -> ObjectInfo:
        """Size and modification time of the object; FileNotFoundError when there is none."""
        try:
            head = client().head_object(Bucket=self.bucket, Key=self.key)
        except Exception as exc:  # noqa: BLE001 - botocore's ClientError, classified by its code
            if _code(exc) in ("404", "NoSuchKey", "NotFound"):
                raise FileNotFoundError(self.uri("s3")) from None
            raise
        return ObjectInfo(int(head["ContentLength"]), head["LastModified"].astimezone(UTC))

    def is_file(self) -> bool:
        try:
            self.stat()
        except FileNotFoundError:
            return False
        return bool(self.key)

    def is_dir(self) -> bool:
        page = client().list_objects_v2(Bucket=self.bucket, Prefix=self._prefix(), MaxKeys=1)
        return page.get("KeyCount", 0) > 0 or (not self.key and self._bucket_exists())

    def _bucket_exists(self) -> bool:
        try:
            client().head_bucket(Bucket=self.bucket)
        except Exception:  # noqa: BLE001 - any answer but success: not there (or not ours)
            return False
        return True

    def exists(self) -> bool:
        return self.is_dir() or self.is_file()

    def iterdir(self) -> Iterator["S3Path"]:
        """The folder's direct children: objects and sub-folders (the folder's own marker excluded)."""
        prefix = self._prefix()
        for page in self._pages(delimiter=True):
            for sub in page.get("CommonPrefixes", []):
                yield S3Path(self.bucket, sub["Prefix"])
            for obj in page.get("Contents", []):
                if obj["Key"] != prefix:
                    yield S3Path(self.bucket, obj["Key"])

    def listing(self) -> Iterator[tuple["S3Path", ObjectInfo]]:
        """Every object under the folder, at any depth, with its size and time (one LIST per 1,000)."""
        for page in self._pages(delimiter=False):
            for obj in page.get("Contents", []):
                if not obj["Key"].endswith("/"):
                    yield S3Path(self.bucket, obj["Key"]), ObjectInfo(int(obj["Size"]), obj["LastModified"])

    def glob(self, pattern: str) -> Iterator["S3Path"]:
        """Direct children whose names match `pattern` (no `**`, no `/`)."""
        return (child for child in self.iterdir() if fnmatch.fnmatchcase(child.name, pattern))

    def rglob(self, pattern: str) -> Iterator["S3Path"]:
        return (obj for obj, _ in self.listing() if fnmatch.fnmatchcase(obj.name, pattern))

    def read_bytes(self) -> bytes:
        return s3_objects.get(self.bucket, self.key)

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)

    # -- writing --------------------------------------------------------------------------------
    def write_bytes(self, data: bytes) -> None:
        s3_objects.put(self.bucket, self.key, data)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        self.write_bytes(text.encode(encoding))

    def create(self, data: bytes) -> bool:
        """Put-if-absent (`If-None-Match: *`): True when this call created the object, False when
        one was there already (HTTP 412); the store decides atomically."""
        return s3_objects.put(self.bucket, self.key, data, if_none_match=True)

    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        """An empty `key/` marker, which S3A (and Spark's existence checks) read as a folder."""
        if self.key and not self.is_dir():
            client().put_object(Bucket=self.bucket, Key=self._prefix(), Body=b"")

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and not self.is_file():
            raise FileNotFoundError(self.uri("s3"))
        client().delete_object(Bucket=self.bucket, Key=self.key)

    def rmtree(self) -> None:
        """Delete every object under the folder (and its marker)."""
        keys = [obj.key for obj, _ in self.listing()] + [self._prefix()]
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[start : start + 1000] if k]
            if chunk:
                client().delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})
