"""`market-spread sql`: query the lake's tables by name (each Delta table is a view of its name).

Two engines (`--engine`): a plain query runs on delta-rs's DataFusion in this process, without a
JVM (lake.fast_sql); whatever lake.sql_route does not let through as one plain query, and what
DataFusion cannot run (Spark's syntax, its functions), runs on Spark SQL, with a one-line note.

Read-only on Spark: `spark.sql()` runs commands (DELETE, VACUUM, SET ...) eagerly, the moment it
is called, so the statement is parsed first and its logical plan checked before anything runs. Only
query plans and a short allow-list of read-only commands (SHOW, DESCRIBE, EXPLAIN of a query) pass;
everything else exits 2 and changes nothing. The decision is made on the parser's plan classes,
not on the text, so comments, odd spacing or a CTE in front of an INSERT cannot slip through.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import TextIO

from market_spread.errors import MarketSpreadError, UsageError
from market_spread.lake.sql_route import route
from market_spread.runtime import spark_jvm
from market_spread.runtime.storage import Location

ENGINES = ("auto", "fast", "spark")
PREFIX = "market-spread sql"


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _json_value(value: object) -> object:
    if isinstance(value, Decimal):
        return str(value)  # exact: never through a float
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def render(columns: list[str], rows: list[tuple], fmt: str, out=sys.stdout) -> None:
    if fmt == "json":
        for row in rows:
            out.write(json.dumps({c: _json_value(v) for c, v in zip(columns, row)}) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_text(v) for v in row] for row in rows])
    else:
        cells = [[_text(v) for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        out.write(line + "\n")
        out.write("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |\n")
        out.write(line + "\n")
        for r in cells:
            out.write("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |\n")
        out.write(line + "\n")
        out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


# Read-only commands allowed at the root of a plan (class simple names). Their children are
# unresolved names (tables, namespaces), except the two below whose inner plan is checked too.
READ_ONLY_COMMANDS = frozenset(
    {
        "ShowTables",
        "ShowTablesExtended",
        "ShowViews",
        "ShowColumns",
        "ShowFunctions",
        "ShowNamespaces",
        "ShowTableProperties",
        "ShowCreateTable",
        "ShowPartitions",
        "ShowCatalogs",
        "DescribeRelation",
        "DescribeColumn",
        "DescribeNamespace",
        "DescribeFunction",
        "DescribeDeltaHistory",
        "DescribeDeltaDetailCommand",
    }
)
WRAPPING_COMMANDS = {"ExplainCommand": "logicalPlan", "DescribeQueryCommand": "plan"}
# Any of these anywhere in the tree means the statement would change something (or the session).
WRITE_TRAITS = frozenset(
    {
        "org.apache.spark.sql.catalyst.plans.logical.Command",
        "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement",
        "org.apache.spark.sql.catalyst.plans.logical.V2WriteCommand",
        "org.apache.spark.sql.execution.command.RunnableCommand",
        "org.apache.spark.sql.delta.commands.DeltaCommand",
        "org.apache.spark.sql.catalyst.plans.logical.ExecutableDuringAnalysis",
    }
)
# Plain logical nodes that run other statements or code: EXECUTE IMMEDIATE '<any SQL>', CALL.
RUNS_OTHER_CODE = frozenset(
    {"UnresolvedExecuteImmediate", "ExecuteImmediateQuery", "ExecuteImmediateCommands", "Call", "UnresolvedProcedure"}
)


class NotReadOnly(MarketSpreadError):
    """The statement is not a query: refused before anything runs."""


def _class_names(jclass) -> set[str]:
    """A JVM class, its superclasses and every interface (Scala traits) it implements."""
    seen: set[str] = set()
    todo = [jclass]
    while todo:
        cls = todo.pop()
        if cls is None or cls.getName() in seen:
            continue
        seen.add(cls.getName())
        todo.extend(cls.getInterfaces())
        todo.append(cls.getSuperclass())
    return seen


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1].rstrip("$")


class BadSql(MarketSpreadError):
    """The text does not parse as SQL (exit 1, as any failing query)."""


def _java_message(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def check_read_only(spark, query: str) -> None:
    """Raise NotReadOnly unless `query` is one read-only statement, BadSql if it does not parse.

    Parses only (Spark's own parser, with the Delta extension's statements): runs nothing.
    """
    parser = spark_jvm.sql_parser(spark)
    try:
        plan = parser.parsePlan(query)
    except Exception as exc:  # noqa: BLE001 - any parse error: tried again as a script below, else reported
        # Several statements do not parse as one; they do as the body of a SQL script.
        try:
            wrapped = parser.parsePlan(f"BEGIN\n{query}\n;\nEND")
        except Exception:  # noqa: BLE001 - not a script either: the first error is reported
            wrapped = None
        if wrapped is not None and _simple(wrapped.getClass().getName()) == "CompoundBody":
            raise NotReadOnly("sql runs one query at a time; several statements were given") from None
        raise BadSql(_java_message(exc)) from None
    _check_plan(plan, root=True)


def _check_plan(plan, root: bool) -> None:
    name = _simple(plan.getClass().getName())
    if root and name in READ_ONLY_COMMANDS:
        return
    if root and name in WRAPPING_COMMANDS:
        _check_plan(getattr(plan, WRAPPING_COMMANDS[name])(), root=False)
        return
    todo = [plan]
    while todo:
        node = todo.pop()
        node_name = _simple(node.getClass().getName())
        # Delta's RESTORE is a bare logical node: the name rule catches such statements too.
        if (
            _class_names(node.getClass()) & WRITE_TRAITS
            or node_name.endswith(("Command", "Statement"))
            or node_name in RUNS_OTHER_CODE
        ):
            raise NotReadOnly(
                f"sql is read-only: {node_name} would change the lake or the session; only queries "
                "(SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN) run"
            )
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))


def _seq(seq) -> list:
    return [seq.apply(i) for i in range(seq.size())]


def check_no_reflection(analyzed) -> None:
    """Refuse reflect()/java_method()/try_reflect(): they call static JVM methods from a query.

    Walks the analyzed plan (after spark.sql, which only analyses a query), its expressions and the
    plans of its subqueries."""
    plans, seen = [analyzed], 0
    while plans and seen < 10_000:
        plan = plans.pop()
        seen += 1
        plans.extend(_seq(plan.children()))
        plans.extend(_seq(plan.subqueries()))
        expressions = _seq(plan.expressions())
        while expressions:
            expression = expressions.pop()
            if _simple(expression.getClass().getName()) == "CallMethodViaReflection":
                raise NotReadOnly("sql is read-only: reflect/java_method calls JVM methods; not allowed in a query")
            expressions.extend(_seq(expression.children()))


def execute(spark, lake: str, query: str, fmt: str = "table", out=sys.stdout, err=sys.stderr) -> int:
    """Register the lake's tables as views and run one read-only query; returns the exit code."""
    # Imported here, as in query_lake: `market-spread --help` imports this module without pyspark.
    from pyspark.errors import AnalysisException, ParseException

    from market_spread.lake.tables import register_views

    names = register_views(spark, lake)
    try:
        check_read_only(spark, query)  # before spark.sql: it runs commands at once
    except NotReadOnly as exc:
        print(f"{PREFIX}: error: {exc}", file=err)
        return 2
    except BadSql as exc:
        print(f"{PREFIX}: error: {exc}", file=err)
        return 1
    try:
        df = spark.sql(query)
        check_no_reflection(spark_jvm.analyzed_plan(df))
        rows = [tuple(r) for r in df.collect()]
    except NotReadOnly as exc:
        print(f"{PREFIX}: error: {exc}", file=err)
        return 2
    except (AnalysisException, ParseException) as exc:
        print(f"{PREFIX}: error: {_analysis_error(exc, names)}", file=err)
        return 1
    render(df.columns, rows, fmt, out)
    return 0


