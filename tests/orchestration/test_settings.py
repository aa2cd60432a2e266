"""Settings: Airflow Variable, else environment, else default; checked values."""

from __future__ import annotations

import pytest

from market_spread.errors import SettingError
from market_spread.orchestration.settings import airflow_variable, resolve_settings
from market_spread.runtime.paths import project_home


def test_settings_precedence_and_paths(monkeypatch) -> None:
    monkeypatch.setenv("MARKET_SPREAD_INTERVAL", "2.5")
    monkeypatch.setenv("MARKET_SPREAD_LAKE", "somewhere/lake")
    monkeypatch.delenv("MARKET_SPREAD_FEED_ENABLED", raising=False)
    variables = {"market_spread_interval": "7", "market_spread_feed_enabled": "false"}
    settings = resolve_settings(variables.get)
    assert settings.interval == 7.0  # a Variable wins over the environment
    assert settings.feed_enabled is False
    assert settings.lake == project_home() / "somewhere" / "lake"  # relative to the project
    assert settings.landing == project_home() / "data" / "landing"
    assert settings.retain_hours >= 168
    with pytest.raises(SettingError, match="Variable market_spread_stall_seconds"):
        resolve_settings({"market_spread_stall_seconds": "-1"}.get)
    with pytest.raises(SettingError, match="not a boolean"):
        resolve_settings({"market_spread_stream_enabled": "maybe"}.get)


def test_outside_airflow_variables_are_not_asked() -> None:
    assert airflow_variable("market_spread_lake") is None


def test_pages_show_the_project_homes_paths_relative_and_others_as_they_are(tmp_path) -> None:
    from pathlib import Path

    from market_spread.runtime.paths import shown
    from market_spread.runtime.storage import location

    inside = project_home() / "data" / "lake" / "_checkpoints" / "stream"
    assert shown(inside) == "data/lake/_checkpoints/stream"  # no machine's folder on the Stream page
    assert shown(tmp_path / "lake") == str(tmp_path / "lake")  # outside the project: where it is
    assert shown(Path("data/lake")) == "data/lake"
    assert shown(location("s3://bucket/lake")).startswith("s3")
