"""Which engine runs a `sql` statement: delta-rs's DataFusion (no JVM) or Spark SQL.

DataFusion runs more than queries: `COPY ... TO` writes files, `SELECT ... INTO` and `CREATE`
make tables, `SET` changes the session; and it parses some of Spark's syntax only to ignore it (a
table's `VERSION AS OF`, TABLESAMPLE). So it is given only text that is, by the tokenization below,
one plain query: it starts with SELECT, WITH, VALUES or `(`, holds no `;` but a trailing one, and
no word or sign that writes, travels in time, calls the JVM or reads differently in the two
engines. Everything else goes to Spark, whose parsed-plan check refuses writes (lake.query).

The tokenization skips what the engines do not read as code: string literals ('...' and "...",
both strings in Spark's SQL and in the dialect DataFusion is given; a doubled quote inside stays
in), quoted identifiers (`...`) and comments (`--` to the end of the line, `/* */`). Where the two
engines could split or read a text differently (a backslash in a string, adjacent strings, a
nested or unclosed comment, an unclosed quote, Spark's literals such as 1L or 1e3, the functions
that answer differently under one name) it goes to Spark.
Pure: standard library only, no Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that write, define, change the session or run other statements, in Spark's SQL or in
# DataFusion's (COPY, SELECT ... INTO, PREPARE/EXECUTE, CREATE EXTERNAL TABLE...).
WRITES = frozenset(
    """INSERT UPDATE DELETE MERGE UPSERT COPY CREATE DROP ALTER TRUNCATE SET RESET REPLACE VACUUM
    OPTIMIZE RESTORE CALL EXECUTE PREPARE DEALLOCATE CACHE UNCACHE REFRESH LOAD GRANT REVOKE USE INTO
    ANALYZE MSCK ADD OVERWRITE RENAME EXTERNAL EXPORT UNLOAD ATTACH DETACH PRAGMA INSTALL LOCK UNLOCK
    BEGIN COMMIT ROLLBACK SAVEPOINT DECLARE DISCARD""".split()
)
# Words whose meaning only Spark gives: JVM calls (refused there), Spark's own syntax, and functions
# DataFusion has under the same name with another answer.
SPARK_WORDS = {
    "REFLECT": "reflect() is Spark's",
    "JAVA_METHOD": "java_method() is Spark's",
    "TRY_REFLECT": "try_reflect() is Spark's",
    "TABLESAMPLE": "TABLESAMPLE is Spark's",
    "CONCAT": "Spark's concat() gives NULL for a NULL",
    "SUBSTR": "Spark's substr() counts a negative position from the end",
    "SUBSTRING": "Spark's substring() counts a negative position from the end",
    "STRING": "casts to STRING follow Spark's formats",
    "VARCHAR": "casts to STRING follow Spark's formats",
}
QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "("})
# Signs the engines read differently: Spark divides integers into a double and decimals to its own
# scale, DataFusion integers into an integer; `@v1` is Delta's time travel; `${x}` Spark's
# variable substitution.
SPARK_SIGNS = {
    "/": "division follows Spark's types",
    "@": "time travel is Spark's syntax",
    "$": "${...} is Spark's variable substitution",
}
WORD = re.compile(r"[^\W\d]\w*")
NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Route:
    """Where a statement runs: `fast` (DataFusion) or Spark, and why Spark."""

    fast: bool
    reason: str = ""


class _Spark(Exception):
    """Control flow: the text goes to Spark, for this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _quoted(text: str, start: int) -> int:
    """The end of the string or identifier opened at `start` (its quote doubled inside stays in, as
    both engines read it)."""
    quote, i = text[start], start + 1
    while True:
        end = text.find(quote, i)
        if end < 0:
            raise _Spark("an unclosed quote: Spark's parser reports it")
        if quote != "`" and "\\" in text[i:end]:
            raise _Spark("backslash escapes in strings are Spark's syntax")
        if not text.startswith(quote, end + 1):
            return end + 1
        i = end + 2


def _comment_end(text: str, start: int) -> int:
    """The end of the `/* */` comment opened at `start`; nested ones are left to Spark."""
    end = text.find("*/", start + 2)
    if end < 0:
        raise _Spark("an unclosed comment: Spark's parser reports it")
    if "/*" in text[start + 2 : end]:
        raise _Spark("a nested comment")
    return end + 2


def tokens(text: str) -> list[str]:
    """The code of `text`: words upper-cased, numbers and single signs; a string is "'" and a quoted
    identifier "`" whatever they hold (and "@" after one that holds it: Delta's `table@v1`);
    comments left out. Raises _Spark for a text the two engines could split differently."""
    found: list[str] = []
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if char.isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = size if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            i = _comment_end(text, i)
        elif char in "'\"`":
            end = _quoted(text, i)
            found.append("`" if char == "`" else "'")
            if char == "`" and "@" in text[i:end]:
                found.append("@")
            i = end
        elif word := WORD.match(text, i):
            found.append(word.group().upper())
            i = word.end()
        elif number := NUMBER.match(text, i):
            i = number.end()
            if i < size and (text[i].isalnum() or text[i] == "_"):
                raise _Spark("typed literals such as 1L or 1.5BD are Spark's syntax")
            if number.group(2):  # DataFusion is told to read 1.5 as a decimal, as Spark does
                raise _Spark("1e3 is a double in Spark")
            found.append(number.group())
        else:
            found.append(char)
            i += 1
    return found


def _check(code: list[str]) -> None:
    if not code:
        raise _Spark("no statement: Spark's parser reports it")
    if code[0] not in QUERY_STARTS:
        raise _Spark(f"{code[0]} is not a plain query")
    if ";" in code[:-1] or code.count(";") > 1:
        raise _Spark("several statements")
    for before, token in zip(["", *code], code):
        if token in WRITES:
            raise _Spark(f"{token} is not a plain query")
        if token in SPARK_WORDS:
            raise _Spark(SPARK_WORDS[token])
        if (before, token) == ("'", "'"):
            raise _Spark("Spark joins adjacent strings into one")
        if (before, token) == ("AS", "OF"):
            raise _Spark("time travel is Spark's syntax")
        if token in SPARK_SIGNS:
            raise _Spark(SPARK_SIGNS[token])


def route(text: str) -> Route:
    """Route(fast=True) when DataFusion may run `text`, else Route(fast=False, reason)."""
    try:
        _check(tokens(text))
    except _Spark as spark:
        return Route(False, spark.reason)
    return Route(True)
