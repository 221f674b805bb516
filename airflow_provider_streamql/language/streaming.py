"""From an analysed persistent query to what Spark runs: the Spark SQL over per-query temp
views, with ksqlDB's WINDOW and WITHIN clauses turned into Spark's window functions, time
bounded join conditions and watermarks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sqlglot import exp

from ..errors import ValidationError
from .analyzer import WINDOW_BOUNDS, SelectAnalysis
from .dialect import DIALECT
from .outputs import from_item, output_projections
from .pseudocolumns import EVENT_TIME, EventTime, TextTime
from .statements import Column, Statement

# WINDOW kind -> (Spark function building the window column, the spec's durations it takes)
WINDOW_FUNCTIONS = {
    "TUMBLING": ("window", ("size",)),
    "HOPPING": ("window", ("size", "advance")),
    "SESSION": ("session_window", ("size",)),
}
#: the output column an aggregation's HAVING becomes (see :func:`_having_as_column`)
HAVING_COLUMN = "__streamql_having"
#: the grace period of a WINDOW or a stream-stream JOIN ... WITHIN without GRACE PERIOD:
#: ksqlDB's default, 24 hours (a version keeps the watermark its stored plan was compiled with)
DEFAULT_GRACE_SECONDS = 24 * 60 * 60.0


@dataclass(frozen=True)
class StreamingPlan:
    """Everything the runtime needs to build a query besides the catalog's sources."""

    spark_sql: str
    views: dict[str, str]  # source name -> temp view the SQL reads
    output_mode: str  # append | update
    watermarks: dict[str, list[Any]] = field(default_factory=dict)  # source -> [column, seconds]
    static_tables: list[str] = field(default_factory=list)  # read as of each micro-batch
    #: a query over tables (its FROM source is a TABLE): "changes" (each changed key of the
    #: table filtered and projected on its own) or "recompute" (aggregations and joins: from
    #: the tables' snapshots); "" for a query over a stream
    table_query: str = ""
    #: with ``table_query`` "changes": the FROM table's key columns -> the output's columns
    table_keys: dict[str, str] = field(default_factory=dict)
    #: an aggregation's HAVING as this extra boolean output column (update mode): a group an
    #: update makes fail it is deleted from the table, as ksqlDB's tombstone does, instead of
    #: keeping the row it had while it passed; "" when the SQL filters (plans from before)
    having_column: str = ""
    #: stream -> the name Spark knows its streaming source by (``DataStreamReader.name``),
    #: fixed at the query's first version: a checkpoint written with named sources lets a
    #: later version add or drop a stream (Spark's source evolution). Empty for queries
    #: created before streams were named, and for queries over tables (changelogs)
    source_names: dict[str, str] = field(default_factory=dict)

    def grace_by_source(self) -> dict[str, float]:
        """Source -> the grace period its watermark runs with, seconds (the effective one: a
        statement without GRACE PERIOD has the default of when its version was planned)."""
        return {source: seconds for source, (_column, seconds) in self.watermarks.items()}

    def with_table_query(self, table_query: str, table_keys: dict[str, str]) -> StreamingPlan:
        """This plan for a query over tables (see :attr:`table_query`)."""
        return replace(self, table_query=table_query, table_keys=dict(table_keys))

    def with_source_names(self, names: dict[str, str]) -> StreamingPlan:
        """This plan with its streams named (see :attr:`source_names`)."""
        return replace(self, source_names=dict(names))

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
    timestamps: dict[str, EventTime],
    tables: set[str],
    schemas: dict[str, list[Column]],
    over_tables: bool = False,
    default_grace: float | None = None,
) -> StreamingPlan:
    """Rewrite ``select`` for Spark. ``timestamps`` maps each source to its event-time column,
    ``tables`` names the sources that are TABLEs (joined as of each micro-batch), ``over_tables``
    says the FROM source is a TABLE (the query reads changelogs), ``schemas`` the sources'
    columns now: ``*`` is expanded, so a version keeps its column list when a source later
    gains columns (as in ksqlDB). ``default_grace``: the grace period of a WINDOW or WITHIN
    without one (None: :data:`DEFAULT_GRACE_SECONDS`)."""
    tree = select.copy()
    _expand_stars(tree, schemas)
    _name_outputs(tree, analysis)
    views = {name: f"sq_{query_id}_{name}".lower() for name in analysis.sources}
    for table in tree.find_all(exp.Table):
        name = table.name.upper()
        if name in views:
            if not table.alias:
                table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
            table.set("this", exp.to_identifier(views[name]))
    watermarks: dict[str, list[Any]] = {}
    joins = tree.args.get("joins") or []
    first = from_item(tree)
    if stmt.window is not None:
        source = analysis.sources[0]
        ts = _event_time(timestamps, source)
        # over a join the window is on the FROM stream's event time (the feasibility rules
        # accept it only where that is the join's time, as in ksqlDB)
        time = exp.column(ts, table=first.alias_or_name if joins else None, quoted=True)
        function, durations = WINDOW_FUNCTIONS[stmt.window.kind]
        arguments = [_interval(getattr(stmt.window, d)) for d in durations]
        _bind_window_bounds(tree, exp.Anonymous(this=function, expressions=[time, *arguments]))
        watermarks[source] = [ts, _grace(stmt.window.grace, default_grace)]
    for (_kind, joined), join, within in zip(analysis.joins, joins, stmt.withins, strict=False):
        if within is None:
            continue
        left_ts = _time_column(first, _event_time(timestamps, analysis.sources[0]))
        right_ts = _time_column(join.this, _event_time(timestamps, joined))
        earliest = exp.Sub(this=left_ts.copy(), expression=_bound_interval(within.before))
        latest = exp.Add(this=left_ts.copy(), expression=_bound_interval(within.after))
        bound = exp.and_(
            exp.GTE(this=right_ts.copy(), expression=earliest), exp.LTE(this=right_ts.copy(), expression=latest)
        )
        join.set("on", exp.and_(join.args["on"], bound))
        for name in (analysis.sources[0], joined):
            grace = _grace(within.grace, default_grace)
            if name in watermarks:  # a stream in two stateful operators: the longer grace
                grace = max(watermarks[name][1], grace)
            watermarks[name] = [_event_time(timestamps, name), grace]
    if kind == "CTAS":
        mode = "append" if stmt.window is not None and getattr(stmt, "emit", None) == "FINAL" else "update"
    else:
        mode = "append"
    static = [name for name in analysis.sources if name in tables]
    # over a stream, Spark emits only the groups a batch changed: the writer must see those
    # that fail HAVING to delete them (a query over tables recomputes, so it sees them anyway)
    having = mode == "update" and tree.args.get("having") is not None and not over_tables
    if having:
        _having_as_column(tree, {c.name.upper() for cols in schemas.values() for c in cols})
    return StreamingPlan(
        tree.sql(dialect=DIALECT), views, mode, watermarks, static, having_column=HAVING_COLUMN if having else ""
    )


