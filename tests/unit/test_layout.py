"""The package's layout, read from the source (ast), nothing imported: which folder may import which
(layers point one way: the features never import the command line above them), no import cycles,
no SystemExit outside the command line, and modules and functions a newcomer can hold in their head."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jobs" / "market_spread"
# Folder -> the folders of the package its modules may import (besides their own). From the bottom:
# domain (the rules and the symbol universe) and runtime (sessions, paths, settings) import no other
# folder; the features (lake, stream, feeds, quality) build on them; orchestration (the Airflow side)
# runs the commands as child processes; cli on top. cli/commands is a layer of its own: one module
# per command, its options and one call into its feature; the rest of cli is the plumbing it uses.
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "kernel": {"domain"},  # the batch kernel: pure, over Arrow
    "runtime": set(),
    "lake": {"domain", "kernel", "runtime"},
    "sources": {"domain", "kernel", "runtime"},  # the stream's input: Kafka's source, a batch's lines on the driver
    "observation": {"runtime"},  # the stream's metrics, health sampler and progress
    "sinks": {"domain", "lake", "runtime", "sources"},  # committed alerts published beyond the lake
    "stream": {"domain", "kernel", "lake", "runtime", "sources", "observation", "sinks"},
    "feeds": {"domain", "runtime", "sources"},  # sources: the Kafka topic settings it shares
    "quality": {"domain", "kernel", "lake", "runtime"},
    "orchestration": {"runtime"},  # runtime.envnames: the variables of each command's flags
    "cli": {"domain", "runtime"},
    "cli/commands": {"cli", "domain", "lake", "sources", "sinks", "stream", "feeds", "quality"},
}
SUB_LAYERS = ("cli/commands",)  # folders inside a folder that are layers of their own
# Modules at the top of the package that every layer may import; they import nothing of it.
FOUNDATIONS = {"errors"}
# Sizes in logical lines (statements, however the formatter wraps them; comments and blank lines do
# not count): about 300 and 60 lines of text as the code was written before it was formatted.
MAX_LINES = 220
MAX_FUNCTION_LINES = 40


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [node.module]
            if isinstance(node, ast.ImportFrom) and node.module
            else ([a.name for a in node.names] if isinstance(node, ast.Import) else [])
        )
        found.update(n for n in names if n.split(".")[0] in ("market_spread", "market_spread_tools"))
    return found


def layer(relative: str) -> str:
    """The layer of a path inside the package ("cli/commands/stream.py" -> "cli/commands")."""
    return next(
        (sub for sub in SUB_LAYERS if relative == sub or relative.startswith(sub + "/")), relative.split("/")[0]
    )


def test_every_folder_imports_only_what_the_layout_allows():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders |= {sub for sub in SUB_LAYERS if (PACKAGE / sub / "__init__.py").exists()}
    assert folders == set(ALLOWED), "a new folder needs its line in ALLOWED and in docs/architecture.md's map"
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


def logical_line_ends(source: str) -> list[int]:
    """The line each logical line of `source` ends on (tokenize's NEWLINE tokens)."""
    return [t.start[0] for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.NEWLINE]


def test_no_product_module_is_over_about_220_logical_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(logical_line_ends(p.read_text(encoding="utf-8")))) > MAX_LINES
    }
    assert not long, long


def test_the_package_finds_its_data_without_counting_parent_folders():
    from market_spread.runtime.paths import default_expectations, default_symbols

    assert default_symbols().is_file() and (default_expectations() / "alerts.json").is_file()
    offenders = [
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "parents[" in p.read_text(encoding="utf-8")
    ]
    assert not offenders, offenders


def _modules() -> dict[str, Path]:
    """Every product module by its dotted name (a package by its own name, not `__init__`)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("market_spread", *path.relative_to(PACKAGE).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node of `tree` except those under `if TYPE_CHECKING:`: an import for type hints only
    never runs, so it cannot close an import cycle."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The product modules `path` imports anywhere in it (inside functions too): `from a.b import c`
    counts as a.b.c when c is a module, else as a.b."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
            found.update(subs)
            if node.module in modules and len(subs) < len(node.names):
                found.add(node.module)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_between_product_modules():
    modules = _modules()
    graph = {name: _imported_modules(path, modules) for name, path in modules.items()}
    assert not _cycles(graph), _cycles(graph)


def test_no_system_exit_outside_the_command_line():
    """Features raise errors.UsageError (or return an exit code); only cli/ turns them into an exit."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name) and node.id == "SystemExit":
                offenders.append(f"{relative}:{node.lineno}")
    assert not offenders, offenders


def test_no_product_function_is_over_40_logical_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        ends = logical_line_ends(source)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = sum(1 for end in ends if node.lineno <= end <= (node.end_lineno or node.lineno))
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} logical lines)")
    assert not long, "\n".join(long)


