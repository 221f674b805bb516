"""The shape of a persistent query: the clauses of its SELECT that decide whether an upgrade
can reuse its checkpoint, each as normalised SQL, for the CREATE OR REPLACE validator
(``upgrades/rules.py``) to compare version against version."""

from __future__ import annotations

from sqlglot import exp

from .dialect import DIALECT
from .statements import Column, Statement

NONDETERMINISTIC = (
    "rand",
    "random",
    "randn",
    "uuid",
    "shuffle",
    "current_timestamp",
    "now",
    "current_date",
    "monotonically_increasing_id",
    "spark_partition_id",
)


def _norm(node: exp.Expression | None) -> str | None:
    """Clause SQL that compares equal when only spelling differs (case, qualifiers)."""
    return None if node is None else node.sql(dialect=DIALECT, normalize=True).lower()


def shape_of(
    tree: exp.Select, names: list[str], columns: list[Column], joins: list[tuple[str, str]], stmt: Statement
) -> dict:
    """The clauses of a query that decide whether an upgrade can reuse its state."""
    if not joins:  # one source: qualifiers only repeat its name; compare without them
        tree = tree.copy().transform(
            lambda n: exp.column(n.this.copy()) if isinstance(n, exp.Column) and n.table else n
        )
    # each distinct aggregate once (Spark computes HAVING COUNT(*) with the SELECT's), with the
    # type it aggregates (its result's): a UNION ALL branch may widen an input
    aggregate_types = {_norm(a): _type_of(a) for a in tree.find_all(exp.AggFunc)}
    functions = {f.sql_name().lower() for f in tree.find_all(exp.Func)} | {
        f.name.lower() for f in tree.find_all(exp.Anonymous)
    }
    group = tree.args.get("group")
    branches = merged_streams(tree) if stmt.window is None else None
    rest = tree.copy()
    for clause in ("expressions", "where", "having", "group", "joins", "from", "from_"):
        rest.set(clause, None)
    return {
        "columns": [[c.name, c.type.spark(), c.key] for c in columns],
        "projections": {name: _norm(p.unalias()) for name, p in zip(names, tree.selects, strict=True)},
        "where": _norm(tree.args.get("where")),
        "having": _norm(tree.args.get("having")),
        "group_by": [_norm(g) for g in group.expressions] if group else [],
        "aggregates": list(aggregate_types),
        "aggregate_types": aggregate_types,
        "joins": [list(j) for j in joins],
        "join_on": [_norm(j.args.get("on")) for j in tree.args.get("joins") or []],
        "window": None if stmt.window is None else vars(stmt.window).copy(),
        # one join: its WITHIN (as before several joins were planned); several: one per join
        "within": (
            None
            if stmt.within is None
            else [None if w is None else vars(w).copy() for w in stmt.withins]
            if len(stmt.withins) > 1
            else vars(stmt.within).copy()
        ),
        "emit": getattr(stmt, "emit", None),
        "subqueries": branches is None and any(isinstance(n, (exp.Subquery, exp.CTE)) for n in tree.walk()),
        "branches": branches,
        "nondeterministic": sorted(functions & set(NONDETERMINISTIC)),
        "rest": _norm(rest),
    }


def _type_of(node: exp.Expression) -> str | None:
    return None if node.type is None else node.type.sql(dialect=DIALECT)


#: clauses a UNION ALL branch may not have: it reads one stream, row by row
BRANCH_CLAUSES = ("joins", "group", "having", "qualify", "order", "limit", "offset", "distinct", "laterals", "windows")
#: clauses the UNION ALL itself may not have
UNION_CLAUSES = ("order", "limit", "offset")
#: what makes a branch other than row by row: aggregates, window functions, generators
NOT_ROW_BY_ROW = (exp.AggFunc, exp.Window, exp.UDTF, exp.Lateral)


def merged_streams(select: exp.Select) -> dict[str, str | None] | None:
    """Stream -> what the query reads of it, when it reads streams without joining them: one
    stream in its FROM (``None``: read whole) or a UNION ALL subquery whose branches each read
    one stream, row by row (the branch's SQL). Such a query may gain or lose a stream in
    place; None for any other FROM."""
    if select.args.get("joins"):
        return None
    source = (select.args.get("from_") or select.args.get("from")).this
    nested = [n for n in select.walk() if isinstance(n, (exp.Subquery, exp.CTE))]
    if isinstance(source, exp.Table):
        return None if nested else {source.name.upper(): None}  # a CTE's name is no stream
    if nested != [source]:
        return None  # a CTE, or a subquery outside the FROM (or inside a branch)
    branches: dict[str, str | None] = {}
    pending = [source.this]
    while pending:
        node = pending.pop(0)
        if isinstance(node, exp.Union) and not node.args.get("distinct"):
            if any(node.args.get(c) for c in UNION_CLAUSES):
                return None
            pending[:0] = [node.this, node.expression]
            continue
        if not isinstance(node, exp.Select) or any(node.args.get(c) for c in BRANCH_CLAUSES):
            return None
        if node.find(*NOT_ROW_BY_ROW) is not None:
            return None
        clause = node.args.get("from_") or node.args.get("from")
        table = clause.this if clause is not None else None
        if not isinstance(table, exp.Table) or table.name.upper() in branches:
            return None
        branches[table.name.upper()] = _norm(node)
    return branches
