"""The UI plugin without a live Airflow: registration, Airflow's login in front of every route, only
the Data Docs site's files served (no `..`, encoded slash, symlink, hidden file or GX store), pages
rewritten to the local copies of their CDN files, the "Data Docs" link. The browser test
(tests/e2e/test_data_docs_ui.py) repeats the essentials against a live `airflow standalone`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from market_spread.orchestration import datadocs_assets, ui_plugin
from market_spread.orchestration.data_docs_link import DataDocsLink, page_url
from market_spread.orchestration.datadocs_assets import ASSETS, LOGO_BUCKET, rewrite_page

ROOT = Path(__file__).resolve().parents[2]
PAGE = "validations/alerts/20260101T000000Z-abc/20260101T000000.000000Z/x.html"


@pytest.fixture()
def site(tmp_path: Path, monkeypatch) -> Path:
    """A docs folder as validate leaves it: the site beside the GX store, and a secret outside."""
    docs = tmp_path / "docs"
    (docs / "static" / "images").mkdir(parents=True)
    (docs / "static" / "images" / "logo-long.png").write_bytes(b"\x89PNG")
    urls = "\n".join(f'<script src="{a.url}" integrity="sha384-x" crossorigin="anonymous"></script>' for a in ASSETS)
    (docs / "index.html").write_text(f"<html><head>{urls}</head><body>suite alerts</body></html>")
    (docs / PAGE).parent.mkdir(parents=True)
    (docs / PAGE).write_text("<html><body>run page</body></html>")
    (docs / "gx").mkdir()
    (docs / "gx" / "great_expectations.yml").write_text("store: secret")
    (docs / ".hidden.html").write_text("hidden")
    (tmp_path / "secret.html").write_text("outside")
    (docs / "validations" / "out.html").symlink_to(tmp_path / "secret.html")
    assets = tmp_path / "assets"
    (assets / "bootstrap@4.3.1" / "dist" / "css").mkdir(parents=True)
    (assets / "bootstrap@4.3.1" / "dist" / "css" / "bootstrap.min.css").write_text("body{margin:0}")
    monkeypatch.setenv("MARKET_SPREAD_DOCS", str(docs))
    monkeypatch.setenv(datadocs_assets.ASSETS_ENV, str(assets))
    monkeypatch.setattr(ui_plugin, "_server_variable", lambda name: None)  # no metadata DB here
    ui_plugin._docs_cache.clear()
    return docs


def client(authorized: bool) -> TestClient:
    app = ui_plugin.create_app()
    if authorized:
        app.dependency_overrides[ui_plugin.require_reader] = lambda: None
    return TestClient(app, root_path="/data-quality")


def test_registered_through_the_airflow_plugins_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["airflow.plugins"]["market_spread"]
    assert target == "market_spread.orchestration.ui_plugin:MarketSpreadUiPlugin"
    plugin = ui_plugin.MarketSpreadUiPlugin
    app = plugin.fastapi_apps[0]  # the Stream page's app follows (test_stream_page.py)
    assert app["url_prefix"] == "/data-quality"
    from airflow.api_fastapi.app import RESERVED_URL_PREFIXES

    for each in plugin.fastapi_apps:
        assert not any(each["url_prefix"].startswith(p) for p in RESERVED_URL_PREFIXES)
    [view] = [v for v in plugin.external_views if v["name"] == "Data quality"]
    assert view["name"] == "Data quality" and view["destination"] == "nav"
    assert view["href"].startswith("/data-quality")  # same origin: the UI frames it
    assert [link.name for link in plugin.operator_extra_links] == ["Data Docs"]


def test_anonymous_requests_are_refused(site: Path) -> None:
    anonymous = client(authorized=False)
    for path in (
        "/",
        "/docs/index.html",
        f"/docs/{PAGE}",
        "/assets/bootstrap@4.3.1/dist/css/bootstrap.min.css",
        "/docs/missing.html",
        "/docs/..%2F..%2Fsecret.html",
    ):
        response = anonymous.get(path, follow_redirects=False)
        assert response.status_code in (401, 403), (path, response.status_code)
        assert "run page" not in response.text and "suite alerts" not in response.text
    # The client folds a literal ../ away: the path then matches no route at all.
    assert anonymous.get("/docs/../../secret.html").status_code in (401, 403, 404)


def test_only_the_sites_files_are_served(site: Path) -> None:
    reader = client(authorized=True)
    home = reader.get("/", follow_redirects=False)
    assert home.status_code == 307 and home.headers["location"] == "/data-quality/docs/index.html"
    index = reader.get("/docs/index.html")
    assert index.status_code == 200 and "suite alerts" in index.text
    assert "default-src 'self'" in index.headers["content-security-policy"]
    assert reader.get(f"/docs/{PAGE}").text == "<html><body>run page</body></html>"
    assert reader.get("/docs/static/images/logo-long.png").content == b"\x89PNG"
    for path in (
        "/docs/../secret.html",
        "/docs/..%2Fsecret.html",
        "/docs/%2e%2e/secret.html",
        "/docs/validations/..%2F..%2F..%2Fsecret.html",
        "/docs/%2Fetc%2Fpasswd",
        "/docs//etc/passwd",
        "/docs/validations/out.html",
        "/docs/gx/great_expectations.yml",
        "/docs/.hidden.html",
        "/docs/validations/..\\..\\secret.html",
        "/docs/validations",
        "/assets/..%2F..%2Fsecret.html",
    ):
        response = reader.get(path)
        assert response.status_code == 404, (path, response.status_code)
        assert "outside" not in response.text and "secret" not in response.text
    css = reader.get("/assets/bootstrap@4.3.1/dist/css/bootstrap.min.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_pages_load_nothing_from_outside(site: Path) -> None:
    html = client(authorized=True).get("/docs/index.html").text
    assert not re.search(r"""(?:src|href)=["']https?://""", html), html
    assert "integrity=" not in html
    for asset in ASSETS:
        assert f'src="/data-quality/assets/{asset.local}"' in html
    logo = rewrite_page(
        f'<img src="{LOGO_BUCKET}logo-long.png?d=1&c=2"><style>a {{ background: '
        f"url('{LOGO_BUCKET}full_logo_dark.png') }}</style>",
        "/a",
        "/data-quality/docs",
    )
    assert logo == (
        '<img src="/data-quality/docs/static/images/logo-long.png"><style>a { background: '
        "url('/data-quality/docs/static/images/logo-long.png') }</style>"
    )