def _having_as_column(tree: exp.Select, source_columns: set[str]) -> None:
    """``HAVING c`` -> an output column ``COALESCE(c, FALSE) AS HAVING_COLUMN``. A name HAVING
    reads outside an aggregate is, as Spark resolves it, a source column (a grouping one) if
    there is one, else an output of the SELECT list, which becomes the expression it names.
    Spark keeps the same aggregate functions in state (the HAVING-only ones it added anyway),
    so a checkpoint of the filtering plan restarts under this one."""
    condition = tree.args["having"].this.copy()
    named = {p.alias.upper(): p.this for p in tree.expressions if isinstance(p, exp.Alias)}
    for column in list(condition.find_all(exp.Column)):
        name = column.name.upper()
        if column.table or name not in named or name in source_columns or column.find_ancestor(exp.AggFunc):
            continue
        column.replace(named[name].copy())
    tree.set("having", None)
    tree.append("expressions", exp.alias_(exp.func("COALESCE", condition, exp.false()), HAVING_COLUMN))


def _name_outputs(tree: exp.Select, analysis: SelectAnalysis) -> None:
    """Every projection under its output column's one spelling (``analysis.columns``), as an
    explicit quoted alias: Spark names an unaliased column as the SELECT spells it, so
    ``SELECT id`` over a column ``ID`` would be written as ``id`` and read back as NULL."""
    outputs = [c.name for c in analysis.columns][: len(tree.expressions)]
    if len(outputs) != len(tree.expressions):
        raise ValidationError(
            "SELECT * over a CTE: name the columns the query outputs (its output names must be known before it runs)"
        )
    tree.set("expressions", [_named(p, name) for p, name in zip(tree.expressions, outputs, strict=True)])


