"""Where the product finds its files, without counting parent folders of this source file.

- Package data (the default symbol universe, the expectation suites) ships inside the package,
  `market_spread/assets/` (in a checkout, links to `include/` and `expectations/`), and is found
  with `importlib.resources`, so an installed wheel works as well as an editable install.
- The project home holds what is not package data: `data/` (the default landing, lake and
  reports of `make run`) and `.cache/` (the JARs `make setup` fetched). It is `MARKET_SPREAD_HOME`
  when set, else the project whose `.venv` runs this Python (the layout `make setup` makes), else
  the working directory.
"""

from __future__ import annotations

import sys
from importlib.resources import files
from pathlib import Path

from market_spread.runtime.settings import value

HOME_VARIABLE = "MARKET_SPREAD_HOME"


def project_home() -> Path:
    explicit = value(HOME_VARIABLE)
    if explicit:
        return Path(explicit).resolve()
    prefix = Path(sys.prefix).resolve()
    if prefix.name == ".venv" and (prefix.parent / "pyproject.toml").is_file():
        return prefix.parent
    return Path.cwd().resolve()


def shown(place: object) -> str:
    """A location as pages show it: inside the project home, relative to it (`data/lake/...`, as
    `make run` is configured, and no machine's own folders in a screenshot); else as it is."""
    if isinstance(place, Path) and place.is_absolute():
        try:
            return str(place.relative_to(project_home()))
        except ValueError:
            return str(place)
    return str(place)


def asset(name: str) -> Path:
    """A file or folder of `market_spread/assets` (a real path: the package is installed unzipped)."""
    return Path(str(files("market_spread") / "assets" / name))


def default_symbols() -> Path:
    return asset("symbols.txt")


def default_expectations() -> Path:
    return asset("expectations")
