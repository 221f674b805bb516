"""The values of ``INSERT INTO s [(columns)] VALUES (...)``: Spark SQL expressions over
literals only.

A value is parsed by sqlglot (Spark dialect) into an expression tree and checked here
against two class-level tables before anything evaluates it: :data:`NODES` (literals,
NULL, typed literals and CAST, INTERVAL, arithmetic, ``||``, comparisons, CASE/IF) and
:data:`FUNCTIONS` (deterministic scalar functions, and the ARRAY, MAP and STRUCT
constructors). A column reference, a subquery, an
unknown or nondeterministic function or any other node is refused, naming it.
:mod:`..storage.values` evaluates a checked tree.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlglot import exp

from .dialect import DIALECT, PATTERN_CALLS
from .names import PLAIN_NAME

#: the expression nodes a value may hold (besides :data:`FUNCTIONS`)
NODES: tuple[type[exp.Expr], ...] = (
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.Paren,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.DPipe,
    exp.Cast,  # CAST(x AS t), and typed literals: TIMESTAMP '...', DATE '...'
    exp.TryCast,
    exp.TimeStrToTime,  # a TIMESTAMP '...' where a function takes a timestamp
    exp.DataType,
    exp.DataTypeParam,
    exp.Interval,  # INTERVAL 1 HOUR, INTERVAL '1' DAY
    exp.IntervalSpan,
    exp.Var,  # a unit word: HOUR, DAY, ... (plain words only, see check)
    exp.Not,
    exp.And,
    exp.Or,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.Case,
    exp.If,
    exp.PropertyEQ,  # a STRUCT's field: STRUCT(x := 1), STRUCT(1 AS x), NAMED_STRUCT('x', 1)
)

#: scalar functions a value may call, by sqlglot class -> the name shown in messages.
#: Deterministic only: a value is evaluated once, when the statement is planned.
FUNCTIONS: dict[type[exp.Func], str] = {
    exp.Concat: "CONCAT",
    exp.ConcatWs: "CONCAT_WS",
    exp.Upper: "UPPER (UCASE)",
    exp.Lower: "LOWER (LCASE)",
    exp.Substring: "SUBSTRING (SUBSTR)",
    exp.Trim: "TRIM",
    exp.Length: "LENGTH",
    exp.Replace: "REPLACE",
    exp.Pad: "LPAD, RPAD",
    exp.Left: "LEFT",
    exp.Right: "RIGHT",
    exp.Reverse: "REVERSE",
    exp.StrPosition: "INSTR",
    exp.Coalesce: "COALESCE (NVL, IFNULL)",
    exp.Nullif: "NULLIF",
    exp.Greatest: "GREATEST",
    exp.Least: "LEAST",
    exp.Abs: "ABS",
    exp.Round: "ROUND",
    exp.Floor: "FLOOR",
    exp.Ceil: "CEIL",
    exp.Sqrt: "SQRT",
    exp.Pow: "POWER",
    exp.Exp: "EXP",
    exp.Ln: "LN",
    exp.TsOrDsToDate: "TO_DATE",
    exp.StrToTime: "TO_TIMESTAMP",
    exp.TimeToStr: "DATE_FORMAT",
    exp.TsOrDsAdd: "DATE_ADD",
    exp.TimestampTrunc: "DATE_TRUNC",
    exp.UnixToStr: "FROM_UNIXTIME",
    # constructors of ARRAY, MAP and STRUCT values (ksqlDB's ARRAY[...], MAP(...), STRUCT(...))
    exp.Array: "ARRAY",
    exp.VarMap: "MAP",
    exp.Struct: "STRUCT (NAMED_STRUCT)",
}

ALLOWED = (*NODES, *FUNCTIONS)


def check_value(tree: exp.Expr) -> str | None:
    """Why ``tree`` is not a value INSERT VALUES evaluates (None if it is one)."""
    for node in tree.walk():
        if isinstance(node, exp.Column):
            return (
                f"{_shown(node)!r} is a column reference; INSERT VALUES takes values "
                f"(literals and expressions over them)"
            )
        if isinstance(node, (exp.Subquery, exp.Query)):
            return "a subquery is not a value; INSERT VALUES takes literals and expressions over them"
        if isinstance(node, exp.Var) and not PLAIN_NAME.fullmatch(node.name):
            return f"{node.name!r} is not a unit or keyword (a plain word such as HOUR or DAY)"
        if isinstance(node, exp.Anonymous) and node.name.lower() in PATTERN_CALLS:
            continue  # TO_TIMESTAMP, TO_DATE and DATE_FORMAT with a pattern, kept as written
        if isinstance(node, exp.Func) and type(node) not in ALLOWED:
            return (
                f"{_shown(node)!r} calls a function INSERT VALUES does not evaluate (deterministic "
                f"functions of literals only: {', '.join(sorted(FUNCTIONS.values()))})"
            )
        if isinstance(node, exp.Identifier) and isinstance(node.parent, exp.PropertyEQ) and node.arg_key == "this":
            continue  # a STRUCT field's name
        if type(node) not in ALLOWED:
            return f"{_shown(node)!r} is not a value INSERT VALUES takes (literals and expressions over them)"
    return None


def _shown(node: exp.Expr) -> str:
    text = node.sql(dialect=DIALECT)
    return text if len(text) <= 60 else text[:57] + "..."


def literal_value(tree: exp.Expr) -> tuple[bool, Any]:
    """``(True, value)`` for a plain literal -- a string, a number (optionally negated),
    TRUE, FALSE or NULL -- typed as the evaluator types it (a whole number: int, a number
    with a point: Decimal, with an exponent: float); ``(False, None)`` for anything else."""
    if isinstance(tree, exp.Null):
        return True, None
    if isinstance(tree, exp.Boolean):
        return True, tree.this
    sign = 1
    if isinstance(tree, exp.Neg) and isinstance(tree.this, exp.Literal) and not tree.this.is_string:
        sign, tree = -1, tree.this
    if not isinstance(tree, exp.Literal):
        return False, None
    if tree.is_string:
        return (True, tree.this) if sign == 1 else (False, None)
    text = tree.this
    if any(c in text for c in "eE"):
        return True, sign * float(text)
    if "." in text:
        return True, sign * Decimal(text)
    return True, sign * int(text)
