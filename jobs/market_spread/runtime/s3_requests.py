"""The PUT and GET of one S3 object, signed here (AWS Signature Version 4, `sign`) and sent on a
kept pool of connections (urllib3), not through boto3's client.

Why: on a batch's path every driver commit is two PUTs (its data file, its commit file) and every
landing object a GET, and a batch's writes run side by side in threads that share one interpreter.
boto3's client spent 1.2-1.3 ms of Python CPU on each request (a PUT to the local S3 server took
2.1-2.25 ms in all), botocore's signer on kept connections 0.55-0.6 ms, of which the signature
0.3-0.45 ms; `sign` (the signing key kept for the day) about 0.03 ms. Listing and the rest stay on
boto3. Credentials come from the AWS variables, else the SDKs' usual chain (boto3's session
resolves it).
"""
from __future__ import annotations

import hashlib
import hmac
import time
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlsplit

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
        from urllib3.exceptions import HTTPError

        url = self.url(bucket, key)
        payload = hashlib.sha256(body).hexdigest()
        for attempt in range(1, ATTEMPTS + 1):
            signed = {**(headers or {}), "x-amz-content-sha256": payload}
            if self.credentials is not None:
                frozen = self.credentials.get_frozen_credentials()
                signed = sign(method, url, signed, payload, frozen.access_key, frozen.secret_key, self.config.region,
                              datetime.now(timezone.utc), frozen.token)
            try:
                answer = self.pool.request(method, url, body=body or None, headers=signed)
            except (HTTPError, OSError):
                if attempt == ATTEMPTS:
                    raise
            else:
                if answer.status < 500 or attempt == ATTEMPTS:
                    return answer
            time.sleep(0.05 * 2 ** attempt)
        raise AssertionError("unreachable")


def sign(method: str, url: str, headers: dict[str, str], payload_sha256: str, access_key: str, secret_key: str,
         region: str, now: datetime, token: str | None = None) -> dict[str, str]:
    """`headers` with the request's SigV4 signature for S3 (Authorization, x-amz-date, and
    x-amz-security-token with temporary credentials): every header given is signed, with `host`.
    The URL's path is already percent-encoded (`_Requests.url`) and has no query."""
    parts = urlsplit(url)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    out = {**headers, "x-amz-date": stamp, **({"x-amz-security-token": token} if token else {})}
    canonical = {name.lower(): " ".join(str(value).split()) for name, value in out.items()}
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    canonical["host"] = parts.hostname if parts.port == default_port else parts.netloc  # as urllib3 sends it
    names = sorted(canonical)
    request = "\n".join([method, parts.path or "/", "", *(f"{n}:{canonical[n]}" for n in names), "",
                         ";".join(names), payload_sha256])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    signature = hmac.new(_signing_key(secret_key, day, region), to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, "
                            f"Signature={signature}")
    return out


@lru_cache(maxsize=8)
def _signing_key(secret_key: str, day: str, region: str) -> bytes:
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


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
