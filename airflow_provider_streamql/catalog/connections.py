"""Connections to the catalog database, and how writers are serialised on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, event, text

PG_WRITE_LOCK = 0x5157_4C01  # pg_advisory_xact_lock key serialising catalog writers


@contextmanager
def write_connection(engine: Engine, *, exclusive: bool = False) -> Iterator[Connection]:
    """A read-write transaction. ``exclusive`` serialises it against every other exclusive
    writer (statement scripts, migrations), so validation sees the state it applies to."""
    with engine.connect() as conn:
        conn.info["write"] = True  # SQLite: BEGIN IMMEDIATE (see below)
        with conn.begin():
            if exclusive and engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_WRITE_LOCK})
            yield conn


def serialise_sqlite(engine: Engine) -> None:
    """SQLite: WAL so readers never wait, and writers start with BEGIN IMMEDIATE so they
    queue on busy_timeout instead of failing when two upgrade a read lock at once."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")
