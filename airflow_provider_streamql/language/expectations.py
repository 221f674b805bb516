"""Row-level expectations of a persistent query (Databricks Lakeflow's ``@dp.expect``,
``expect_or_drop`` and ``expect_or_fail``): ``WITH (expect = '<boolean expression>',
on_violation = 'LOG' | 'DROP' | 'FAIL' | 'PAUSE')``.

The expression is read once, here, over the query's output columns: a single Spark SQL
expression (never a statement), analyzed as a projection over those columns (names resolved
to their one spelling, functions from the closed function table, types checked) and BOOLEAN.
What the catalog records and the runtime hands Spark is rendered from that tree, identifiers
quoted (:attr:`Expectation.sql`), never the text as written.

A row violates the expectation when the expression is FALSE; NULL passes, as a SQL CHECK
constraint does and as Lakeflow counts its failed records (write ``x IS NOT NULL AND ...``
to refuse NULLs).
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..errors import ValidationError
from .analyzer import analyze_select
from .dialect import DIALECT
from .statements import Column, Statement
from .types import TypeName

#: the WITH properties, as written and as a query's settings record them
EXPECT = "expect"
ON_VIOLATION = "on_violation"
#: the setting holding the condition as Spark SQL (``expect`` holds it as shown)
EXPECT_SQL = "expect_sql"
#: the settings an expectation is recorded in: part of the query's definition, so a CREATE
#: OR REPLACE that does not restate them removes the expectation (not kept as on_error is)
SETTINGS = (EXPECT, EXPECT_SQL, ON_VIOLATION)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the name the expression has while it is analyzed as a projection
_CHECKED = "expectation"


class OnViolation(enum.StrEnum):
    """What a row violating the expectation does."""

    LOG = "LOG"  # kept in the output, counted (Lakeflow's expect)
    DROP = "DROP"  # left out of the output, sent to the dead-letter stream (expect_or_drop)
    FAIL = "FAIL"  # fails the batch before its output commits (expect_or_fail)
    PAUSE = "PAUSE"  # holds the query at the batch, as on_error='PAUSE' does at a bad record


@dataclass(frozen=True)
class Expectation:
    """A query's expectation: its analyzed condition and what a violating row does."""

    condition: exp.Expr
    on_violation: OnViolation = OnViolation.LOG

    @property
    def sql(self) -> str:
        """The condition as Spark SQL, rendered from the tree with identifiers quoted."""
        return self.condition.sql(dialect=DIALECT, identify=True)

    @property
    def text(self) -> str:
        """The condition as shown (DESCRIBE, errors, dead letters): plain names unquoted."""
        shown = self.condition.copy()
        for name in shown.find_all(exp.Identifier):
            name.set("quoted", not _PLAIN_NAME.fullmatch(name.name))
        return shown.sql(dialect=DIALECT)

    def settings(self) -> dict[str, str]:
        """What the query's settings record of it."""
        return {EXPECT: self.text, EXPECT_SQL: self.sql, ON_VIOLATION: self.on_violation.value}


@dataclass(frozen=True)
class Recorded:
    """An expectation as a query's settings record it, for the runtime and the read side:
    the Spark SQL rendered at planning and the mode."""

    sql: str
    text: str
    on_violation: OnViolation

    @classmethod
    def of(cls, settings: Mapping[str, object]) -> Recorded | None:
        sql, text = settings.get(EXPECT_SQL), settings.get(EXPECT)
        if not isinstance(sql, str) or not isinstance(text, str) or not sql:
            return None
        return cls(sql, text, OnViolation(str(settings.get(ON_VIOLATION) or OnViolation.LOG)))

    def describe(self) -> str:
        """As DESCRIBE shows it (with the counts beside it)."""
        return f"{self.text} (on_violation {self.on_violation})"


def on_violation_of(value: object) -> OnViolation:
    """``on_violation``'s value as the mode (any case); a ValueError saying why not."""
    if not isinstance(value, str) or value.upper() not in OnViolation.__members__:
        raise ValueError(f"must be one of {', '.join(OnViolation)}, not {value!r}")
    return OnViolation(value.upper())


def expectation(text: object, columns: Sequence[Column], on_violation: OnViolation) -> Expectation:
    """``expect = text`` over a query's output ``columns``, analyzed; a ValueError saying what
    is wrong (not one expression, an unknown column, a type error, not BOOLEAN, an aggregate)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("must be a boolean expression over the query's output columns, such as 'amount > 0'")
    try:
        parsed = _parse(text)
    except (ParseError, TokenError) as e:  # an unclosed quote is a TokenError
        raise ValueError(f"is not an expression: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise ValueError("is nested too deeply to be read") from None
    if len(parsed) != 1 or parsed[0] is None or isinstance(parsed[0], (exp.Query, exp.Command, exp.DDL, exp.DML)):
        raise ValueError("must be one boolean expression, not a statement or several")
    condition = parsed[0]
    for node, problem in (
        (exp.AggFunc, "an aggregate"),
        (exp.Window, "a window function"),
        (exp.Query, "a subquery"),
    ):
        if condition.find(node) is not None:
            raise ValueError(f"is checked row by row: {problem} is not allowed")
    output = "STREAMQL_OUTPUT"
    select = exp.select(exp.alias_(condition.copy(), _CHECKED)).from_(output)
    try:
        analysis = analyze_select(select, {output: list(columns)}, _Plain(), persistent=True)
    except ValidationError as e:
        raise ValueError(e.message) from None
    (checked,) = analysis.columns
    if checked.type.name is not TypeName.BOOLEAN:
        raise ValueError(f"must be a boolean expression, not {checked.type}")
    assert analysis.typed is not None
    tree = analysis.typed.selects[0].unalias().copy()
    spelled = {c.name.lower(): c.name for c in columns}
    for column in tree.find_all(exp.Column):  # over the output's row, each name as the output spells it
        column.set("table", None)
        column.set("this", exp.to_identifier(spelled.get(column.name.lower(), column.name), quoted=True))
    return Expectation(tree, on_violation)


def _parse(text: str) -> list[exp.Expr | None]:
    # sqlglot warns when it falls back to a Command: here that is refused with an error
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return list(sqlglot.parse(text, read=DIALECT))
    finally:
        quiet.setLevel(level)


@dataclass
class _Plain(Statement):
    """The statement an expectation is analyzed in: no WINDOW, its own text."""
