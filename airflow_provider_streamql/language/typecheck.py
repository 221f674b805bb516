"""Type rules of a SELECT's expressions, checked on sqlglot's qualified, typed tree: which
classes of type each operator takes (:data:`OPERAND_RULES`, one row per operator), what
compares with what, and that WHERE and HAVING are conditions. A type sqlglot cannot tell
(class ``unknown``) passes: Spark decides it when the query runs.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..errors import ValidationError
from .dialect import DIALECT

T = exp.DataType.Type
NUMERIC = exp.DataType.NUMERIC_TYPES
TEXT = exp.DataType.TEXT_TYPES
TEMPORAL = exp.DataType.TEMPORAL_TYPES | {T.INTERVAL}
LOOSE = {T.UNKNOWN, T.NULL}


def type_class(data_type: exp.DataType | None) -> str:
    """Coarse class of a type: numeric, text, boolean, temporal, unknown or other."""
    kind = data_type.this if data_type is not None else T.UNKNOWN
    for name, members in TYPE_CLASSES:
        if kind in members:
            return name
    return "other"


TYPE_CLASSES = (
    ("unknown", LOOSE),
    ("numeric", NUMERIC),
    ("text", TEXT),
    ("boolean", {T.BOOLEAN}),
    ("temporal", TEMPORAL),
)

# Operator -> the classes each operand may have (besides unknown).
OPERAND_RULES: tuple[tuple[type[exp.Expr], frozenset[str], str], ...] = (
    (exp.Add, frozenset({"numeric", "temporal"}), "+"),
    (exp.Sub, frozenset({"numeric", "temporal"}), "-"),
    (exp.Mul, frozenset({"numeric"}), "*"),
    (exp.Div, frozenset({"numeric"}), "/"),
    (exp.Mod, frozenset({"numeric"}), "%"),
    (exp.Neg, frozenset({"numeric"}), "unary -"),
    (exp.Sum, frozenset({"numeric"}), "SUM"),
    (exp.Avg, frozenset({"numeric"}), "AVG"),
    (exp.And, frozenset({"boolean"}), "AND"),
    (exp.Or, frozenset({"boolean"}), "OR"),
    (exp.Not, frozenset({"boolean"}), "NOT"),
)
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def check_types(tree: exp.Expr, error: Callable[[str, exp.Expr], ValidationError]) -> None:
    """Every operator of the typed ``tree`` takes its operands' types (:data:`OPERAND_RULES`),
    every comparison compares comparable types, and WHERE and HAVING are conditions; else
    ``error`` (the message, the node to place it at)."""
    for node in tree.walk():
        for op, allowed, shown in OPERAND_RULES:
            if isinstance(node, op):
                for operand in _operands(node):
                    cls = type_class(operand.type)
                    if cls != "unknown" and cls not in allowed:
                        raise error(
                            f"type error: {shown} cannot take {as_written(operand)!r} of type {_type_sql(operand)}",
                            operand,
                        )
        if isinstance(node, COMPARISONS):
            left, right = node.left, node.right
            if not _comparable(left, right):
                raise error(
                    f"type error: cannot compare {as_written(left)!r} "
                    f"({_type_sql(left)}) with {as_written(right)!r} "
                    f"({_type_sql(right)})",
                    node,
                )
    for clause in ("where", "having"):
        condition = tree.args.get(clause)
        if condition is not None and type_class(condition.this.type) not in ("boolean", "unknown"):
            raise error(
                f"type error: {clause.upper()} needs a boolean condition, not {as_written(condition.this)!r}",
                condition.this,
            )


def as_written(node: exp.Expr) -> str:
    """SQL of a node as the user wrote it, without the qualifiers qualify() added."""
    bare = node.copy().transform(lambda n: exp.column(n.name) if isinstance(n, exp.Column) else n)
    return bare.sql(dialect=DIALECT)


def _type_sql(node: exp.Expr) -> str:
    """The type sqlglot gave ``node`` (a node in a type error has one)."""
    return node.type.sql(dialect=DIALECT) if node.type is not None else "UNKNOWN"


def _operands(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Binary):
        return [node.left, node.right]
    return [node.this] if isinstance(node.this, exp.Expr) else []


def _comparable(left: exp.Expr, right: exp.Expr) -> bool:
    classes = {type_class(left.type), type_class(right.type)}
    if "unknown" in classes or len(classes) == 1:
        return True
    if classes == {"numeric", "text"}:
        text_side = left if type_class(left.type) == "text" else right
        return isinstance(text_side, exp.Literal) and _is_number(text_side.this)
    return classes == {"temporal", "text"}


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