def test_the_sites_stylesheet_loads_nothing_from_outside(site: Path) -> None:
    (site / "static" / "styles").mkdir()
    (site / "static" / "styles" / "s.css").write_text(f"a {{ background: url('{LOGO_BUCKET}full_logo_dark.png') }}")
    css = client(authorized=True).get("/docs/static/styles/s.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "https://" not in css.text and "/data-quality/docs/static/images/logo-long.png" in css.text


def test_every_cdn_file_of_the_installed_templates_has_a_local_copy() -> None:
    # A Great Expectations upgrade that loads a new CDN file fails here, not in a user's browser.
    import great_expectations

    templates = Path(great_expectations.__file__).parent / "render" / "view" / "templates"
    found = set()
    for path in templates.glob("*.j2"):
        for tag in re.findall(r"<(?:link|script)\b[^>]*>", path.read_text()):
            found.update(re.findall(r"""(?:src|href)=["'](https?://[^"']+)""", tag))
    assert found and found <= {a.url for a in ASSETS}, found - {a.url for a in ASSETS}


def test_the_docs_folder_is_the_quality_tasks(site: Path, tmp_path: Path, monkeypatch) -> None:
    assert ui_plugin.docs_folder() == site  # MARKET_SPREAD_DOCS, as the task reads it
    monkeypatch.setattr(ui_plugin, "_server_variable", {"market_spread_docs": str(tmp_path / "v")}.get)
    ui_plugin._docs_cache.clear()
    assert ui_plugin.docs_folder() == tmp_path / "v"  # the Variable wins, as in the task


def test_no_report_yet_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MARKET_SPREAD_DOCS", str(tmp_path / "none"))
    monkeypatch.setattr(ui_plugin, "_server_variable", lambda name: None)
    ui_plugin._docs_cache.clear()
    response = client(authorized=True).get("/docs/index.html")
    assert response.status_code == 404 and "No data-quality report yet" in response.text


def test_the_data_docs_link_opens_the_runs_page(monkeypatch) -> None:
    from airflow.sdk.execution_time import xcom

    stored = {"data_docs_page": PAGE}
    monkeypatch.setattr(xcom.XCom, "get_value", classmethod(lambda cls, *, ti_key, key: stored.get(key)))
    assert DataDocsLink().get_link(None, ti_key=object()) == f"/data-quality/docs/{PAGE}"
    stored.clear()
    assert DataDocsLink().get_link(None, ti_key=object()) == ""  # no report: the button is disabled
    assert page_url("validations/a b.html", "/airflow/") == "/airflow/data-quality/docs/validations/a%20b.html"
