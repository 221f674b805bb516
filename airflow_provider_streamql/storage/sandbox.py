"""The private DuckDB that pull queries and INSERT VALUES run user expressions in: in memory,
no extension ever fetched or loaded, UTC (Spark's session time zone), and locked before the
first statement runs: no file or network access but to the files it is opened to read (a pull
query's sources, DuckDB's ``allowed_paths``), and no configuration change.

It is bounded by :class:`~..language.limits.Limits`: DuckDB's own ``memory_limit`` and
``threads`` (with nothing spilled to disk), a :class:`Deadline` that cancels what runs too
long (DuckDB's interrupt, from a timer thread), and :func:`guarded`, which makes each call
of a function that builds a value far larger than its arguments (RPAD, REPEAT, SEQUENCE,
...; :data:`GROWING`) check the size it would build first: DuckDB allocates such a value in
one piece, outside its memory limit and beyond the reach of an interrupt.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from ..errors import ValidationError
from ..language.limits import Limits

#: set when the connection opens, so not even loading can fetch or load an extension
CONFIG = {
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
}
#: before anything runs: text without an offset is UTC, whatever the host's zone is
SESSION = ("SET TimeZone = 'UTC'",)
#: before any statement of streamql's or a user's, in this order; the last one freezes them all
LOCKDOWN = ("SET enable_external_access = false", "SET lock_configuration = true")
#: what a size check's error starts with (see :func:`guarded`); the rest is its message
LIMIT_MARK = "streamql-limit: "


def connect(limits: Limits | None = None, *, readable: Sequence[str] = ()) -> duckdb.DuckDBPyConnection:
    """A new private connection within ``limits`` (memory, threads; no temporary files, so
    nothing spills to disk), locked (:func:`lock`): it reads the files of ``readable`` (real
    paths the layout checked) and no other."""
    limits = limits or Limits()
    config: dict[str, Any] = {
        **CONFIG,
        "memory_limit": f"{limits.pull_memory_bytes}B",
        "threads": limits.pull_threads,
        "temp_directory": "",
    }
    con = duckdb.connect(":memory:", config=config)
    for statement in SESSION:
        con.execute(statement)
    con.execute("SET allowed_paths = ?", [list(readable)])
    lock(con)
    return con


def lock(con: duckdb.DuckDBPyConnection) -> None:
    """No file or network access (but to the allowed paths) and no configuration change from
    now on."""
    for statement in LOCKDOWN:
        con.execute(statement)


def one_select(con: duckdb.DuckDBPyConnection, sql: str) -> bool:
    """``sql`` is exactly one SELECT (generated SQL is checked before it runs)."""
    statements = con.extract_statements(sql)
    return len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT


class Deadline:
    """Cancels what ``con`` runs once ``seconds`` have passed (``with Deadline(...)``);
    :meth:`error` turns the interrupt DuckDB raises then into the limit's error."""

    def __init__(self, con: duckdb.DuckDBPyConnection, limits: Limits, what: str):
        self.con, self.limits, self.what = con, limits, what
        self.expired = threading.Event()
        self.timer = threading.Timer(limits.pull_seconds, self._expire)
        self.timer.daemon = True

    def _expire(self) -> None:
        self.expired.set()
        self.con.interrupt()

    def __enter__(self) -> Deadline:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()

    def error(self, error: duckdb.Error) -> ValidationError | None:
        """The error to raise for DuckDB's ``error``, if it is one of the limits (time,
        memory, a size check), else None."""
        if self.expired.is_set() and isinstance(error, duckdb.InterruptException):
            return ValidationError(
                self.limits.exceeded(
                    "pull_seconds", f"{self.what} ran longer than {self.limits.pull_seconds:g} s and was cancelled"
                )
            )
        if isinstance(error, duckdb.OutOfMemoryException):
            return ValidationError(
                self.limits.exceeded(
                    "pull_memory_bytes",
                    f"{self.what} needs more memory than DuckDB may use ({_first(error)})",
                )
            )
        text = str(error)
        if LIMIT_MARK in text:
            return ValidationError(text.split(LIMIT_MARK, 1)[1].strip())
        return None


