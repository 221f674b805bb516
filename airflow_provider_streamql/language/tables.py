"""Queries over TABLE sources: which output columns carry the FROM table's key, and whether a
table-table join matches each row with at most one joined row. Read by the feasibility rules
(what is refused), the planner (the output's key) and the plan (how the runtime writes the
changes). Pure functions of the analysed SELECT: no catalog, no Spark."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from .analyzer import SelectAnalysis
from .outputs import from_item


def from_table(select: exp.Select) -> exp.Expr:
    """The item of the FROM clause."""
    return from_item(select)


def passed_keys(analysis: SelectAnalysis, keys: list[str]) -> dict[str, str]:
    """Each of ``keys`` (columns of the FROM table) -> the output column that passes it
    through unchanged (the column itself, maybe under an alias); keys not selected are left
    out. Output names are ``analysis.columns``' (the SELECT list in order)."""
    select = analysis.named
    if select is None:
        return {}
    alias = from_table(select).alias_or_name.lower()
    passed: dict[str, str] = {}
    for projection, column in zip(select.expressions, analysis.columns, strict=False):
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if not isinstance(inner, exp.Column) or (inner.table and inner.table.lower() != alias):
            continue
        for key in keys:
            if inner.name.lower() == key.lower() and key not in passed:
                passed[key] = column.name
    return passed


def keyed_by(analysis: SelectAnalysis, keys: list[str]) -> SelectAnalysis:
    """``analysis`` with exactly the output columns named in ``keys`` marked as the key."""
    wanted = {k.lower() for k in keys}
    return replace(analysis, columns=[replace(c, key=c.name.lower() in wanted) for c in analysis.columns])


def unmatched_keys(select: exp.Select, join: exp.Join, keys: list[str]) -> list[str]:
    """The key columns of ``join``'s table that its ON condition does not equate with an
    expression of the other sources (``joined.k = f.x``): with every key equated, each row
    of the FROM table matches at most one row of the joined table."""
    alias = join.this.alias_or_name.lower()
    others = {t.alias_or_name.lower() for t in [from_table(select), *(j.this for j in select.args.get("joins") or [])]}
    others.discard(alias)

    def mine(node: exp.Expr) -> str | None:
        """The key column ``node`` is when it is a column of the joined table, else None."""
        if isinstance(node, exp.Column) and node.table.lower() == alias:
            return next((k for k in keys if k.lower() == node.name.lower()), None)
        return None

    def theirs(node: exp.Expr) -> bool:
        columns = list(node.find_all(exp.Column))
        return bool(columns) and all(c.table.lower() in others for c in columns)

    equated = set()
    condition = join.args.get("on")
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    for part in conjuncts:
        if isinstance(part, exp.EQ):
            for side, other in ((part.this, part.expression), (part.expression, part.this)):
                key = mine(side)
                if key is not None and theirs(other):
                    equated.add(key)
    return [k for k in keys if k not in equated]
