"""The shape of a persistent query: what decides whether an upgrade can reuse its checkpoint,
as a typed value the CREATE OR REPLACE validator (``upgrades/rules.py``) compares version
against version. Clauses are kept as normalised SQL (text that compares equal when only
spelling differs), made once here from the analysed tree.

A shape is recorded with the version of its layout (:data:`SHAPE_VERSION`); shapes an older
streamql recorded are brought to it once, by a catalog migration (:meth:`QueryShape.from_legacy`).
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlglot import exp

from .dialect import DIALECT
from .outputs import from_item
from .statements import Column, Statement, WindowSpec, Within
from .types import SqlType, TypeProblem, parse_type

#: the layout of a recorded shape; 1: the untyped dicts streamql recorded before
SHAPE_VERSION = 2

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


class Writer(enum.Enum):
    """How a query's output is written (a file sink's location cannot change in place)."""

    KAFKA_SINK = "kafka sink"
    FILE_SINK = "file sink"  # Spark's file sink and its _spark_metadata log (outputs from before batch files)
    BATCH_FILES = "batch files"  # whole renamed files per batch (foreachBatch)


@dataclass(frozen=True)
class SinkShape:
    path: str
    format: str
    writer: Writer


@dataclass(frozen=True)
class ShapeColumn:
    name: str
    type: str  # Spark SQL's spelling of the typed type
    key: bool


@dataclass(frozen=True)
class QueryShape:
    """The clauses and settings of one version of a query that an upgrade is judged on."""

    kind: str  # CSAS | CTAS | INSERT
    columns: tuple[ShapeColumn, ...]
    #: output column -> its expression (normalised)
    projections: dict[str, str | None]
    where: str | None
    having: str | None
    group_by: tuple[str | None, ...]
    #: each distinct aggregate (normalised) -> the type it aggregates
    aggregate_types: dict[str | None, str | None]
    joins: tuple[tuple[str, str], ...]  # (join kind, joined source)
    join_on: tuple[str | None, ...]
    window: WindowSpec | None
    #: each JOIN's WITHIN (None: a join without one); () when no join has one
    withins: tuple[Within | None, ...]
    emit: str | None
    subqueries: bool
    #: stream -> what is read of it (None: the whole stream) for a query that reads streams
    #: without joining them (it may gain or lose one in place); None for any other query
    branches: dict[str, str | None] | None
    nondeterministic: tuple[str, ...]
    rest: str | None  # everything else of the SELECT, which no rule covers
    sink: SinkShape
    streams: tuple[str, ...]  # the streams read as streams (not tables joined as of a batch)
    grace: dict[str, float]  # stream -> the grace period its watermark runs with
    named: bool  # its streams are named for Spark's source evolution
    starts: dict[str, str] = field(default_factory=dict)  # stream -> where a new position starts
    version: int = SHAPE_VERSION

    @property
    def aggregates(self) -> tuple[str | None, ...]:
        return tuple(self.aggregate_types)

    @property
    def stateful(self) -> bool:
        return bool(self.aggregates or self.group_by or self.within is not None)

    @property
    def within(self) -> Within | None:
        """The first WITHIN (the one of a query with one join), or None."""
        return next((w for w in self.withins if w is not None), None)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["sink"]["writer"] = self.sink.writer.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueryShape:
        """A shape as recorded; ValueError for a layout other than :data:`SHAPE_VERSION`."""
        if data.get("version") != SHAPE_VERSION:
            raise ValueError(f"a query shape of layout {data.get('version')!r}, not {SHAPE_VERSION}")
        return cls(
            kind=data["kind"],
            columns=tuple(ShapeColumn(*c) if isinstance(c, list) else ShapeColumn(**c) for c in data["columns"]),
            projections=dict(data["projections"]),
            where=data["where"],
            having=data["having"],
            group_by=tuple(data["group_by"]),
            aggregate_types=dict(data["aggregate_types"]),
            joins=tuple((kind, name) for kind, name in data["joins"]),
            join_on=tuple(data["join_on"]),
            window=None if data["window"] is None else WindowSpec(**data["window"]),
            withins=tuple(None if w is None else Within(**w) for w in data["withins"]),
            emit=data["emit"],
            subqueries=bool(data["subqueries"]),
            branches=None if data["branches"] is None else dict(data["branches"]),
            nondeterministic=tuple(data["nondeterministic"]),
            rest=data["rest"],
            sink=SinkShape(data["sink"]["path"], data["sink"]["format"], Writer(data["sink"]["writer"])),
            streams=tuple(data["streams"]),
            grace={k: float(v) for k, v in data["grace"].items()},
            named=bool(data["named"]),
            starts=dict(data.get("starts") or {}),
        )

    @classmethod
    def from_legacy(
        cls, data: dict[str, Any], *, grace: dict[str, float], named: bool, batch_files: bool
    ) -> QueryShape:
        """A shape an older streamql recorded (a dict without a version), in today's layout:
        the grace its plan ran with where it recorded none, the writer of an output written
        as whole files where it said ``file sink`` for them too, branches where it recorded
        none (one stream read whole when there is no join, subquery or window)."""
        within = data.get("within")
        withins = () if within is None else tuple(within) if isinstance(within, list) else (within,)
        sink = dict(data["sink"])
        if batch_files and sink["writer"] == Writer.FILE_SINK.value:
            sink["writer"] = Writer.BATCH_FILES.value
        if "branches" in data:
            branches = data["branches"]
        else:
            plain = not (data["joins"] or data["subqueries"] or data["window"])
            branches = dict.fromkeys(data["streams"]) if plain else None
        aggregate_types = data.get("aggregate_types") or dict.fromkeys(data.get("aggregates") or [])
        return cls.from_json(
            {
                **data,
                "version": SHAPE_VERSION,
                "columns": [[c[0], _spelled(c[1]), c[2]] for c in data["columns"]],
                "aggregate_types": {a: _spelled(t) for a, t in aggregate_types.items()},
                "withins": list(withins),
                "branches": branches,
                "sink": sink,
                "grace": data.get("grace") or grace,
                "named": data.get("named", named),
                "starts": data.get("starts") or {},
            }
        )


def _norm(node: exp.Expr | None) -> str | None:
    """Clause SQL that compares equal when only spelling differs (case, qualifiers)."""
    return None if node is None else node.sql(dialect=DIALECT, normalize=True).lower()


@dataclass(frozen=True)
class SelectShape:
    """What the analysed SELECT alone says of a query's shape (the compile step adds its
    output, sink and streams)."""

    projections: tuple[str | None, ...]  # in SELECT order
    where: str | None
    having: str | None
    group_by: tuple[str | None, ...]
    aggregate_types: dict[str | None, str | None]
    join_on: tuple[str | None, ...]
    subqueries: bool
    branches: dict[str, str | None] | None
    nondeterministic: tuple[str, ...]
    rest: str | None


def select_shape(tree: exp.Select, *, joined: bool, windowed: bool) -> SelectShape:
    """The clauses of the analysed, typed ``tree`` that decide whether an upgrade can reuse
    the state (``joined``: it has JOINs; ``windowed``: a WINDOW clause)."""
    if not joined:  # one source: qualifiers only repeat its name; compare without them
        tree = tree.copy()
        for column in list(tree.find_all(exp.Column)):
            if column.table:
                column.set("table", None)
    # each distinct aggregate once (Spark computes HAVING COUNT(*) with the SELECT's), with the
    # type it aggregates (its result's): a UNION ALL branch may widen an input
    aggregate_types = {_norm(a): _type_of(a) for a in tree.find_all(exp.AggFunc)}
    functions = {f.sql_name().lower() for f in tree.find_all(exp.Func)} | {
        f.name.lower() for f in tree.find_all(exp.Anonymous)
    }
    group = tree.args.get("group")
    branches = merged_streams(tree) if not windowed else None
    rest = tree.copy()
    for clause in ("expressions", "where", "having", "group", "joins", "from", "from_"):
        rest.set(clause, None)
    return SelectShape(
        projections=tuple(_norm(p.unalias()) for p in tree.selects),
        where=_norm(tree.args.get("where")),
        having=_norm(tree.args.get("having")),
        group_by=tuple(_norm(g) for g in group.expressions) if group else (),
        aggregate_types=aggregate_types,
        join_on=tuple(_norm(j.args.get("on")) for j in tree.args.get("joins") or []),
        subqueries=branches is None and any(isinstance(n, (exp.Subquery, exp.CTE)) for n in tree.walk()),
        branches=branches,
        nondeterministic=tuple(sorted(functions & set(NONDETERMINISTIC))),
        rest=_norm(rest),
    )


def query_shape(
    select: SelectShape,
    stmt: Statement,
    *,
    kind: str,
    columns: list[Column],
    joins: list[tuple[str, str]],
    sink: SinkShape,
    streams: list[str],
    grace: dict[str, float],
    named: bool,
    starts: dict[str, str],
    over_tables: bool,
) -> QueryShape:
    """The whole shape of a version: the SELECT's, its output columns (their one spelling and
    typed type), sink, streams and the settings it runs with."""
    withins = stmt.withins if any(w is not None for w in stmt.withins) else ()
    return QueryShape(
        kind=kind,
        columns=tuple(ShapeColumn(c.name, c.type.spark(), c.key) for c in columns),
        projections={c.name: p for c, p in zip(columns, select.projections, strict=False)},
        where=select.where,
        having=select.having,
        group_by=select.group_by,
        aggregate_types=select.aggregate_types,
        joins=tuple(joins),
        join_on=select.join_on,
        window=stmt.window,
        withins=tuple(withins),
        emit=getattr(stmt, "emit", None),
        subqueries=select.subqueries,
        # a query over tables reads changelogs, not streams: none to add or drop
        branches=None if over_tables else select.branches,
        nondeterministic=select.nondeterministic,
        rest=select.rest,
        sink=sink,
        streams=tuple(streams),
        grace=grace,
        named=named,
        starts=starts,
    )


def _type_of(node: exp.Expr) -> str | None:
    """The type sqlglot gives ``node``: its one spelling when it is a column type, else as
    sqlglot writes it."""
    if node.type is None:
        return None
    try:
        return SqlType.from_sqlglot(node.type).spark()
    except TypeProblem:
        return node.type.sql(dialect=DIALECT)


def _spelled(text: str | None) -> str | None:
    """A type an older streamql recorded as text, in today's one spelling (``DECIMAL`` is
    ``DECIMAL(10, 0)``, ``TIMESTAMP_LTZ`` is ``TIMESTAMP``, ``STRUCT<`a`: INT>`` is
    ``STRUCT<a: INT>``); text that is no column type stays as it was."""
    if text is None:
        return None
    try:
        return parse_type(text).spark()
    except TypeProblem:
        return text


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
    source = from_item(select)
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
