"""Fixtures of the stream tests that talk to Kafka."""

from __future__ import annotations

import pytest

from market_spread.feeds.broker import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A real single-node broker (`market-spread broker`) on free ports, for one test file: its
    tests run one after another on one worker (--dist loadfile), so one may stop and start it."""
    proc = BrokerProcess(tmp_path_factory.mktemp("kafka") / "data")
    proc.start()
    yield proc
    proc.stop()