def _named(projection: exp.Expr, name: str) -> exp.Expr:
    """``projection`` aliased ``name`` (quoted); a column spelled ``name`` already keeps it."""
    if isinstance(projection, exp.Column) and projection.name == name:
        return projection
    return exp.alias_(projection.unalias() if isinstance(projection, exp.Alias) else projection, name, quoted=True)


def _expand_stars(tree: exp.Select, schemas: dict[str, list[Column]]) -> None:
    """The SELECT list under its output names (:func:`output_projections`: ``*`` expanded,
    over a subquery to its outputs; made-up names as aliases). A ``*`` it leaves as written
    is expanded from the tables inside."""
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


def _bind_window_bounds(tree: exp.Select, window: exp.Expr) -> None:
    """WINDOWSTART/WINDOWEND -> the window column's start/end; group by the window."""
    bound = {b: exp.Dot(this=window.copy(), expression=exp.to_identifier(b[6:].lower())) for b in WINDOW_BOUNDS}
    for i, projection in enumerate(tree.expressions):
        if isinstance(projection, exp.Column) and projection.name.upper() in WINDOW_BOUNDS:
            tree.expressions[i] = exp.alias_(bound[projection.name.upper()].copy(), projection.name)
    having = tree.args.get("having")
    for column in list(tree.find_all(exp.Column)):
        # HAVING reads the output columns: Spark cannot resolve window(ts, ...) there
        in_having = having is not None and column.find_ancestor(exp.Having) is having
        if column.name.upper() in WINDOW_BOUNDS and not in_having:
            column.replace(bound[column.name.upper()].copy())
    outputs = {p.alias_or_name.upper() for p in tree.expressions}
    for name in WINDOW_BOUNDS:  # a windowed table is keyed by both (language/analyzer.py)
        if name not in outputs:
            tree.append("expressions", exp.alias_(bound[name].copy(), name))
    group = tree.args.get("group") or exp.Group(expressions=[])
    group.append("expressions", window.copy())
    tree.set("group", group)


def duration_sql(seconds: float) -> str:
    """``24 HOURS``, ``1 HOUR``, ``60 SECONDS``: whole hours in hours, anything else in seconds."""
    if seconds and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return f"{hours} HOUR{'S' if hours != 1 else ''}"
    return f"{seconds:.15g} SECONDS"


def _grace(seconds: float | None, default: float | None) -> float:
    """A stated grace period, else ``default``, else ksqlDB's default."""
    if seconds is not None:
        return seconds
    return DEFAULT_GRACE_SECONDS if default is None else default


def _interval(seconds: float) -> exp.Literal:
    """A window's duration as Spark's window functions take it: ``'<ms> milliseconds'``."""
    return exp.Literal.string(f"{int(round(seconds * 1000))} milliseconds")


def _bound_interval(seconds: float) -> exp.Interval:
    """``INTERVAL '<ms>' MILLISECONDS``: a join's time bound."""
    return exp.Interval(this=exp.Literal.string(str(int(round(seconds * 1000)))), unit=exp.var("MILLISECONDS"))


def _event_time(timestamps: dict[str, EventTime], source: str) -> str:
    """``source``'s event-time column in the plan: its TIMESTAMP column, or the column the
    runtime parses a text one into (the feasibility rules refuse a WINDOW or WITHIN over a
    stream without one before a plan is made)."""
    column = timestamps.get(source)
    if column is None:
        raise ValidationError(f"{source} has no timestamp column: declare WITH (timestamp='<column>')")
    return EVENT_TIME if isinstance(column, TextTime) else column


def _time_column(table: exp.Expr, column: str) -> exp.Column:
    """The event-time ``column`` of a source of the FROM clause, qualified by its alias."""
    return exp.column(column, table=table.alias_or_name, quoted=True)
