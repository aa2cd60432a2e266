"""The package layout the README's "Where the code lives" describes: which folder may import which,
and modules a newcomer can hold in their head. Read from the source (ast), nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jobs" / "market_spread"
# Folder -> the folders of the package its modules may import (besides their own).
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "transforms": {"domain"},
    "runtime": set(),
    "cli": {"domain", "runtime"},
    "lake": {"domain", "transforms", "runtime", "cli"},
    "stream": {"domain", "transforms", "lake", "runtime", "cli"},
    "feeds": {"domain", "runtime", "cli", "stream"},  # stream: the Kafka topic settings it shares
    "quality": {"domain", "lake", "runtime", "cli"},
    "orchestration": {"runtime", "cli"},  # cli: env_names only (standard library)
    # One module per command: its options, then a call into the feature.
    "commands": {"domain", "transforms", "lake", "stream", "feeds", "quality", "runtime", "cli"},
}
MAX_LINES = 310


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        found.update(n for n in names if n.split(".")[0] in ("market_spread", "market_spread_tools"))
    return found


def test_every_folder_imports_only_what_the_layout_allows():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(ALLOWED), "a new folder needs its line in ALLOWED and in the README's map"
    wrong = []
    for folder in folders:
        for module in (PACKAGE / folder).rglob("*.py"):
            for name in imports(module):
                parts = name.split(".")
                if parts[0] == "market_spread_tools":
                    wrong.append(f"{module.relative_to(PACKAGE)} imports the developer tools: {name}")
                elif len(parts) > 1 and parts[1] != folder and parts[1] not in ALLOWED[folder]:
                    wrong.append(f"{module.relative_to(PACKAGE)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_product_module_is_over_about_300_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_the_package_finds_its_data_without_counting_parent_folders():
    from market_spread.runtime.paths import default_expectations, default_symbols

    assert default_symbols().is_file() and (default_expectations() / "alerts.json").is_file()
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "parents[" in p.read_text(encoding="utf-8")]
    assert not offenders, offenders
