"""The Airflow UI plugin: the Data Docs site behind Airflow's own login, a "Data quality" entry in
the navigation, and the validate task's "Data Docs" button; and the "Stream" page, the stream's
health from its lake (orchestration.stream_status, drawn by orchestration.stream_page). Registered
through the `airflow.plugins` entry point (pyproject.toml), so `make run` and the image both load it.

A plugin's FastAPI app gets no authentication from Airflow: every route here asks Airflow's core
API for the user first (JWT from the `_token` cookie or an Authorization header), and answers 401
or 403 before touching a file (read access to the quality DAG for the reports, to the stream DAG
for the Stream page). Only the site's own files are served (index.html, static/,
expectations/, validations/), never the GX store beside them nor anything a `..`, an encoded
slash or a symlink would reach. Pages are served with their CDN styles and scripts pointing at the
local copies `make setup` fetched (datadocs_assets), so a report renders with no internet.
"""

from __future__ import annotations

import logging
import mimetypes
import time
from pathlib import Path, PurePosixPath

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from market_spread.orchestration.data_docs_link import URL_PREFIX, DataDocsLink
from market_spread.orchestration.datadocs_assets import assets_dir, missing, rewrite_page, rewrite_styles
from market_spread.orchestration.settings import VAR_PREFIX, Settings, resolve_settings
from market_spread.orchestration.stream_page import page, panel
from market_spread.orchestration.stream_status import (
    BadWindow,
    StreamStatus,
    as_json,
    default_window,
    read_status,
    window_minutes,
)
from market_spread.runtime.storage import Location, S3Path

log = logging.getLogger(__name__)

QUALITY_DAG_ID = "market_spread_quality"
STREAM_DAG_ID = "market_spread_stream"
STREAM_PREFIX = "/stream-health"
# What GX's site builder writes at the top of the docs folder; the GX store (gx/) is not served.
SITE_ENTRIES = frozenset({"index.html", "static", "expectations", "validations"})
SERVED_SUFFIXES = frozenset(
    {
        ".html",
        ".css",
        ".js",
        ".png",
        ".ico",
        ".gif",
        ".svg",
        ".jpg",
        ".jpeg",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
        ".eot",
        ".map",
    }
)
# Pages may only load from this server: a CDN URL the rewrite missed fails here, not on the internet.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'self'"
)
DOCS_CACHE_SECONDS = 10.0  # the docs folder is read from the Variable at most this often

_docs_cache: dict[str, tuple[float, Location]] = {}
_settings_cache: dict[str, tuple[float, Settings]] = {}


def _server_variable(name: str) -> str | None:
    """A Variable read from the metadata DB (the API server is no task); None when unreadable."""
    try:
        from airflow.models.variable import Variable

        found = Variable.get(name, default_var=None)
    except Exception:  # noqa: BLE001 - no DB configured (tests) or a hiccup: the environment and default apply
        return None
    return None if found is None else str(found)


def docs_folder() -> Location:
    """The Data Docs folder the quality task writes: Variable market_spread_docs, else
    MARKET_SPREAD_DOCS, else data/quality (orchestration.settings)."""
    cached = _docs_cache.get("docs")
    if cached and time.monotonic() - cached[0] < DOCS_CACHE_SECONDS:
        return cached[1]
    wanted = f"{VAR_PREFIX}docs"
    folder = resolve_settings(lambda name: _server_variable(name) if name == wanted else None).docs
    _docs_cache["docs"] = (time.monotonic(), folder)
    return folder


