"""Evaluating the values of ``INSERT INTO ... VALUES`` and turning them into what a file
topic stores.

A value arrives as a sqlglot tree already checked by :mod:`..language.values` (literals,
typed literals, CAST, INTERVAL, arithmetic, ``||`` and a table of deterministic functions;
no column, no subquery). A plain literal is taken as it is; anything else is transpiled by
sqlglot from Spark SQL to DuckDB and evaluated in a private in-memory DuckDB that is
locked before the first value (no file or network access, no extensions, no configuration
changes), one value per query so an error names its value. Nothing is built as text from
the user's input: the tree is transformed and generated. It is bounded as pull queries are
(:mod:`.sandbox`: memory, time, and RPAD and REPLACE check the size they would build), and
:func:`record_problem` bounds what is written: each value, the record, and no line break in
a CSV or DELIMITED value.

:func:`stored` then checks the value against its column's type (see docs/ksqldb.md, "INSERT
VALUES") and gives what is written: numbers, strings and booleans as they are, DATE and
TIMESTAMP values as the text Spark's readers take (UTC; the source's ``timestamp_format``
when it declares one).
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import ValidationError
from ..language import duckdb_calls
from ..language.dialect import DIALECT
from ..language.limits import Limits
from ..language.statements import Column
from ..language.types import TypeName
from ..language.values import check_value, literal_value
from . import sandbox, topics


class Interval:
    """An INTERVAL value, as written (no column holds one; kept to say so)."""

    def __init__(self, text: str):
        self.text = text


class ValueEvaluator:
    """One statement's values, evaluated in a private, locked DuckDB opened on first use."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.con: duckdb.DuckDBPyConnection | None = None
        self.deadline: sandbox.Deadline | None = None

    def __enter__(self) -> ValueEvaluator:
        return self

    def __exit__(self, *exc) -> None:
        if self.con is not None:
            self.deadline.__exit__()  # type: ignore[union-attr]
            self.con.close()

    def value(self, tree: exp.Expr, column: str = "") -> Any:
        """The value of ``tree`` (for ``column``); ValidationError naming both if it cannot
        be evaluated."""
        problem = check_value(tree)  # checked by the parser; never evaluate an unchecked tree
        if problem is not None:
            raise ValidationError(problem)
        plain, value = literal_value(tree)
        if plain:
            return value
        shown = _shown(tree) + (f" for column {column!r}" if column else "")
        try:
            guarded = sandbox.guarded(duckdb_calls.for_duckdb(tree), self.limits)
            sql = exp.select(exp.alias_(guarded, "v")).sql(dialect="duckdb")
        except SqlglotError as e:
            raise ValidationError(f"cannot evaluate {shown}: {_one_line(str(e))}") from None
        try:
            con = self._connection()
            if not sandbox.one_select(con, sql):
                raise ValidationError(f"cannot evaluate {shown}: not one value")
            table = con.sql(sql).to_arrow_table()
        except duckdb.Error as e:
            limit = self.deadline.error(e) if self.deadline is not None else None
            if limit is not None:
                raise ValidationError(f"cannot evaluate {shown}: {limit.message}") from None
            raise ValidationError(f"cannot evaluate {shown}: {_one_line(str(e))}") from None
        result = table.column(0)
        if str(result.type).startswith(("month_day_nano_interval", "duration")):
            return Interval(_shown(tree))
        return result.to_pylist()[0]

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self.con is None:  # nothing to load: locked before the first value
            self.con = sandbox.connect(self.limits)  # locked, reading no file
            self.deadline = sandbox.Deadline(self.con, self.limits, "evaluating the values").__enter__()
        return self.con


def record_problem(record: dict[str, Any], fmt: str, limits: Limits) -> str | None:
    """Why ``record`` (column -> stored value) cannot be written in format ``fmt`` (None if
    it can): a value over ``value_bytes``, a line break in a CSV or DELIMITED value (Spark
    reads those files line by line: the record would be split in two, and the line after
    the break read as a record of its own), or the record over ``row_bytes`` (as JSON)."""
    for column, value in record.items():
        size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0
        if size > limits.value_bytes:
            return limits.exceeded("value_bytes", f"the value of column {column!r} is {size:,} bytes")
        if fmt in topics.TEXT_FORMATS and isinstance(value, str) and ("\n" in value or "\r" in value):
            return (
                f"value {_shown_value(value)} of column {column!r} holds a line break, which a {fmt} record "
                f"cannot: Spark reads {fmt} files line by line and would split the record in two "
                f"(leave the line break out, or use value_format='JSON')"
            )
    size = len(json.dumps(record, default=str).encode("utf-8", "surrogatepass"))
    if size > limits.row_bytes:
        return limits.exceeded("row_bytes", f"the record is {size:,} bytes (as JSON)")
    return None