def _analysis_error(exc, tables: list[str]) -> str:
    """Spark's error on one line; a misspelt table names the lake's tables, as on DataFusion."""
    from market_spread.lake.fast_sql import NoSuchTable

    if exc.getCondition() == "TABLE_OR_VIEW_NOT_FOUND":
        name = (exc.getMessageParameters() or {}).get("relationName", "")
        return str(NoSuchTable(name.replace("`", ""), tables))
    return str(exc).strip().splitlines()[0]


@dataclass(frozen=True)
class QuerySpec:
    """One `sql` run: the lake, the query, the output format (table, json or csv) and the engine
    (auto: DataFusion for a plain query, else Spark SQL; fast: DataFusion only; spark: Spark only)."""

    lake: Location  # a local folder or an S3 prefix
    query: str
    format: str = "table"
    engine: str = "auto"


def query_lake(spec: QuerySpec, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one read-only query over the lake's tables, printed to `out`; the exit code (0, 1 for a
    failing query, 2 for a statement that is not read-only, or not a plain query with `--engine
    fast`). UsageError for a lake without tables."""
    # Imported here: tables loads pyarrow, and `market-spread --help` imports the sql command.
    from market_spread.lake.tables import existing_tables

    out, err = out or sys.stdout, err or sys.stderr
    tables = existing_tables(spec.lake)
    if not tables:
        raise UsageError(f"no Delta tables under --lake {spec.lake}")
    if spec.engine != "spark":
        done = _on_datafusion(spec, tables, out, err)
        if done is not None:
            return done
    return _on_spark(spec, out, err)


def _on_datafusion(spec: QuerySpec, tables: list[str], out: TextIO, err: TextIO) -> int | None:
    """The exit code when DataFusion answered (or the run ends here); None when Spark's turn has come,
    its note printed."""
    from market_spread.lake import fast_sql

    decision = route(spec.query)
    if not decision.fast:
        if spec.engine == "fast":
            print(f"{PREFIX}: error: --engine fast runs one plain query only: {decision.reason}", file=err)
            return 2
        reason = decision.reason
    else:
        try:
            columns, rows = fast_sql.run(spec.lake, tables, spec.query)
        except fast_sql.NoSuchTable as exc:
            print(f"{PREFIX}: error: {exc}", file=err)
            return 1
        except fast_sql.Failed as exc:
            if spec.engine == "fast" or not exc.spark_may_run:
                print(f"{PREFIX}: error: {exc}", file=err)
                return 1
            reason = fast_sql.why_spark(exc)
        else:
            render(columns, rows, spec.format, out)
            return 0
    print(f"{PREFIX}: note: running on Spark SQL ({reason}); this takes a few seconds", file=err)
    return None


def _on_spark(spec: QuerySpec, out: TextIO, err: TextIO) -> int:
    # Imported here: it loads pyspark, which the DataFusion path never does.
    from market_spread.runtime.spark import build_session

    spark = build_session("market-spread-sql", extra_conf={"spark.sql.shuffle.partitions": "2"})
    try:
        return execute(spark, str(spec.lake), spec.query, spec.format, out, err)
    finally:
        spark.stop()
