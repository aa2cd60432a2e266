"""S3A's time-outs and retries are bounded by the lease as delta-rs's are (runtime/s3_config.py):
one request with its retries ends within the third of the lease's margin (no Spark)."""

from __future__ import annotations

import re

import pytest

from market_spread.runtime.s3_config import S3Config


def _seconds(text: str) -> float:
    found = re.fullmatch(r"(\d+)ms", text)
    assert found, text
    return int(found.group(1)) / 1000


@pytest.mark.parametrize("lease_seconds", [3.0, 30.0, 300.0])
def test_an_s3a_request_with_its_retries_ends_within_the_bound(monkeypatch, lease_seconds):
    monkeypatch.setenv("MARKET_SPREAD_LEASE_SECONDS", str(lease_seconds))
    config = S3Config.from_env()
    bound = lease_seconds / 9  # a third of the margin, the lease's third
    assert config.request_seconds == pytest.approx(bound)
    s3a = config.s3a_bounds()
    assert s3a["attempts.maximum"] == "0"  # the SDK's retries off: S3A's retry policy's are the only ones
    tries = 1 + max(int(s3a["retry.limit"]), int(s3a["retry.throttle.limit"]))
    each = max(_seconds(s3a[k]) for k in s3a if k.startswith("connection.") and k.endswith("timeout"))
    # Hadoop's exponential back-off: before retry n, the interval times 2**n times 0.5 to 1.5.
    waits = sum(1.5 * _seconds(s3a["retry.interval"]) * 2**n for n in range(1, tries))
    assert tries * each + waits <= bound + 0.002
    assert _seconds(s3a["retry.throttle.interval"]) <= _seconds(s3a["retry.interval"])
    conf = config.hadoop_conf()
    assert conf["spark.hadoop.fs.s3a.connection.request.timeout"] == s3a["connection.request.timeout"]
    assert config.s3a_try_seconds == pytest.approx(each, abs=0.001)
