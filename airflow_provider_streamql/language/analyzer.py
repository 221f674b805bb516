"""SELECT analysis: which sources a query reads, what it outputs, and the errors that stop it
(unknown names, clauses a streaming query cannot run, type errors: see :mod:`.typecheck`).

Works on sqlglot's qualified, type-annotated tree; never needs Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from ..errors import ValidationError
from . import duckdb_calls, functions
from .dialect import DIALECT
from .names import reserved_name_problem
from .outputs import check_quoted, joined_tables, output_names, output_projections
from .pseudocolumns import EventTime, resolve_pseudo_columns
from .statements import Column, Statement
from .typecheck import LOOSE, as_written, check_types
from .types import SqlType, TypeName, TypeProblem

# Clauses a persistent streaming query cannot have, and why.
UNSUPPORTED_IN_PERSISTENT = (
    ("order", "ORDER BY is not supported in a persistent query (a stream has no end to sort)"),
    ("limit", "LIMIT is not supported in a persistent query; use it in a pull query"),
    ("distinct", "SELECT DISTINCT is not supported in a persistent query; use GROUP BY"),
)


@dataclass
class SelectAnalysis:
    """What a SELECT reads and produces."""

    sources: list[str]
    columns: list[Column]
    aggregate: bool
    group_by: list[str]
    #: (join kind, upper-case name of the joined source) for each JOIN, in order.
    joins: list[tuple[str, str]] = field(default_factory=list)
    #: the SELECT as analysed: its list as :func:`output_projections` names it
    named: exp.Select | None = None
    #: the same, qualified and typed by sqlglot (what the upgrade validator's shape is made of)
    typed: exp.Select | None = None

    def respelled(self, spellings: list[Column]) -> SelectAnalysis:
        """This analysis with each output column that ``spellings`` names in another letter
        case taking that spelling: what an existing output (a replaced query's sink, an
        INSERT INTO target) records is the one spelling its readers read."""
        spelled = {c.name.lower(): c.name for c in spellings}

        def name(given: str) -> str:
            return spelled.get(given.lower(), given)

        columns = [replace(c, name=name(c.name)) for c in self.columns]
        return replace(self, columns=columns, group_by=[name(g) for g in self.group_by])


WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")
TIMESTAMP = SqlType.of(TypeName.TIMESTAMP)


def analyze_select(
    select: exp.Select,
    schemas: dict[str, list[Column]],
    stmt: Statement,
    *,
    persistent: bool,
    timestamps: dict[str, EventTime] | None = None,
) -> SelectAnalysis:
    """Check ``select`` against ``schemas`` (upper-case source name -> columns).

    With ``timestamps`` (source -> its event-time column), ksqlDB's ROWTIME and ROWKEY are
    first resolved (see :mod:`.pseudocolumns`), in a copy: the statement's own tree is never
    changed, and the streaming plan is built from the analysis's ``named`` SELECT.

    Raises :class:`ValidationError` for unknown sources or columns, type errors, unnamed
    expressions and clauses a streaming query cannot run.
    """
    where = _Locator(stmt)
    select = select.copy()
    for call in select.find_all(exp.Func):
        name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()
        if name in CODE_FUNCTIONS:
            raise where.error(f"{name}() is refused: {CODE_FUNCTIONS[name]}; a statement never runs code", call)
    for union in select.find_all(exp.SetOperation):
        left, right = len(union.this.selects), len(union.expression.selects)
        if left != right:
            raise where.error(
                f"the branches of a UNION ALL select {left} and {right} columns: each branch selects "
                f"the same columns, in the same order",
                union,
            )
        if persistent and (union.args.get("order") or union.args.get("limit")):
            raise where.error("ORDER BY and LIMIT are not allowed in a persistent query (here on a UNION)", union)
        if persistent and isinstance(union, (exp.Intersect, exp.Except)):
            raise where.error(
                f"{union.key.upper()} is not supported on streams (Spark); merge streams with UNION ALL", union
            )
        if persistent and union.args.get("distinct"):
            raise where.error(
                "UNION without ALL drops duplicates, which a stream can only do with state that never ends "
                "(Spark refuses it): merge streams with UNION ALL",
                union,
            )
    sources = []
    cte_names = {cte.alias_or_name.upper() for cte in select.find_all(exp.CTE)}
    for table in select.find_all(exp.Table):
        name = table.name.upper()
        if table.args.get("db") or table.args.get("catalog"):
            raise where.error(f"{table.sql(dialect=DIALECT)!r} is not a plain SQL name", table)
        if name in cte_names:
            continue
        if name not in schemas:
            raise where.error(f"unknown stream or table {table.name!r}", table)
        if name not in sources:
            sources.append(name)
    if not sources:
        raise where.error("a SELECT needs FROM <stream or table>", select)
    if persistent:
        for arg, message in UNSUPPORTED_IN_PERSISTENT:
            if select.args.get(arg):
                raise where.error(message, select.args[arg])
    if timestamps is not None:
        resolve_pseudo_columns(select, schemas, timestamps, where.error)
    _check_functions(select, where)
    if not persistent and (found := duckdb_calls.problem(select)):  # a pull query runs on DuckDB
        raise where.error(*found)
    # quoted names as the user wrote them (what * expands to below is quoted by streamql)
    bounds = [[Column(b, TIMESTAMP) for b in WINDOW_BOUNDS]] if stmt.window is not None else []
    check_quoted(select, [schemas[s] for s in sources] + bounds, where.error)
    select = select.copy()
    select.set("expressions", output_projections(select, schemas))
    if stmt.window is not None:  # window bounds are columns of the windowed source
        schemas = dict(schemas)
        schemas[sources[0]] = list(schemas[sources[0]]) + [Column(b, TIMESTAMP) for b in WINDOW_BOUNDS]
    else:
        real = {c.name.upper() for name in sources for c in schemas[name]}
        for column in select.find_all(exp.Column):
            if column.name.upper() in WINDOW_BOUNDS and column.name.upper() not in real:
                raise where.error(f"{column.name} is defined only in a query with a WINDOW clause", column)
    for column in select.find_all(exp.Column):
        if reserved := reserved_name_problem(column.name):
            raise where.error(f"no column {column.name!r}: {reserved}", column)
    sql_schema: dict[str, object] = {
        name: {c.name: c.type.to_sqlglot() for c in cols} for name, cols in schemas.items()
    }
    try:
        tree = qualify(select.copy(), schema=sql_schema, dialect=DIALECT)
        tree = annotate_types(tree, schema=sql_schema, dialect=DIALECT)
    except OptimizeError as e:
        node = _node_named(select, str(e))
        if isinstance(node, exp.Column):
            having = [
                t.alias_or_name
                for t in joined_tables(select, schemas) or []
                if node.name.lower() in {c.name.lower() for c in schemas[t.name.upper()]}
            ]
            bare = [c for c in select.find_all(exp.Column) if not c.table and c.name.lower() == node.name.lower()]
            if len(having) > 1 and bare:
                raise where.error(
                    f"column {node.name!r} is ambiguous: more than one joined source has it; "
                    f"qualify it ({' or '.join(f'{t}.{node.name}' for t in having)})",
                    bare[0],
                ) from None
            known = ", ".join(c.name for name in sources for c in schemas[name])
            raise where.error(f"unknown column {node.name!r} (known: {known})", node) from None
        raise where.error(str(e).split(". Line:")[0], node) from None
    check_types(tree, where.error)
    names = output_names(select, tree, schemas)
    group_by = _grouping_keys(tree, names, where, select)
    if persistent and group_by:
        _check_table_projection(tree, names, group_by, where, select)
    aggregate = bool(group_by) or any(isinstance(p, exp.AggFunc) for p in tree.find_all(exp.AggFunc))
    if stmt.window is not None and aggregate:
        group_by += list(WINDOW_BOUNDS)
    columns, seen = [], set()
    for name, projection in zip(names, tree.selects, strict=True):
        if name.lower() in seen:
            raise where.error(f"column {name!r} appears twice in the output", select)
        if reserved := reserved_name_problem(name):
            raise where.error(f"output column {name!r}: {reserved}", select)
        seen.add(name.lower())
        if projection.type is None or projection.type.this in LOOSE:
            raise where.error(_untyped(name, projection), select)
        columns.append(Column(name, _output_type(name, projection, persistent, where, select), key=name in group_by))
    for bound in WINDOW_BOUNDS if stmt.window is not None else ():
        if bound.lower() not in seen:  # a windowed table is keyed by its window too
            columns.append(Column(bound, TIMESTAMP, key=True))
    joins = [
        ((j.args.get("side") or j.args.get("kind") or "INNER").upper(), j.this.name.upper())
        for j in select.args.get("joins") or []
    ]
    return SelectAnalysis(sources, columns, aggregate, group_by, joins, select, tree)


#: Spark functions that run code of the JVM a statement names: never planned, in any query
CODE_FUNCTIONS = {
    "reflect": "it calls a Java method by name",
    "java_method": "it calls a Java method by name",
    "try_reflect": "it calls a Java method by name",
}


def _output_type(name: str, projection: exp.Expr, persistent: bool, where: _Locator, select: exp.Select) -> SqlType:
    """The typed type of output column ``name``. A persistent query's output is written, so
    its type must be one a stream or table can hold; a pull query's value is only shown (a
    type outside the table, such as an INTERVAL, is shown as its text)."""
    try:
        return SqlType.from_sqlglot(projection.type or exp.DataType.build("UNKNOWN"))
    except TypeProblem as e:
        if not persistent:
            return SqlType.of(TypeName.STRING)
        raise where.error(f"output column {name!r}: {e}; CAST it to one", select) from None


def _grouping_keys(tree: exp.Select, names: list[str], where: _Locator, select: exp.Select) -> list[str]:
    """Output names of the grouping expressions: each must be in the SELECT list (they
    become the table's key), as a column or as the same expression under an alias."""
    keys = []
    group = tree.args.get("group")
    for expression in group.expressions if group else []:
        for name, projection in zip(names, tree.selects, strict=True):
            if projection == expression or projection.unalias() == expression:
                keys.append(name)
                break
        else:
            raise where.error(
                f"GROUP BY {as_written(expression)!r} must also be in the SELECT list: "
                f"the grouping expressions are the table's key",
                expression,
            )
    return keys


def _check_table_projection(
    tree: exp.Select, names: list[str], keys: list[str], where: _Locator, select: exp.Select
) -> None:
    """ksqlDB's rules for the projection of a table a query writes: each key column once, and
    at least one value column (a table of keys alone has no row to change)."""
    for key in keys:
        grouped = next(p.unalias() for n, p in zip(names, tree.selects, strict=True) if n == key)
        again = [n for n, p in zip(names, tree.selects, strict=True) if n != key and p.unalias() == grouped]
        if again:
            raise where.error(
                f"the projection holds the key column {key!r} more than once ({key} and {again[0]}), as "
                f"ksqlDB refuses: each key column is in the projection once",
                select,
            )
    if all(name in keys for name in names):
        raise where.error(
            "the projection holds no value columns, as ksqlDB refuses: a table keyed by "
            f"{', '.join(keys)} needs a value, such as COUNT(*) AS n",
            select,
        )


def _check_functions(select: exp.Expr, where: _Locator) -> None:
    """A ksqlDB function call the table of :mod:`.functions` cannot take (refused, wrong
    number of arguments, a value that must be a literal) is an error that says why."""
    for call in select.find_all(exp.Anonymous):
        reason = functions.problem(call.name, call.expressions)
        if reason:
            raise where.error(reason, call)


def _untyped(name: str, projection: exp.Expr) -> str:
    """Why column ``name`` has no type: a ``->`` that reads no field, or the function call
    whose type is unknown, if any."""
    for dot in projection.find_all(exp.Dot):
        base, field = dot.this, dot.expression.name
        if (dot.type is not None and dot.type.this not in LOOSE) or base.type is None or base.type.this in LOOSE:
            continue
        if not base.type.is_type(exp.DataType.Type.STRUCT):
            return f"{base.name}->{field}: {base.name} is {base.type.sql(dialect=DIALECT)}, not a STRUCT"
        fields = ", ".join(f.name for f in base.type.expressions)
        return f"{base.name}->{field}: the STRUCT {base.name} has no field {field!r} (its fields: {fields})"
    calls = [c for c in projection.find_all(exp.Anonymous) if c.type is None or c.type.this in LOOSE]
    if calls:
        call = calls[-1].name
        return (
            f"cannot tell the type of column {name!r}: {call}() is not a Spark or ksqlDB function "
            f"StreamQL knows the result type of; if Spark has it, add a CAST(... AS <type>)"
        )
    return f"cannot tell the type of column {name!r}; add a CAST"


def _node_named(select: exp.Expr, message: str) -> exp.Expr:
    """The column an optimizer message names, to point the error at it."""
    for column in select.find_all(exp.Column):
        if f"'{column.name}'" in message:
            return column
    return select


class _Locator:
    """Turns a node of a statement's SELECT into an error with script line and column."""

    def __init__(self, stmt: Statement):
        self.stmt = stmt

    def error(self, message: str, node: exp.Expr) -> ValidationError:
        meta = _meta(node)
        line, col = self.stmt.select_at
        if meta:
            col = meta["col"] - (meta["end"] - meta["start"]) + (col - 1 if meta["line"] == 1 else 0)
            line = line + meta["line"] - 1
        return ValidationError(message, line=line, col=col, text=as_written(node)[:80])


def _meta(node: exp.Expr) -> dict | None:
    for candidate in node.walk():
        meta = getattr(candidate, "_meta", None) or {}
        if "line" in meta:
            return meta
    return None