def _error_bases(tree: ast.Module) -> dict[str, list[str]]:
    """Exception classes defined in a module (a base named like an error), and their bases' names."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
            if any(b.endswith(("Error", "Exception")) or b in found for b in bases):
                found[node.name] = bases
    return found


def test_every_product_error_is_of_the_family():
    """errors.MarketSpreadError is the base of every error the product raises on purpose (its
    message says what the user can do); private control-flow exceptions (`_Name`) excepted."""
    family = {"MarketSpreadError", "UsageError", "SettingError"}
    classes: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, bases in _error_bases(ast.parse(path.read_text(encoding="utf-8"))).items():
            classes[name] = (path.relative_to(PACKAGE).as_posix(), bases)
    changed = True
    while changed:  # the family's closure over the package's own classes
        changed = False
        for name, (_, bases) in classes.items():
            if name not in family and bases and bases[0] in family:
                family.add(name)
                changed = True
    strays = [
        f"{where}: {name}({', '.join(bases)})"
        for name, (where, bases) in classes.items()
        if name not in family and not name.startswith("_")
    ]
    assert len(classes) > 15, "the scan found the package's errors"
    assert not strays, "\n".join(strays)


MEASURED = re.compile(r"\d[\d,.]*\s?(ms|µs|us)\b|\d[\d.,]*\s?\w{0,3}\s*->\s*\d|\d+(\.\d+)?\s?% of (one|a) core")


def test_no_measurements_in_docstrings():
    """Docstrings say why; the figures that decided it live in docs/performance.md's decision table."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                found += [f"{path.relative_to(PACKAGE)}: {m.group(0)!r}" for m in MEASURED.finditer(doc)]
    assert not found, "\n".join(found)


# A Spark DDL column list ("name TYPE, name TYPE"): a table's columns spelled outside its declaration.
DDL_COLUMNS = re.compile(
    r"\b\w+ (STRING|BIGINT|BOOLEAN|TIMESTAMP|DATE|DECIMAL\(\d+,\s*\d+\))( NOT NULL)?\s*,\s*"
    r"\w+ (STRING|BIGINT|BOOLEAN|TIMESTAMP|DATE|DECIMAL)\b"
)


def test_tables_are_declared_once_with_arrow_schemas():
    """Every table's columns are a `lake.tables.Table` declaration (an Arrow schema); Spark's DDL is
    derived from it, so no module of the package spells a column list of its own."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and DDL_COLUMNS.search(node.value):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "\n".join(found)
    tables = (PACKAGE / "lake" / "tables.py").read_text(encoding="utf-8")
    assert "DECLARED: dict[str, Table]" in tables and "SCHEMAS: dict[str, str] = {name: table.ddl" in tables


def test_a_ddl_column_list_is_what_the_scan_finds():
    assert DDL_COLUMNS.search("symbol STRING NOT NULL, bid DECIMAL(18,8)")
    assert DDL_COLUMNS.search("a BIGINT, b TIMESTAMP")
    assert not DDL_COLUMNS.search("CAST('1' AS DECIMAL(18,8)) AS max_spread")


STREAM_FOLDERS = (
    "stream",
    "sources",
    "observation",
    "lake",
    "kernel",
)  # what a running stream executes, batch after batch


def test_the_streams_code_keeps_no_process_caches_in_module_globals():
    """What a stream keeps between batches is held by objects the stream owns (its spec, its tables,
    its reader, its batch processor), never by a module: no functools caches, no module-level dict
    or list filled at run time."""
    found = []
    for folder in STREAM_FOLDERS:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names = [ast.unparse(d).split("(")[0] for d in node.decorator_list]
                    found += [f"{path.relative_to(PACKAGE)}:{node.lineno}: @{n}" for n in names if _module_cache(n)]
            found += [
                f"{path.relative_to(PACKAGE)}:{node.lineno}: an empty module-level container"
                for node in tree.body  # module level only
                if _empty_container(node)
            ]
    assert not found, "\n".join(found)


def _module_cache(decorator: str) -> bool:
    """functools' caches live as long as the module; a cached_property lives with its object."""
    return decorator.rsplit(".", 1)[-1] in ("lru_cache", "cache")


def _empty_container(node: ast.stmt) -> bool:
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    return (isinstance(value, ast.Dict) and not value.keys) or (isinstance(value, ast.List) and not value.elts)


def test_the_cache_scan_finds_a_cache_and_a_module_level_dict():
    tree = ast.parse("import functools\n_SEEN: dict = {}\n@functools.lru_cache(maxsize=1)\ndef f(): pass\n")
    assert [_empty_container(n) for n in tree.body] == [False, True, False]
    function = tree.body[2]
    assert isinstance(function, ast.FunctionDef)
    assert _module_cache(ast.unparse(function.decorator_list[0]).split("(")[0])
    assert not _module_cache("cached_property") and _module_cache("cache")
