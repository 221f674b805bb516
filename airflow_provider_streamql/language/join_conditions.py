"""What a join's ON may say, as ksqlDB reads it: equalities between the joined source and
the sources before it, one of them, or one per column of a joined TABLE's composite PRIMARY
KEY. Anything else (a comparison, OR, a filter of one side, a second equality) is refused
with ksqlDB's reason, and a stream-table join must equate the table's PRIMARY KEY, so that
each stream record meets at most one table row. Read by the feasibility rules; pure
functions of the SELECT tree: no catalog, no Spark."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from .tables import from_table, unmatched_keys

#: comparisons ksqlDB names when it refuses them ("Only equality join criteria is supported.")
COMPARISONS = (exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


class Side(Enum):
    """Whose columns an expression in ON reads."""

    JOINED = "the joined source"
    OTHERS = "the sources before it"
    BOTH = "both"
    NONE = "no source"


@dataclass(frozen=True)
class JoinedSource:
    """The join under check: its tree, the joined source's name and kind, and its PRIMARY
    KEY columns when it is a TABLE."""

    join: exp.Join
    name: str
    kind: str
    keys: tuple[str, ...] = ()
    #: the ON condition as the statement writes it, for errors
    written: str = ""


def problem(select: exp.Select, joined: JoinedSource, first_kind: str) -> str | None:
    """Why ``joined``'s ON cannot be run as ksqlDB runs it, in ksqlDB's words and ours, or
    None. ``first_kind``: the kind (STREAM/TABLE) of the FROM source."""
    condition = joined.join.args.get("on")
    if condition is None:
        return None
    shown = joined.written or condition.sql()
    parts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    for part in parts:
        if isinstance(part, COMPARISONS):
            return (
                f"Only equality join criteria is supported (ksqlDB's words). Got {shown}: a join "
                f"matches equal values; bound a stream-stream join's time with WITHIN, and put other "
                f"conditions in WHERE"
            )
        if not isinstance(part, exp.EQ):
            return (
                f"Unsupported join expression: {shown} (ksqlDB's words): ON equates a column of "
                f"{joined.name} with one of the sources before it; put other conditions in WHERE"
            )
        sides = {_side(select, joined, part.this), _side(select, joined, part.expression)}
        if sides != {Side.JOINED, Side.OTHERS}:
            return (
                f"Invalid join condition: each side of = reads one side of the join ({joined.name} "
                f"on one, the sources before it on the other). Got {shown}: a filter of one side "
                f"belongs in WHERE"
            )
    table = joined.kind == "TABLE"
    if len(parts) > 1 and not (table and _equates_each_key_once(select, joined, parts)):
        return (
            f"Invalid join condition: joins on multiple conditions are not yet supported (ksqlDB's "
            f"words). Got {shown}: join on one equality (a TABLE with a composite PRIMARY KEY: one "
            f"per key column), and put the other conditions in WHERE"
        )
    if table and first_kind == "STREAM" and unmatched_keys(select, joined.join, list(joined.keys)):
        return (
            f"Invalid join condition: stream-table joins require to join on the table's primary key "
            f"(ksqlDB's words). Got {shown}: ON must equate {joined.name}'s PRIMARY KEY "
            f"({', '.join(joined.keys)}), qualified, with the stream, so each record meets at most "
            f"one row"
        )
    return None


def _equates_each_key_once(select: exp.Select, joined: JoinedSource, parts: list[exp.Expr]) -> bool:
    """Every equality names a different key column of the joined table."""
    alias = joined.join.this.alias_or_name.lower()
    named = []
    for part in parts:
        columns = [c for c in part.find_all(exp.Column) if c.table.lower() == alias]
        named += [c.name.lower() for c in columns]
    keys = {k.lower() for k in joined.keys}
    return len(named) == len(parts) and set(named) <= keys and len(set(named)) == len(named)


def _side(select: exp.Select, joined: JoinedSource, node: exp.Expr) -> Side:
    alias = joined.join.this.alias_or_name.lower()
    others = {t.alias_or_name.lower() for t in [from_table(select), *(j.this for j in select.args.get("joins") or [])]}
    others.discard(alias)
    tables = {c.table.lower() for c in node.find_all(exp.Column)}
    mine, theirs = alias in tables, bool(tables & others) or "" in tables
    if mine and theirs:
        return Side.BOTH
    return Side.JOINED if mine else Side.OTHERS if theirs else Side.NONE
