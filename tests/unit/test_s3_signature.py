"""runtime.s3_requests.sign against botocore's S3 SigV4 signer: the same request, time and keys must
give the same headers, or the S3 server refuses every driver commit."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from market_spread.runtime.s3_config import S3Config
from market_spread.runtime.s3_requests import _Requests, sign

CASES = [
    ("PUT", "http://127.0.0.1:9000", "market-spread", "lake/alerts/_delta_log/00000000000000000007.json",
     b'{"commitInfo":{}}', {"If-None-Match": "*"}, None),
    ("GET", "http://127.0.0.1:9000", "market-spread", "landing/quotes/quotes-0001.jsonl", b"", {}, None),
    ("PUT", "http://localhost:80", "b-1", "a key/with spaces+plus/é~tilde.parquet", b"x" * 70_000, {}, None),
    ("PUT", None, "market-spread", "lake/quotes/day=2026-11-27/part-0.snappy.parquet", b"data", {}, "SESSION/TOKEN=="),
]


@pytest.mark.parametrize("method, endpoint, bucket, key, body, headers, token", CASES)
def test_signature_matches_botocore(method, endpoint, bucket, key, body, headers, token):
    url = _Requests.__new__(_Requests)
    url.config = S3Config(endpoint, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-1")
    target = url.url(bucket, key)
    payload = hashlib.sha256(body).hexdigest()
    theirs = AWSRequest(method=method, url=target, data=body, headers={**headers, "x-amz-content-sha256": payload})
    S3SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token), "s3",
                "eu-west-1").add_auth(theirs)
    expected = dict(theirs.headers.items())
    when = datetime.strptime(expected["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)

    ours = sign(method, target, {**headers, "x-amz-content-sha256": payload}, payload, "AKIDEXAMPLE",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-1", when, token)

    assert ours["Authorization"] == expected["Authorization"]
    assert ours["x-amz-date"] == expected["X-Amz-Date"]
    assert ours.get("x-amz-security-token") == expected.get("X-Amz-Security-Token")


def test_a_changed_byte_changes_the_signature():
    when = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)
    one = sign("PUT", "http://h:1/b/k", {}, hashlib.sha256(b"a").hexdigest(), "K", "S", "us-east-1", when)
    other = sign("PUT", "http://h:1/b/k", {}, hashlib.sha256(b"b").hexdigest(), "K", "S", "us-east-1", when)
    assert one["Authorization"] != other["Authorization"]
