"""The PUT and GET of one S3 object, signed here with botocore's SigV4 signer and sent on a kept
pool of connections (urllib3), not through boto3's client.

Why: on a batch's path every driver commit is two PUTs (its data file, its commit file) and every
landing object a GET. boto3's client spent 1.2-1.3 ms of Python CPU on each request (a PUT to the
local S3 server took 2.1-2.25 ms in all), this path 0.55-0.6 ms (1.3-1.5 ms in all), and a batch's
writes run side by side in threads that share one interpreter. Listing and the rest stay on boto3.
Credentials come from the AWS variables, else the SDKs' usual chain (boto3's session resolves it).
"""
from __future__ import annotations

import hashlib
import time
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from market_spread.runtime.s3_config import S3Config

ATTEMPTS = 4  # a refused connection or a 5xx answer is tried again, as boto3 would


class S3RequestError(OSError):
    """An S3 answer other than success (and other than the ones callers ask to tell apart)."""

    def __init__(self, method: str, url: str, status: int, body: bytes) -> None:
        super().__init__(f"S3 {method} {url}: HTTP {status}: {body[:300].decode('utf-8', 'replace')}")
        self.status = status


class _Requests:
    def __init__(self, config: S3Config) -> None:
        import boto3
        import urllib3

        self.config = config
        self.pool = urllib3.PoolManager(maxsize=16, retries=False, timeout=urllib3.Timeout(connect=10.0, read=120.0))
        self.credentials = boto3.Session(aws_access_key_id=config.access_key, aws_secret_access_key=config.secret_key,
                                         region_name=config.region).get_credentials()

    def url(self, bucket: str, key: str) -> str:
        path = quote(key, safe="/~")
        if self.config.endpoint:
            return f"{self.config.endpoint.rstrip('/')}/{bucket}/{path}"  # path-style, as for every non-AWS store
        if "." in bucket:  # a dotted name breaks the virtual host's certificate
            return f"https://s3.{self.config.region}.amazonaws.com/{bucket}/{path}"
        return f"https://{bucket}.s3.{self.config.region}.amazonaws.com/{path}"

    def send(self, method: str, bucket: str, key: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Any:
        """The answer to one signed request (any status), after up to ATTEMPTS tries."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from urllib3.exceptions import HTTPError

        url = self.url(bucket, key)
        for attempt in range(1, ATTEMPTS + 1):
            request = AWSRequest(method=method, url=url, data=body,
                                 headers={**(headers or {}), "x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
            if self.credentials is not None:
                S3SigV4Auth(self.credentials.get_frozen_credentials(), "s3", self.config.region).add_auth(request)
            try:
                answer = self.pool.request(method, url, body=body or None, headers=dict(request.headers.items()))
            except (HTTPError, OSError):
                if attempt == ATTEMPTS:
                    raise
            else:
                if answer.status < 500 or attempt == ATTEMPTS:
                    return answer
            time.sleep(0.05 * 2 ** attempt)
        raise AssertionError("unreachable")


@lru_cache(maxsize=4)
def _requests(config: S3Config) -> _Requests:
    return _Requests(config)


def put(bucket: str, key: str, data: bytes, if_none_match: bool = False, config: S3Config | None = None) -> bool:
    """PUT one object. With `if_none_match` (`If-None-Match: *`): False when one was there already
    (HTTP 412, or 409 from stores that answer a concurrent put so); the store decides atomically."""
    requests = _requests(config or S3Config.from_env())
    answer = requests.send("PUT", bucket, key, data, {"If-None-Match": "*"} if if_none_match else None)
    if if_none_match and answer.status in (409, 412):
        return False
    if answer.status >= 300:
        raise S3RequestError("PUT", requests.url(bucket, key), answer.status, answer.data)
    return True


def get(bucket: str, key: str, config: S3Config | None = None) -> bytes:
    """The bytes of one object; FileNotFoundError when there is none."""
    requests = _requests(config or S3Config.from_env())
    answer = requests.send("GET", bucket, key)
    if answer.status == 404:
        raise FileNotFoundError(f"s3://{bucket}/{key}")
    if answer.status >= 300:
        raise S3RequestError("GET", requests.url(bucket, key), answer.status, answer.data)
    return answer.data
