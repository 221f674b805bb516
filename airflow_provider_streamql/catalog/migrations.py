"""Forward-only schema migrations. ``migrate`` brings any older catalog to ``LATEST``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import (
    Connection,
    Engine,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.schema import CreateColumn

from ..errors import CatalogError, StreamQLError, first_line
from ..language import parse_one
from ..language.compiler import analyze_query, compile_query
from ..language.query_shape import QueryShape
from ..language.statements import CreateAsSelect, InsertSelect
from ..language.streaming import StreamingPlan
from .connections import write_connection
from .model import BATCH_FILES, SourceInfo
from .schema import (
    MIGRATION_1_TABLES,
    MIGRATION_2_TABLES,
    MIGRATION_3_COLUMNS,
    MIGRATION_4_TABLES,
    MIGRATION_5_TABLES,
    MIGRATION_6_COLUMNS,
    MIGRATION_7_COLUMNS,
    MIGRATION_8_COLUMNS,
    MIGRATION_9_TABLES,
    MIGRATION_10_TABLES,
    MIGRATION_13_COLUMNS,
    MIGRATION_14_COLUMNS,
    MIGRATION_15_TABLES,
    MIGRATION_16_COLUMNS,
    queries,
    query_versions,
    schema_version,
    sources,
)
from .spellings import one_spelling


def _create(tables) -> Callable[[Connection], None]:
    def run(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)

    return run


def _add_columns(columns, fill: dict[str, str] | None = None) -> Callable[[Connection], None]:
    """ALTER TABLE ... ADD COLUMN for each column a table lacks (a table created by an
    earlier step from today's schema already has them). ``fill``: the SQL value existing
    rows take in a NOT NULL column (its default only while it is added, on PostgreSQL;
    SQLite cannot drop a default, and streamql always writes the column)."""

    def run(conn: Connection) -> None:
        for table, names in columns.items():
            have = {c["name"] for c in inspect(conn).get_columns(table.name)}
            for name in (n for n in names if n not in have):
                column = CreateColumn(table.c[name]).compile(dialect=conn.dialect)
                default = f" DEFAULT {fill[name]}" if fill and name in fill else ""
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column}{default}"))
                if default and conn.dialect.name == "postgresql":
                    conn.execute(text(f"ALTER TABLE {table.name} ALTER COLUMN {name} DROP DEFAULT"))

    return run


def _split_properties(conn: Connection) -> None:
    """Typed query records: each query's and version's JSON ``properties`` (settings, the
    plan and the shape in one dict) becomes three columns, then the old column goes."""
    _add_columns(MIGRATION_7_COLUMNS)(conn)
    for table in MIGRATION_7_COLUMNS:
        if "properties" not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            continue  # created by step 1 from today's schema: nothing to split
        keys = [c for c in table.primary_key.columns]
        rows = conn.execute(text(f"SELECT {', '.join(k.name for k in keys)}, properties FROM {table.name}")).all()
        for row in rows:
            settings = json.loads(row.properties)
            plan, shape = settings.pop("plan", None), settings.pop("shape", None)
            conn.execute(
                update(table)
                .where(*[k == row._mapping[k.name] for k in keys])
                .values(settings=json.dumps(settings), plan=json.dumps(plan), shape=json.dumps(shape))
            )
        conn.execute(text(f"ALTER TABLE {table.name} DROP COLUMN properties"))


def _complete_old_catalog(conn: Connection) -> None:
    """A catalog made before 93bb459 gets the columns steps 1 and 2 gained after they
    shipped; its queries, recorded before streamql stored plans (1a5d546) or shapes
    (93bb459), are planned as the planner plans them now; its versions, recorded with their
    statement only, take their query's definition (the only version such a catalog held)."""
    _add_columns(
        MIGRATION_8_COLUMNS,
        fill={
            "select_sql": "''",
            "sources": "''",
            "sink_columns": "''",
            "late_rows": "0",
            "state_rows": "0",
            "state_bytes": "0",
            "state_operators": "'[]'",
        },
    )(conn)
    unplanned = conn.execute(
        select(queries.c.id, queries.c.kind, queries.c.sink, queries.c.sql).where(
            or_(*[c.is_(None) | (c == "null") for c in (queries.c.plan, queries.c.shape)])
        )
    ).all()
    known = {r.name: SourceInfo.from_row(r) for r in conn.execute(select(sources))} if unplanned else {}
    for query in unplanned:
        try:
            select_sql, plan, shape = _plan(query, known)
        except (StreamQLError, KeyError) as e:
            raise CatalogError(
                f"query {query.id} was recorded by an older streamql without a plan, "
                f"and its statement does not plan now ({first_line(e)}); open the "
                f"catalog with the older streamql and drop or replace it"
            ) from None
        conn.execute(
            update(queries)
            .where(queries.c.id == query.id)
            .values(select_sql=select_sql, plan=json.dumps(plan), shape=json.dumps(shape))
        )
    v = query_versions
    of_query = lambda column: func.coalesce(  # noqa: E731
        select(column).where(queries.c.id == v.c.query_id).scalar_subquery(), v.c[column.name]
    )
    conn.execute(update(v).where(v.c.select_sql == "").values(select_sql=of_query(queries.c.select_sql)))
    conn.execute(update(v).where(v.c.sources == "").values(sources=of_query(queries.c.sources)))
    sink_columns = (
        select(sources.c.columns)
        .where(sources.c.name == queries.c.sink, queries.c.id == v.c.query_id)
        .scalar_subquery()
    )
    conn.execute(update(v).where(v.c.sink_columns == "").values(sink_columns=func.coalesce(sink_columns, "[]")))
    for name in ("settings", "plan", "shape"):
        conn.execute(
            update(v).where(v.c[name].is_(None) | (v.c[name] == "null")).values({name: of_query(queries.c[name])})
        )


def _plan(query, known: dict[str, SourceInfo]) -> tuple[str, dict, dict]:
    """(select_sql, plan, shape) of a recorded query, compiled by the one compile step, as it
    ran then: the grace period of its time where it states none (0: the default until 24 hours
    became it, long after plans were stored), its streams unnamed, and each output written
    under the SELECT's own spelling (so step 11 sees what its files hold)."""
    stmt = parse_one(query.sql)
    if not isinstance(stmt, (CreateAsSelect, InsertSelect)):
        raise CatalogError(f"query {query.id} was recorded with a statement that makes no query: {query.sql[:80]!r}")
    schemas = {n: s.schema for n, s in known.items()}
    analysis = analyze_query(stmt, schemas)
    if analysis.named is not None:  # as the runtime of its time wrote them: as the SELECT spells them
        written = [p.alias_or_name for p in analysis.named.expressions]
        analysis = analysis.respelled([replace(c, name=w) for c, w in zip(analysis.columns, written, strict=False)])
    compiled = compile_query(
        stmt,
        analysis,
        schemas,
        known[query.sink].as_sink,
        query_id=query.id,
        kind=query.kind,
        named=False,
        default_grace=0.0,
    )
    return compiled.plan.spark_sql, compiled.plan.to_dict(), compiled.shape.to_json()


def _typed_shapes(conn: Connection) -> None:
    """Every recorded shape in the typed layout (:class:`QueryShape`): a shape an older
    streamql recorded as a plain dict is brought on with what its version ran with (see
    :meth:`QueryShape.from_legacy`), so the validator compares typed values only."""
    outputs = {r.name: json.loads(r.properties) for r in conn.execute(select(sources.c.name, sources.c.properties))}
    sinks = {r.id: r.sink for r in conn.execute(select(queries.c.id, queries.c.sink))}
    for table, keys in (
        (queries, (queries.c.id,)),
        (query_versions, (query_versions.c.query_id, query_versions.c.version)),
    ):
        for row in conn.execute(select(*keys, table.c.plan, table.c.shape)).all():
            shape = json.loads(row.shape or "null")
            if not shape or "version" in shape:
                continue
            plan = StreamingPlan.from_dict(json.loads(row.plan))
            batch_files = outputs.get(sinks.get(row[0], ""), {}).get(BATCH_FILES) is True
            typed = QueryShape.from_legacy(
                shape, grace=plan.grace_by_source(), named=bool(plan.source_names), batch_files=batch_files
            )
            where = [k == row._mapping[k.name] for k in keys]
            conn.execute(update(table).where(*where).values(shape=json.dumps(typed.to_json())))


# version -> step that brings version-1 to version. Append only; never edit a shipped step.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _create(MIGRATION_1_TABLES),
    2: _create(MIGRATION_2_TABLES),
    3: _add_columns(MIGRATION_3_COLUMNS),
    4: _create(MIGRATION_4_TABLES),
    5: _create(MIGRATION_5_TABLES),
    6: _add_columns(MIGRATION_6_COLUMNS),
    7: _split_properties,
    8: _complete_old_catalog,
    9: _create(MIGRATION_9_TABLES),
    10: _create(MIGRATION_10_TABLES),
    11: one_spelling,
    12: _typed_shapes,
    13: _add_columns(MIGRATION_13_COLUMNS),
    14: _add_columns(MIGRATION_14_COLUMNS),  # a failing query's retries
    15: _create(MIGRATION_15_TABLES),  # deploys and what each changed (whole-deploy rollback)
    16: _add_columns(MIGRATION_16_COLUMNS, {"violations": "0", "violations_total": "0"}),  # expectations' counts
}
LATEST = max(MIGRATIONS)


def current_version(conn: Connection) -> int:
    """The schema version of the catalog behind ``conn`` (0 for an empty database)."""
    if not inspect(conn).has_table(schema_version.name):
        return 0
    return conn.execute(select(schema_version.c.version)).scalar() or 0


def migrate(engine: Engine, target: int = LATEST) -> int:
    """Apply every migration above the catalog's version up to ``target``; return the version."""
    with write_connection(engine, exclusive=True) as conn:
        version = current_version(conn)
        if version > LATEST:
            raise CatalogError(
                f"the catalog has schema version {version}, newer than this streamql ({LATEST}); upgrade streamql"
            )
        if version == 0:
            schema_version.create(conn, checkfirst=True)
            conn.execute(insert(schema_version).values(version=0))
        for step in range(version + 1, target + 1):
            MIGRATIONS[step](conn)
            conn.execute(update(schema_version).values(version=step))
            version = step
    return version
