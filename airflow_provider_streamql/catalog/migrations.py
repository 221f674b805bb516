"""Forward-only schema migrations. ``migrate`` brings any older catalog to ``LATEST``."""
from __future__ import annotations

from typing import Callable

from sqlalchemy import Connection, Engine, inspect, insert, select, text, update
from sqlalchemy.schema import CreateColumn

from .connections import write_connection

from ..errors import CatalogError
from .schema import (MIGRATION_1_TABLES, MIGRATION_2_TABLES, MIGRATION_3_COLUMNS, MIGRATION_4_TABLES,
                     MIGRATION_5_TABLES, MIGRATION_6_COLUMNS, schema_version)


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


# version -> step that brings version-1 to version. Append only; never edit a shipped step.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _create(MIGRATION_1_TABLES),
    2: _create(MIGRATION_2_TABLES),
    3: _add_columns(MIGRATION_3_COLUMNS),
    4: _create(MIGRATION_4_TABLES),
    5: _create(MIGRATION_5_TABLES),
    6: _add_columns(MIGRATION_6_COLUMNS),
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