async def _require_dag_reader(request: Request, dag_id: str) -> None:
    """Airflow's own authentication, then read access to the DAG `dag_id`."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.security import HTTPBearer

    bearer = await HTTPBearer(auto_error=False)(request)
    user = await get_user(request, None, bearer)  # HTTPException 401/403 without a valid token
    if not get_auth_manager().is_authorized_dag(method="GET", details=DagDetails(id=dag_id), user=user):
        raise HTTPException(status_code=403, detail="Forbidden")


async def require_reader(request: Request) -> None:
    """Read access to the quality DAG: its Data Docs."""
    await _require_dag_reader(request, QUALITY_DAG_ID)


async def require_stream_reader(request: Request) -> None:
    """Read access to the stream DAG: the Stream page."""
    await _require_dag_reader(request, STREAM_DAG_ID)


def safe_file(root: Path, relative: str, entries: frozenset[str] | None = None) -> Path:
    """The file `relative` names inside `root`, or HTTPException 404: no `..`, no absolute or
    backslash path, no hidden name, nothing a symlink leads out to, only served file types."""
    parts = PurePosixPath(relative).parts
    if (
        not parts
        or "\\" in relative
        or "\x00" in relative
        or relative.startswith("/")
        or any(p in ("..", ".") or p.startswith(".") for p in parts)
        or (entries is not None and parts[0] not in entries)
    ):
        raise HTTPException(status_code=404, detail="Not found")
    base = root.resolve()
    target = (base / Path(*parts)).resolve()
    if not target.is_relative_to(base) or not target.is_file() or target.suffix.lower() not in SERVED_SUFFIXES:
        raise HTTPException(status_code=404, detail="Not found")
    return target


def _mount_path(request: Request, prefix: str = URL_PREFIX) -> str:
    """Where this app is mounted as the browser sees it (base path + its prefix)."""
    return str(request.scope.get("root_path") or prefix).rstrip("/")


def create_app() -> FastAPI:
    app = FastAPI(
        title="market-spread data quality",
        dependencies=[Depends(require_reader)],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/", include_in_schema=False)
    def home(request: Request) -> Response:
        return RedirectResponse(f"{_mount_path(request)}/docs/index.html", status_code=307)

    @app.get("/docs/{relative:path}", include_in_schema=False)
    def docs(relative: str, request: Request) -> Response:
        root = docs_folder()
        if isinstance(root, S3Path):  # the UI serves a local folder only (docs/operations.md, S3)
            return HTMLResponse(_ON_S3.format(root=root), status_code=404)
        if relative in ("", "index.html") and not (root / "index.html").is_file():
            return HTMLResponse(_NO_REPORT.format(root=root), status_code=404)
        target = safe_file(root, relative or "index.html", SITE_ENTRIES)
        mount = _mount_path(request)
        if target.suffix.lower() == ".css":  # the site's stylesheet names a logo on S3
            return Response(rewrite_styles(target.read_text(encoding="utf-8"), f"{mount}/docs"), media_type="text/css")
        if target.suffix.lower() != ".html":
            return FileResponse(target)
        html = rewrite_page(target.read_text(encoding="utf-8"), f"{mount}/assets", f"{mount}/docs")
        return HTMLResponse(html, headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-store"})

    @app.get("/assets/{relative:path}", include_in_schema=False)
    def assets(relative: str) -> Response:
        # Package names hold one '@' and a scope may hold another: both are plain characters here.
        target = safe_file(assets_dir(), relative)
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return FileResponse(target, media_type=kind, headers={"Cache-Control": "max-age=86400"})

    return app


def _settings() -> Settings:
    """The DAGs' settings as the stream task resolves them (Variables, then the environment)."""
    cached = _settings_cache.get("settings")
    if cached and time.monotonic() - cached[0] < DOCS_CACHE_SECONDS:
        return cached[1]
    found = resolve_settings(lambda name: _server_variable(name) if name.startswith(VAR_PREFIX) else None)
    _settings_cache["settings"] = (time.monotonic(), found)
    return found


def create_stream_app() -> FastAPI:
    """The Stream page: the stream's health from the lake (orchestration.stream_status)."""
    app = FastAPI(
        title="market-spread stream",
        dependencies=[Depends(require_stream_reader)],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    def status_of(window: str | None) -> tuple[StreamStatus, str]:
        settings = _settings()
        name = window or default_window(settings.lake)
        try:
            minutes = window_minutes(name)
        except BadWindow as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        return read_status(settings, minutes), name

    @app.get("/", include_in_schema=False)
    def stream_page(request: Request, window: str | None = None) -> Response:
        status, name = status_of(window)
        return HTMLResponse(
            page(status, name, _mount_path(request, STREAM_PREFIX)),
            headers={"Content-Security-Policy": PAGE_POLICY, "Cache-Control": "no-store"},
        )

    @app.get("/panel", include_in_schema=False)
    def stream_panel(request: Request, window: str | None = None) -> Response:
        status, name = status_of(window)
        return HTMLResponse(
            panel(status, name, _mount_path(request, STREAM_PREFIX)), headers={"Cache-Control": "no-store"}
        )

    @app.get("/status.json", include_in_schema=False)
    def stream_json(window: str | None = None) -> Response:
        return JSONResponse(as_json(status_of(window)[0]), headers={"Cache-Control": "no-store"})

    return app


_ON_S3 = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Data quality</title></head>
<body style="font-family: sans-serif; margin: 2rem"><h1>Data Docs on S3</h1>
<p>The Data Docs are written to <code>{root}</code>; this page serves them from a local folder only
(Variable <code>market_spread_docs</code>).</p></body></html>"""
_NO_REPORT = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Data quality</title></head>
<body style="font-family: sans-serif; margin: 2rem"><h1>No data-quality report yet</h1>
<p>The first run of the <code>market_spread_quality</code> DAG writes its Data Docs to
<code>{root}</code>; they show here once it has run.</p></body></html>"""


def _warn_missing_assets() -> None:
    gone = missing(assets_dir())
    if gone:
        log.warning(
            "Data Docs assets missing in %s (run `make setup`): reports show unstyled: %s",
            assets_dir(),
            ", ".join(gone[:3]) + ("..." if len(gone) > 3 else ""),
        )


class MarketSpreadUiPlugin(AirflowPlugin):
    """Data Docs and the Stream page in the Airflow UI (see the module docstring)."""

    name = "market_spread_data_quality"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "market-spread data quality"},
        {"app": create_stream_app(), "url_prefix": STREAM_PREFIX, "name": "market-spread stream"},
    ]
    external_views = [
        {
            "name": "Data quality",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "data-quality",
            "nav_top_level": True,  # beside Dags and Assets, not inside a Plugins menu
        },
        {
            "name": "Stream",
            "href": f"{STREAM_PREFIX}/",
            "destination": "nav",
            "url_route": "stream",
            "nav_top_level": True,
        },
    ]
    operator_extra_links = [DataDocsLink()]

    @classmethod
    def on_load(cls, *args, **kwargs) -> None:
        _warn_missing_assets()
