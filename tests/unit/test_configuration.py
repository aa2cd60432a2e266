"""The settings registry: docs/configuration.md is generated from it, and the code reads no
MARKET_SPREAD_* variable it lacks (no Spark)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from market_spread.cli.main import commands
from market_spread.cli.params import EnvOption
from market_spread.errors import SettingError, UsageError
from market_spread.runtime import settings
from market_spread_tools import configuration_doc

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"MARKET_SPREAD_[A-Z0-9][A-Z0-9_]*[A-Z0-9]")
TOOLS_SETTINGS = "market_spread_tools.settings"
ENV_READS = {"get", "getenv", "pop", "setdefault"}


def test_the_configuration_doc_is_generated_from_the_registry():
    expected = configuration_doc.render()
    current = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert current == expected, "docs/configuration.md is out of date: python -m market_spread_tools.configuration_doc"
    for name in settings.SETTINGS:
        assert f"`{name}`" in current, name
    assert configuration_doc.main(["--check"]) == 0


def declared() -> set[str]:
    """Every name the registry declares, and the variables of every command's flags."""
    configuration_doc.load_tools_settings()
    names = set(settings.SETTINGS)
    for command in commands().values():
        names.update(v for p in command.params if isinstance(p, EnvOption) for v in p.envvar)
    return names


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "MARKET_SPREAD_..." constants (VARIABLE = "MARKET_SPREAD_CDS_ARCHIVE")."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _environ_key(node: ast.AST) -> ast.AST | None:
    """The key of an environment read: os.environ.get(K), os.getenv(K), environ[K], environ.pop(K)..."""
    if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
        return node.slice
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        owner = ast.unparse(node.func.value)
        if node.func.attr in ENV_READS and ("environ" in owner or owner == "os"):
            return node.args[0]
    return None


def direct_reads(path: Path) -> list[str]:
    """MARKET_SPREAD_* variables this file reads from the environment itself, not through the
    registry's value(); a name built at run time (an f-string with the prefix) counts too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = _constants(tree)
    reads = []
    for node in ast.walk(tree):
        key = _environ_key(node)
        if key is None or isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            continue
        text = constants.get(key.id, "") if isinstance(key, ast.Name) else ast.unparse(key)
        if "MARKET_SPREAD_" in text or "ENV_PREFIX" in text:
            reads.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return reads


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py") if ".venv" not in p.parts)


def test_the_product_reads_only_declared_variables_and_only_through_the_registry():
    names = declared()
    undeclared = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in sources("jobs", "dags")
        for n in NAME.findall(p.read_text(encoding="utf-8"))
        if n not in names
    ]
    assert undeclared == [], "declare these in jobs/market_spread/runtime/settings.py"
    reads = [r for p in sources("jobs", "dags") for r in direct_reads(p)]
    assert reads == [], "read these through market_spread.runtime.settings.value()"


@pytest.mark.skipif(
    importlib.util.find_spec(TOOLS_SETTINGS) is None,
    reason="the tools' own registry (market_spread_tools.settings) is not there yet",
)
def test_the_tools_read_only_declared_variables():
    names = declared()
    undeclared = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in sources("tools")
        for n in NAME.findall(p.read_text(encoding="utf-8"))
        if n not in names
    ]
    assert undeclared == [], "declare these in tools/market_spread_tools/settings.py"


def test_the_scan_sees_a_direct_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'import os\nX = "MARKET_SPREAD_X"\nos.environ.get(X)\nos.getenv(f"{ENV_PREFIX}Y")\n'
        'os.environ["MARKET_SPREAD_Z"] = "1"\nos.environ.get("PATH")\n',
        encoding="utf-8",
    )
    assert [r.split(": ", 1)[1] for r in direct_reads(sample)] == ["os.environ.get(X)", "os.getenv(f'{ENV_PREFIX}Y')"]


def test_every_source_is_checked_alike(monkeypatch):
    assert settings.value("MARKET_SPREAD_SHUFFLE_PARTITIONS", {}) == 4
    assert settings.value("MARKET_SPREAD_SHUFFLE_PARTITIONS", {"MARKET_SPREAD_SHUFFLE_PARTITIONS": " 8 "}) == 8
    assert settings.value("MARKET_SPREAD_ADAPTIVE", {"MARKET_SPREAD_ADAPTIVE": " "}) is False  # blank: the default
    with pytest.raises(SettingError, match=r"MARKET_SPREAD_SHUFFLE_PARTITIONS='0': must be a whole number >= 1"):
        settings.value("MARKET_SPREAD_SHUFFLE_PARTITIONS", {"MARKET_SPREAD_SHUFFLE_PARTITIONS": "0"})
    with pytest.raises(SettingError, match="Variable market_spread_interval='soon'"):
        settings.parse_text("MARKET_SPREAD_INTERVAL", "soon", "Variable market_spread_interval")
    assert issubclass(SettingError, UsageError)  # the CLI prints one line and exits 2
    with pytest.raises(KeyError, match="not declared"):
        settings.value("MARKET_SPREAD_NO_SUCH_THING")
    with pytest.raises(ValueError, match="declared twice"):
        settings.declare("MARKET_SPREAD_JIT", settings.text, None, "again", ("test",))


def test_bad_values_stop_a_command_with_one_line_naming_the_variable(monkeypatch, capsys):
    from market_spread.cli import main as cli
    from market_spread.runtime.spark import jit_options

    monkeypatch.setenv("MARKET_SPREAD_JIT", "fast")
    with pytest.raises(SettingError) as info:
        jit_options(long_running=False)
    assert str(info.value) == "environment variable MARKET_SPREAD_JIT='fast': must be auto, quick or full, not 'fast'"
    # A command whose run meets a malformed setting: one line, exit 2 (as for a bad flag).
    monkeypatch.setenv("MARKET_SPREAD_SHUFFLE_PARTITIONS", "0")
    monkeypatch.setattr(
        cli.commands()["sql"], "callback", lambda **_: settings.value("MARKET_SPREAD_SHUFFLE_PARTITIONS")
    )
    assert cli.main(["sql", "--lake", "K", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "market-spread sql: error: environment variable MARKET_SPREAD_SHUFFLE_PARTITIONS='0': "
        "must be a whole number >= 1, not '0'\n"
    )


def test_a_malformed_setting_stops_the_command_before_it_starts_work(monkeypatch, capsys, tmp_path):
    """Read lazily, SYNC would first be parsed inside the first micro-batch, failing the
    query with a traceback; the CLI checks every variable the command reads before it runs."""
    from market_spread.cli import main as cli

    ran = []
    monkeypatch.setattr(cli.commands()["stream"], "callback", lambda **_: ran.append(1) or 0)
    monkeypatch.setenv("MARKET_SPREAD_SYNC", "maybe")
    assert cli.main(["stream", "--landing", str(tmp_path), "--lake", str(tmp_path / "lake")]) == 2
    assert "environment variable MARKET_SPREAD_SYNC='maybe'" in capsys.readouterr().err
    assert not ran
    # A variable only the DAGs read does not stop a command that never reads it.
    monkeypatch.delenv("MARKET_SPREAD_SYNC")
    monkeypatch.setenv("MARKET_SPREAD_FEED_RATE", "fast")
    assert cli.main(["stream", "--landing", str(tmp_path), "--lake", str(tmp_path / "lake")]) == 0
    assert ran == [1]
