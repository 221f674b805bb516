"""From an analysed persistent query to what Spark runs: the Spark SQL over per-query temp
views, with ksqlDB's WINDOW and WITHIN clauses turned into Spark's window functions, time
bounded join conditions and watermarks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from .analyzer import WINDOW_BOUNDS, SelectAnalysis
from .dialect import DIALECT
from .outputs import output_projections
from .statements import Column, Statement

# WINDOW kind -> Spark SQL function building the window column from (time column, spec)
WINDOW_FUNCTIONS = {
    "TUMBLING": lambda ts, w: f"window({ts}, {_interval(w.size)})",
    "HOPPING": lambda ts, w: f"window({ts}, {_interval(w.size)}, {_interval(w.advance)})",
    "SESSION": lambda ts, w: f"session_window({ts}, {_interval(w.size)})",
}
DEFAULT_GRACE_SECONDS = 0.0


@dataclass
class StreamingPlan:
    """Everything the runtime needs to build a query besides the catalog's sources."""

    spark_sql: str
    views: dict[str, str]  # source name -> temp view the SQL reads
    output_mode: str  # append | update
    watermarks: dict[str, list[Any]] = field(default_factory=dict)  # source -> [column, seconds]
    static_tables: list[str] = field(default_factory=list)  # read as of each micro-batch

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamingPlan:
        return cls(**data)


def plan_streaming(
    select: exp.Select,
    stmt: Statement,
    analysis: SelectAnalysis,
    query_id: str,
    *,
    kind: str,
    timestamps: dict[str, str | None],
    tables: set[str],
    schemas: dict[str, list[Column]],
) -> StreamingPlan:
    """Rewrite ``select`` for Spark. ``timestamps`` maps each source to its event-time column,
    ``tables`` names the sources that are TABLEs (joined as of each micro-batch), ``schemas``
    the sources' columns now: ``*`` is expanded, so a version keeps its column list when a
    source later gains columns (as in ksqlDB)."""
    tree = select.copy()
    _expand_stars(tree, schemas)
    views = {name: f"sq_{query_id}_{name}".lower() for name in analysis.sources}
    for table in tree.find_all(exp.Table):
        name = table.name.upper()
        if name in views:
            if not table.alias:
                table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
            table.set("this", exp.to_identifier(views[name]))
    watermarks: dict[str, list[Any]] = {}
    if stmt.window is not None:
        source = analysis.sources[0]
        ts = timestamps[source]
        window_sql = WINDOW_FUNCTIONS[stmt.window.kind](_quote(ts), stmt.window)
        _bind_window_bounds(tree, window_sql)
        watermarks[source] = [ts, _grace(stmt.window.grace)]
    if stmt.within is not None:
        join = tree.args["joins"][0]
        left, right = (tree.args.get("from_") or tree.args.get("from")).this, join.this
        left_ts = f"{_quote(left.alias_or_name)}.{_quote(timestamps[analysis.sources[0]])}"
        right_ts = f"{_quote(right.alias_or_name)}.{_quote(timestamps[analysis.joins[0][1]])}"
        bound = sqlglot.parse_one(
            f"{right_ts} >= {left_ts} - {_interval_literal(stmt.within.before)} AND "
            f"{right_ts} <= {left_ts} + {_interval_literal(stmt.within.after)}",
            dialect=DIALECT,
        )
        join.set("on", exp.and_(join.args["on"], bound))
        for name in analysis.sources:
            watermarks[name] = [timestamps[name], _grace(stmt.within.grace)]
    if kind == "CTAS":
        mode = "append" if stmt.window is not None and getattr(stmt, "emit", None) == "FINAL" else "update"
    else:
        mode = "append"
    static = [name for name in analysis.sources if name in tables]
    return StreamingPlan(tree.sql(dialect=DIALECT), views, mode, watermarks, static)


def _expand_stars(tree: exp.Select, schemas: dict[str, list[Column]]) -> None:
    """The SELECT list under its output names (:func:`output_projections`: ``*`` expanded,
    made-up names as aliases). A ``*`` over a subquery is expanded from the tables inside."""
    tree.set("expressions", output_projections(tree, schemas))
    tables = [t for t in tree.find_all(exp.Table) if t.name.upper() in schemas]
    projections = []
    for projection in tree.expressions:
        if isinstance(projection, exp.Star):
            chosen = tables
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            chosen = [t for t in tables if t.alias_or_name.lower() == projection.table.lower()]
        else:
            projections.append(projection)
            continue
        qualify = len(tables) > 1
        projections += [
            exp.column(c.name, table=t.alias_or_name if qualify else None, quoted=True)
            for t in chosen
            for c in schemas[t.name.upper()]
        ]
    tree.set("expressions", projections)


def _bind_window_bounds(tree: exp.Select, window_sql: str) -> None:
    """WINDOWSTART/WINDOWEND -> the window column's start/end; group by the window."""
    window = sqlglot.parse_one(window_sql, dialect=DIALECT)
    bound = {b: exp.Dot(this=window.copy(), expression=exp.to_identifier(b[6:].lower())) for b in WINDOW_BOUNDS}
    projected = set()
    for i, projection in enumerate(tree.expressions):
        if isinstance(projection, exp.Column) and projection.name.upper() in WINDOW_BOUNDS:
            projected.add(projection.name.upper())
            tree.expressions[i] = exp.alias_(bound[projection.name.upper()].copy(), projection.name)
    for column in list(tree.find_all(exp.Column)):
        if column.name.upper() in WINDOW_BOUNDS:
            projected.add(column.name.upper())
            column.replace(bound[column.name.upper()].copy())
    for name in WINDOW_BOUNDS:
        if name not in projected:
            tree.append("expressions", exp.alias_(bound[name].copy(), name))
    group = tree.args.get("group") or exp.Group(expressions=[])
    group.append("expressions", window.copy())
    tree.set("group", group)


def _grace(seconds: float | None) -> float:
    return DEFAULT_GRACE_SECONDS if seconds is None else seconds


def _interval(seconds: float) -> str:
    return f"'{int(round(seconds * 1000))} milliseconds'"


def _interval_literal(seconds: float) -> str:
    return f"INTERVAL {int(round(seconds * 1000))} MILLISECONDS"


def _quote(name: str) -> str:
    return f"`{name}`"