def stored(value: Any, column: Column, tree: exp.Expr, *, timestamp_format: str | None = None) -> Any:
    """``value`` (of the expression ``tree``) as column ``column`` stores it; ValidationError
    naming the value and the column when it does not fit.

    Numbers must fit the column's type (a whole number fits any number column wide enough,
    a fraction only FLOAT, DOUBLE and DECIMAL); a string fits STRING, and DATE and
    TIMESTAMP when it is one (the source's ``timestamp_format`` when declared); a DATE
    value fits DATE, a TIMESTAMP value TIMESTAMP; BOOLEAN takes TRUE and FALSE. Nothing
    else converts implicitly: a number into a STRING column is an error (CAST it).
    """
    t = column.type
    plain, _ = literal_value(tree)
    same = plain or isinstance(tree, exp.Interval) or _shown(tree).upper() == _shown_value(value).upper()
    of = "" if same else f" (the value of {_shown(tree)})"

    def bad(what: str, hint: str) -> ValidationError:
        return ValidationError(
            f"value {_shown_value(value)}{of} does not fit column {column.name!r} of type {column.type}: {what}; {hint}"
        )

    if isinstance(value, Interval):
        raise bad("an INTERVAL is no column's value", "add it to a TIMESTAMP (TIMESTAMP '...' + INTERVAL 1 HOUR)")
    if t.name in NESTED and value is not None:
        return _nested(value, column, tree, bad)
    if isinstance(value, datetime.datetime):
        if not t.is_timestamp:
            raise bad("it is a TIMESTAMP", f"CAST it to {column.type}")
        return _timestamp_text(value, column, timestamp_format, bad)
    if isinstance(value, datetime.date):
        if t.name is not TypeName.DATE:
            raise bad("it is a DATE", f"CAST it to {column.type}")
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        value = int(value) if value == value.to_integral_value() and t.is_integer else float(value)
    if isinstance(value, (list, dict)):
        raise bad(f"it is {_kind(value)}", f"write a value of type {column.type.name.value}")
    if isinstance(value, bytes):
        raise bad("it is bytes", "INSERT VALUES writes numbers, strings, booleans, dates, times and ARRAY, MAP, STRUCT")
    try:
        return topics.coerce(value, column, timestamp_format=timestamp_format)
    except ValidationError as e:
        raise ValidationError(e.message.replace(" does not fit column", f"{of} does not fit column", 1)) from None


#: the types whose values are built by ARRAY, MAP and STRUCT constructors
NESTED = (TypeName.ARRAY, TypeName.MAP, TypeName.STRUCT)


def _kind(value: Any) -> str:
    """What an evaluated value is (DuckDB gives a MAP as a list of (key, value) pairs)."""
    if isinstance(value, dict):
        return "a STRUCT"
    if isinstance(value, list) and value and all(isinstance(p, tuple) for p in value):
        return "a MAP"
    return "an ARRAY" if isinstance(value, list) else "a single value"


def _nested(value: Any, column: Column, tree: exp.Expr, bad) -> Any:
    """An ARRAY, MAP or STRUCT value as its JSON stores it, each element checked against its
    type as a column of its own (named ``col[1]``, ``col['k']``, ``col.f``)."""
    t, kind = column.type, _kind(value)

    def part(name: str, part_type, part_value: Any) -> Any:
        return stored(part_value, Column(name, part_type), tree)

    if t.name is TypeName.ARRAY and kind == "an ARRAY":
        return [part(f"{column.name}[{i}]", t.elements[0], v) for i, v in enumerate(value, start=1)]
    if t.name is TypeName.MAP and (kind == "a MAP" or value == []):
        keys = [part(f"{column.name} key", t.elements[0], k) for k, _v in value]
        if any(k is None for k in keys):
            raise bad("a MAP key is NULL", "give every key a value")
        return {str(k): part(f"{column.name}[{k!r}]", t.elements[1], v) for k, (_k, v) in zip(keys, value, strict=True)}
    if t.name is TypeName.STRUCT and kind == "a STRUCT":
        fields = {name.lower(): (name, ftype) for name, ftype in t.fields}
        unknown = next((k for k in value if k.lower() not in fields), None)
        if unknown is not None:
            raise bad(f"it has a field {unknown!r}", f"its fields are {', '.join(n for n, _ in t.fields)}")
        given = {k.lower(): v for k, v in value.items()}
        return {name: part(f"{column.name}.{name}", ftype, given.get(name.lower())) for name, ftype in t.fields}
    raise bad(f"it is {kind}", f"write a value of type {t.name.value}")


def _timestamp_text(value: datetime.datetime, column: Column, timestamp_format: str | None, bad) -> str:
    """A TIMESTAMP value as the text Spark reads back as the same instant (UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    if not timestamp_format:
        return value.isoformat(sep=" ", timespec="microseconds" if value.microsecond else "seconds")
    pattern = topics.spark_pattern(timestamp_format)
    millis = f"{value.microsecond // 1000:03d}"
    text = value.strftime(pattern.strptime.replace("%%", "\0").replace("%f", millis).replace("\0", "%%"))
    if not pattern.matches(text) or datetime.datetime.strptime(text, pattern.strptime) != value:
        raise bad(
            f"its timestamp_format {timestamp_format!r} cannot hold it (it would read as {text!r})",
            "round it (DATE_TRUNC) or declare a finer timestamp_format",
        )
    return text


def _shown(tree: exp.Expr) -> str:
    """The value as the statement wrote it (the parser keeps its text), else as Spark SQL."""
    text = " ".join((tree.meta.get("text") or tree.sql(dialect=DIALECT)).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _shown_value(value: Any) -> str:
    """A value as a SQL literal: 'text', 12, TIMESTAMP '2024-01-01 00:00:00', DATE '...'."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        text = f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    elif isinstance(value, datetime.date):
        text = f"DATE '{value.isoformat()}'"
    elif isinstance(value, Interval):
        text = value.text
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _one_line(message: str) -> str:
    """DuckDB's message without its echo of the generated SQL (``LINE 1: ...``)."""
    return " ".join(message.split("\nLINE ")[0].split())[:300]
