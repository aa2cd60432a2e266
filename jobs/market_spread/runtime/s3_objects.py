"""One S3 object's GET, PUT and put-if-absent, through obstore (Python bindings of the Rust
`object_store`, the same client delta-rs commits through), on kept connections.

Why not boto3 for these: on a batch's path every landing object is a GET and every lease renewal a
PUT, side by side in threads that share one interpreter, and boto3's client spends about a
millisecond of Python per request; obstore signs and sends in Rust without the interpreter. Each
request's tries are bounded by the lake's lease (S3Config.request_seconds), so no retry outlasts
the window in which the stream may still commit. Listing and the rest stay on boto3.
"""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from market_spread.runtime.s3_config import S3Config

if TYPE_CHECKING:
    from obstore.store import S3Config as StoreConfig


@lru_cache(maxsize=16)
def _store(config: S3Config, bucket: str) -> Any:
    from obstore.store import S3Store

    options: StoreConfig = {"region": config.region}
    if config.endpoint:
        options.update({"endpoint": config.endpoint, "virtual_hosted_style_request": False})
    if config.access_key and config.secret_key:
        options.update({"access_key_id": config.access_key, "secret_access_key": config.secret_key})
    half = config.request_seconds / 2
    return S3Store(
        bucket,
        config=options,
        client_options={
            "allow_http": config.plain_http,
            "timeout": f"{half:g}s",
            "connect_timeout": f"{min(half, 5.0):g}s",
        },
        retry_config={
            "max_retries": 3,
            "retry_timeout": timedelta(seconds=half),
            "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=1), "base": 2.0},
        },
    )


def get(bucket: str, key: str, config: S3Config | None = None) -> bytes:
    """The bytes of one object; FileNotFoundError when there is none."""
    import obstore
    from obstore.exceptions import NotFoundError

    try:
        return obstore.get(_store(config or S3Config.from_env(), bucket), key).bytes().to_bytes()
    except (NotFoundError, FileNotFoundError):  # obstore raises the builtin one for a missing object
        raise FileNotFoundError(f"s3://{bucket}/{key}") from None


def put(bucket: str, key: str, data: bytes, if_none_match: bool = False, config: S3Config | None = None) -> bool:
    """PUT one object. With `if_none_match` (`If-None-Match: *`): False when one was there already;
    the store decides atomically."""
    import obstore
    from obstore.exceptions import AlreadyExistsError, PreconditionError

    try:
        obstore.put(
            _store(config or S3Config.from_env(), bucket),
            key,
            data,
            mode="create" if if_none_match else "overwrite",
            use_multipart=False,
        )
    except (AlreadyExistsError, PreconditionError):
        if if_none_match:
            return False
        raise
    return True
