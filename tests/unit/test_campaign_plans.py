"""make test's kill -9 campaigns share the windows of a batch out between disk, S3 and Kafka: each
window is hit at least once across the three (issue 63); make reliability hits each on every storage."""

from __future__ import annotations

import random

from tests.helpers.campaign import SHORT_PLANS, WINDOWS, full_plan


def test_the_short_campaigns_together_hit_every_window_of_a_batch() -> None:
    hit = {window for plan in SHORT_PLANS.values() for window in plan}
    assert set(WINDOWS) <= hit, f"no short campaign kills in {set(WINDOWS) - hit}"
    assert set(WINDOWS) == {"offsets", "quotes", "symbol_state", "alerts", "quarantine", "batch_metrics", "commits"}
    assert hit <= {*WINDOWS, "random"}


def test_the_full_campaign_hits_every_window_on_each_storage() -> None:
    for kills in (20, 24):
        plan = full_plan(random.Random(kills), kills)
        assert len(plan) == kills and {*WINDOWS, "random"} <= set(plan)
