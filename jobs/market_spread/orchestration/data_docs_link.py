"""The validate task's "Data Docs" button: a same-origin link to the run's validation page, served by
the UI plugin (ui_plugin). The task records the page in an XCom before it succeeds or fails, and
Airflow 3 evaluates the link on the worker when the task ends (whatever its state) and keeps it.

Imported by the DAG file at parse time: airflow.sdk and the standard library only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from airflow.sdk import BaseOperatorLink

from market_spread.orchestration.quality_summary import PAGE_XCOM_KEY, URL_PREFIX


def page_url(page: str, base_path: str = "") -> str:
    """The plugin's URL of a Data Docs page (a path relative to the docs folder)."""
    return f"{base_path.rstrip('/')}{URL_PREFIX}/docs/{quote(page.lstrip('/'))}"


def _base_path() -> str:
    """The path part of [api] base_url: Airflow may be served under a sub-path."""
    try:
        from airflow.sdk.configuration import conf

        return urlsplit(conf.get("api", "base_url", fallback="") or "").path
    except Exception:  # noqa: BLE001 - no configuration to read: served at the root
        return ""


class DataDocsLink(BaseOperatorLink):
    """Links a validate task instance to the Data Docs page of its run (failed runs included)."""

    name = "Data Docs"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        page = XCom.get_value(ti_key=ti_key, key=PAGE_XCOM_KEY)
        return page_url(str(page), _base_path()) if page else ""
