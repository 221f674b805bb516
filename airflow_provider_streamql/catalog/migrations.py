"""Forward-only schema migrations. ``migrate`` brings any older catalog to ``LATEST``."""
from __future__ import annotations

import json
from typing import Callable

from sqlalchemy import Connection, Engine, inspect, insert, select, text, update
from sqlalchemy.schema import CreateColumn

from .connections import write_connection

from ..errors import CatalogError
from .schema import (MIGRATION_1_TABLES, MIGRATION_2_TABLES, MIGRATION_3_COLUMNS, MIGRATION_4_TABLES,
                     MIGRATION_5_TABLES, MIGRATION_6_COLUMNS, MIGRATION_7_COLUMNS, schema_version)


def _create(tables) -> Callable[[Connection], None]:
    def run(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)
    return run


def _add_columns(columns) -> Callable[[Connection], None]:
    """ALTER TABLE ... ADD COLUMN for each column a table lacks (a table created by an
    earlier step from today's schema already has them)."""
    def run(conn: Connection) -> None:
        for table, names in columns.items():
            have = {c["name"] for c in inspect(conn).get_columns(table.name)}
            for name in (n for n in names if n not in have):
                column = CreateColumn(table.c[name]).compile(dialect=conn.dialect)
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column}"))
    return run


def _split_properties(conn: Connection) -> None:
    """Typed query records: each query's and version's JSON ``properties`` (settings, the
    plan and the shape in one dict) becomes three columns, then the old column goes."""
    _add_columns(MIGRATION_7_COLUMNS)(conn)
    for table in MIGRATION_7_COLUMNS:
        if "properties" not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            continue  # created by step 1 from today's schema: nothing to split
        keys = [c for c in table.primary_key.columns]
        rows = conn.execute(text(f"SELECT {', '.join(k.name for k in keys)}, properties "
                                 f"FROM {table.name}")).all()
        for row in rows:
            settings = json.loads(row.properties)
            plan, shape = settings.pop("plan", None), settings.pop("shape", None)
            conn.execute(update(table).where(*[k == row._mapping[k.name] for k in keys]).values(
                settings=json.dumps(settings), plan=json.dumps(plan), shape=json.dumps(shape)))
        conn.execute(text(f"ALTER TABLE {table.name} DROP COLUMN properties"))


# version -> step that brings version-1 to version. Append only; never edit a shipped step.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _create(MIGRATION_1_TABLES),
    2: _create(MIGRATION_2_TABLES),
    3: _add_columns(MIGRATION_3_COLUMNS),
    4: _create(MIGRATION_4_TABLES),
    5: _create(MIGRATION_5_TABLES),
    6: _add_columns(MIGRATION_6_COLUMNS),
    7: _split_properties,
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
            raise CatalogError(f"the catalog has schema version {version}, newer than this "
                               f"streamql ({LATEST}); upgrade streamql")
        if version == 0:
            schema_version.create(conn, checkfirst=True)
            conn.execute(insert(schema_version).values(version=0))
        for step in range(version + 1, target + 1):
            MIGRATIONS[step](conn)
            conn.execute(update(schema_version).values(version=step))
            version = step
    return version
