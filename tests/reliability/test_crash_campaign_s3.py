"""The crash campaign on the run's S3 server: the body of test_crash_campaign.py (run_crash_campaign,
its share of the windows in campaign.SHORT_PLANS, 24 kills with MARKET_SPREAD_RELIABILITY=full), in a
file of its own so that `make test`'s two workers, which take whole files, run it beside the local
campaign instead of after it."""

from __future__ import annotations

import pytest

from tests.reliability.test_crash_campaign import run_crash_campaign


@pytest.mark.slow
@pytest.mark.parametrize("place", ["s3"], indirect=True)
def test_crash_campaign_loses_and_doubles_nothing(spark, place, tmp_path, monkeypatch):
    run_crash_campaign(spark, place, tmp_path, monkeypatch)
