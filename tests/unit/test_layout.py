"""The package layout the README's "Where the code lives" describes: which folder may import which,
and modules a newcomer can hold in their head. Read from the source (ast), nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jobs" / "market_spread"
# Folder -> the folders of the package its modules may import (besides their own).
# cli/commands is a layer of its own, on top: the rest of cli is plumbing the features import
# (UsageError, load_symbols), so it must not import them back.
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
    # One module per command: its options, then a call into the feature that does the work.
    "cli/commands": {"cli", "lake", "stream", "feeds", "quality"},
}
SUB_LAYERS = ("cli/commands",)
# Modules at the top of the package that every layer may import; they import nothing of it.
FOUNDATIONS = {"errors"}  # folders inside a folder that are layers of their own
MAX_LINES = 310


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        found.update(n for n in names if n.split(".")[0] in ("market_spread", "market_spread_tools"))
    return found


def layer(relative: str) -> str:
    """The layer of a path inside the package ("cli/commands/stream.py" -> "cli/commands")."""
    return next((sub for sub in SUB_LAYERS if relative == sub or relative.startswith(sub + "/")),
                relative.split("/")[0])


def test_every_folder_imports_only_what_the_layout_allows():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders |= {sub for sub in SUB_LAYERS if (PACKAGE / sub / "__init__.py").exists()}
    assert folders == set(ALLOWED), "a new folder needs its line in ALLOWED and in the README's map"
    wrong = []
    for module in PACKAGE.rglob("*.py"):
        own = layer(module.relative_to(PACKAGE).as_posix())
        if own not in ALLOWED:
            continue  # a module at the top of the package
        for name in imports(module):
            parts = name.split(".")
            target = layer("/".join(parts[1:]))
            if parts[0] == "market_spread_tools":
                wrong.append(f"{module.relative_to(PACKAGE)} imports the developer tools: {name}")
            elif len(parts) > 1 and target != own and target not in ALLOWED[own] | FOUNDATIONS:
                wrong.append(f"{module.relative_to(PACKAGE)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_the_foundations_import_nothing_of_the_package():
    for name in FOUNDATIONS:
        assert not imports(PACKAGE / f"{name}.py"), name


def test_no_product_module_is_over_about_300_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_the_package_finds_its_data_without_counting_parent_folders():
    from market_spread.runtime.paths import default_expectations, default_symbols

    assert default_symbols().is_file() and (default_expectations() / "alerts.json").is_file()
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "parents[" in p.read_text(encoding="utf-8")]
    assert not offenders, offenders