def _first(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


# -- functions that build large values -------------------------------------------------
#: (name shown, bytes per unit, the size a call would build in units) by sqlglot class, or by
#: the name of a DuckDB function (a name sqlglot does not know reaches DuckDB as written).
#: A size is DuckDB SQL over the call's arguments, written {this}, {times}, ... (the class's
#: arguments) or {a0}, {a1}, ... (a call by name); an argument not given is NULL. Sizes are
#: estimates from above, in DOUBLE (no overflow).
_NUMBERS = "coalesce(list_sum(list_transform(regexp_extract_all({p}, '[0-9]+'), lambda d: TRY_CAST(d AS DOUBLE))), 0)"
_SERIES = "abs((CAST({end} AS DOUBLE) - CAST({start} AS DOUBLE)) / coalesce(CAST({step} AS DOUBLE), 1)) + 1"
_SERIES_OF_TIMES = "abs((epoch({end}) - epoch({start})) / epoch({step})) + 1"
_BY_POSITION = "abs((CAST({a1} AS DOUBLE) - coalesce(CAST({a0} AS DOUBLE), 0)) / coalesce(CAST({a2} AS DOUBLE), 1)) + 1"
GROWING: dict[type[exp.Expr] | str, tuple[str, int, str]] = {
    exp.Pad: ("RPAD/LPAD", 1, "CAST({expression} AS DOUBLE)"),
    exp.Repeat: ("REPEAT", 1, "CAST(len({this}) AS DOUBLE) * {times}"),
    exp.Space: ("SPACE", 1, "CAST({this} AS DOUBLE)"),
    exp.GenerateSeries: ("SEQUENCE", 8, _SERIES),
    exp.Replace: ("REPLACE", 1, "CAST(len({this}) AS DOUBLE) * greatest(len({replacement}), 1)"),
    exp.RegexpReplace: ("REGEXP_REPLACE", 1, "(CAST(len({this}) AS DOUBLE) + 1) * greatest(len({replacement}), 1)"),
    exp.Format: ("FORMAT_STRING", 1, "len({this}) + " + _NUMBERS.format(p="{this}")),
    "printf": ("PRINTF", 1, "len({a0}) + " + _NUMBERS.format(p="{a0}")),
    "format": ("FORMAT", 1, "len({a0}) + " + _NUMBERS.format(p="{a0}")),
    "range": ("RANGE", 8, _BY_POSITION),
    "generate_series": ("GENERATE_SERIES", 8, _BY_POSITION),
    "list_resize": ("LIST_RESIZE", 8, "CAST({a1} AS DOUBLE)"),
    "array_resize": ("ARRAY_RESIZE", 8, "CAST({a1} AS DOUBLE)"),
    "repeat": ("REPEAT", 1, "CAST(len({a0}) AS DOUBLE) * {a1}"),
    "lpad": ("LPAD", 1, "CAST({a1} AS DOUBLE)"),
    "rpad": ("RPAD", 1, "CAST({a1} AS DOUBLE)"),
    "to_base": ("TO_BASE", 1, "coalesce(CAST({a2} AS DOUBLE), 64)"),
    "bitstring": ("BITSTRING", 1, "CAST({a1} AS DOUBLE)"),
    "bar": ("BAR", 4, "coalesce(CAST({a3} AS DOUBLE), 80)"),
}


def guarded(tree: exp.Expr, limits: Limits) -> exp.Expr:
    """A copy of ``tree`` (to be generated as DuckDB SQL) in which each call of a
    :data:`GROWING` function first checks the size it would build against
    ``limits.value_bytes``, raising DuckDB's ``error()`` with the limit's message (marked
    :data:`LIMIT_MARK`) when it is over. Each argument is evaluated once: the call becomes
    ``list_extract(list_transform([{args}], lambda v: CASE WHEN size > limit THEN error(...)
    ELSE call(v.args) END), 1)``."""
    tree = tree.copy()
    calls = [node for node in tree.walk(bfs=False) if _growing(node) is not None]
    for node in reversed(calls):  # the innermost first
        # one name for every lambda: an inner call sits in the outer one's arguments, not in
        # its body, and the same call written twice (SELECT and GROUP BY) stays the same SQL
        checked = _checked(node, limits, "streamql_v")
        tree = checked if node is tree else tree
        node.replace(checked)
    return tree


def _growing(node: exp.Expr) -> tuple[str, int, str] | None:
    if isinstance(node, exp.Anonymous):
        return GROWING.get(node.name.lower())
    return GROWING.get(type(node))


class _Arguments(dict):
    """A size formula's placeholders: the lambda's field of each argument given, else NULL."""

    def __missing__(self, key: str) -> str:
        return "NULL"


def _checked(node: exp.Expr, limits: Limits, var: str) -> exp.Expr:
    """``node`` (a :data:`GROWING` call) checking its size first (see :func:`guarded`)."""
    name, unit, size = _growing(node)  # type: ignore[misc]
    if isinstance(node, exp.GenerateSeries) and isinstance(node.args.get("step"), exp.Interval):
        size = _SERIES_OF_TIMES
    call = node.copy()
    args: dict[str, exp.Expr] = {}
    if isinstance(call, exp.Anonymous):
        args = {f"a{i}": arg for i, arg in enumerate(call.expressions)}
        call.set("expressions", [exp.column(key, table=var) for key in args])
    else:
        for key, arg in list(call.args.items()):
            if isinstance(arg, exp.Expr):
                args[key] = arg
                call.set(key, exp.column(f"f_{key}", table=var))
    fields = {key: key if isinstance(node, exp.Anonymous) else f"f_{key}" for key in args}
    built = f"(({size.format_map(_Arguments({k: f'{var}.{f}' for k, f in fields.items()}))}) * {unit})"
    # the message: the limit's, with the size spliced in where SIZE stands
    head, tail = limits.exceeded("value_bytes", f"{name} would build a value of about SIZE bytes").split("SIZE", 1)
    message = (
        f"{_literal(LIMIT_MARK + head)} || CAST(CAST(least({built}, 9e18) AS BIGINT) AS VARCHAR) || {_literal(tail)}"
    )
    check = sqlglot.parse_one(f"CASE WHEN {built} > {limits.value_bytes} THEN error({message}) END", dialect="duckdb")
    check.set("default", call)
    struct = exp.Struct(
        expressions=[exp.PropertyEQ(this=exp.to_identifier(fields[k]), expression=arg) for k, arg in args.items()]
    )
    each = exp.Anonymous(
        this="list_transform",
        expressions=[exp.Array(expressions=[struct]), exp.Lambda(this=check, expressions=[exp.to_identifier(var)])],
    )
    return exp.Anonymous(this="list_extract", expressions=[each, exp.Literal.number(1)])


def _literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
