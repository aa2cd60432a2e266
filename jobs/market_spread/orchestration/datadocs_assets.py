"""The styles and scripts the Data Docs pages load from public CDNs, served from a local copy instead.

Great Expectations writes `<link>`/`<script>` tags pointing at jsDelivr, unpkg, cdnjs and others, and
its logo at an S3 bucket: with no internet a report shows as bare HTML. `make setup` fetches the same
files from the npm registry (market_spread_tools.datadocs_assets, `npm pack`) into the folder below;
the UI plugin rewrites each CDN URL to its own route for that folder when it serves a page. Nothing
in a page then leaves the Airflow server. Standard library only: the API server imports this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from market_spread.runtime.paths import project_home
from market_spread.runtime.settings import value

ASSETS_ENV = "MARKET_SPREAD_DATADOCS_ASSETS"


@dataclass(frozen=True)
class Asset:
    """One CDN file and where the same file sits in an npm package."""

    url: str  # as written in Great Expectations' templates
    package: str  # npm name@version
    path: str  # inside the package
    integrity: str | None = None  # the template's SRI hash, checked when fetched

    @property
    def local(self) -> str:
        """Path under the assets folder (and the plugin's assets route)."""
        return f"{self.package}/{self.path}"


# great_expectations 1.24's templates (render/view/templates/page.j2, js_script_imports.j2). The
# filter-control CSS is referenced at 1.19.0 but only 1.19.1 is fetched: the rules are the same.
ASSETS: tuple[Asset, ...] = (
    Asset(
        "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css",
        "bootstrap-table@1.19.1",
        "dist/bootstrap-table.min.css",
    ),
    Asset(
        "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css",
        "bootstrap@4.3.1",
        "dist/css/bootstrap.min.css",
    ),
    Asset(
        "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css",
        "bootstrap-table@1.19.1",
        "dist/extensions/filter-control/bootstrap-table-filter-control.css",
    ),
    Asset(
        "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
        "bootstrap-table@1.19.1",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
    ),
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css",
        "bootstrap-datepicker@1.9.0",
        "dist/css/bootstrap-datepicker.min.css",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css",
        "@forevolve/bootstrap-dark@1.1.0",
        "dist/css/bootstrap-prefers-dark.css",
    ),
    Asset("https://cdn.jsdelivr.net/npm/vega@5", "vega@5.33.1", "build/vega.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/vega-lite@5", "vega-lite@5.23.0", "build/vega-lite.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/vega-embed@6", "vega-embed@6.29.0", "build/vega-embed.min.js"),
    # The stylesheet loads ../webfonts/*: the folder is fetched whole (see FOLDERS).
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css",
        "@fortawesome/fontawesome-free@6.6.0",
        "css/all.min.css",
    ),
    Asset("https://code.jquery.com/jquery-3.7.1.min.js", "jquery@3.7.1", "dist/jquery.min.js"),
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js",
        "popper.js@1.12.9",
        "dist/umd/popper.min.js",
        "sha384-ApNbgh9B+Y1QKtv3Rn7W3mgPxhU9K/ScQsAP7hUibX39j7fakFPskvXusvfa0b4Q",
    ),
    Asset(
        "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js",
        "bootstrap@4.3.1",
        "dist/js/bootstrap.min.js",
        "sha384-JjSmVgyd0p3pXB1rRibZUAYoIIy6OrQ6VrjIEaFf/nJGzIxFDsf4x0xIM+B07jRM",
    ),
    Asset(
        "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js",
        "bootstrap-table@1.19.1",
        "dist/bootstrap-table.min.js",
    ),
    Asset(
        "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
        "bootstrap-table@1.19.1",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    ),
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js",
        "bootstrap-datepicker@1.9.0",
        "dist/js/bootstrap-datepicker.min.js",
    ),
)
# Whole folders of a package a fetched file refers to by relative URL.
FOLDERS: tuple[tuple[str, str], ...] = (("@fortawesome/fontawesome-free@6.6.0", "webfonts"),)
# The logos (navbar, and a dark-theme CSS background): the site carries them under static/images/,
# all but the dark one, for which the light logo stands in.
LOGO_BUCKET = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
LOGO_STAND_INS = {"full_logo_dark.png": "logo-long.png"}

_BY_URL = {a.url: a for a in ASSETS}
_URL = re.compile(r"""(?P<attr>\b(?:href|src)\s*=\s*)(?P<q>["'])(?P<url>https?://[^"']+)(?P=q)""", re.IGNORECASE)
_BUCKET_URL = re.compile(re.escape(LOGO_BUCKET) + r"""([\w.-]+)(?:\?[^'"()\s]*)?""")
_SRI = re.compile(r"""\s(?:integrity|crossorigin)\s*=\s*(["'])[^"']*\1""", re.IGNORECASE)


def assets_dir() -> Path:
    """Where `make setup` puts the files: MARKET_SPREAD_DATADOCS_ASSETS or .cache/datadocs-assets."""
    folder = value(ASSETS_ENV) or Path(".cache") / "datadocs-assets"
    return folder if folder.is_absolute() else project_home() / folder  # relative: to the project


def missing(folder: Path) -> list[str]:
    """The assets not (yet) in `folder`, by local path."""
    return sorted({a.local for a in ASSETS if not (folder / a.local).is_file()})


def rewrite_page(html: str, assets_url: str, site_url: str) -> str:
    """`html` with every CDN stylesheet and script pointing at `assets_url` and the logos at the
    site's own copies under `site_url`. Integrity attributes go: the files are the same bytes (checked
    when fetched), and a changed copy must fail loudly in the fetch, not silently in the browser."""

    def local(match: re.Match) -> str:
        url = match["url"]
        asset = _BY_URL.get(url)
        if asset is not None:
            url = f"{assets_url.rstrip('/')}/{asset.local}"
        return f"{match['attr']}{match['q']}{url}{match['q']}"

    def tag(match: re.Match) -> str:
        text = match.group(0)
        return _SRI.sub("", _URL.sub(local, text)) if _URL.search(text) else text

    return rewrite_styles(re.sub(r"<(?:link|script)\b[^>]*>", tag, html, flags=re.IGNORECASE), site_url)


def rewrite_styles(text: str, site_url: str) -> str:
    """`text` (a page or a stylesheet of the site) with the logos taken from the site's own images."""
    images = f"{site_url.rstrip('/')}/static/images/"
    return _BUCKET_URL.sub(lambda m: images + LOGO_STAND_INS.get(m[1], m[1]), text)
