"""Connections to the catalog database, and how writers are serialised on each backend."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from sqlalchemy import Connection, Engine, event, exc, text

PG_WRITE_LOCK = 0x5157_4C01  # pg_advisory_xact_lock key serialising catalog writers
#: PostgreSQL: how long a report's transaction may sit idle before the server ends its session
#: (idle_in_transaction_session_timeout). A report takes milliseconds; a process frozen inside
#: one (a GC pause, SIGSTOP, a paused VM) would otherwise keep its row locks for as long as it
#: is frozen, and every other runtime waiting on them, its leases long expired, could never
#: take its queries over. Statements (exclusive writes) copy and move files inside their
#: transaction, for as long as a checkpoint takes to copy: they are left without a limit.
PG_REPORT_IDLE_LIMIT = "5s"

_sqlite_writers: dict[str, threading.RLock] = {}
_sqlite_writers_lock = threading.Lock()
_pooled: weakref.WeakSet[Engine] = weakref.WeakSet()  # the engines fork_safe() watches


def _after_fork_in_child() -> None:
    # A lock held by another thread at fork time would never be released in the child, and
    # the parent's pooled connections (and the pools' own locks) are the parent's: each
    # pool is replaced by an empty one without closing them (closing a PostgreSQL
    # connection would end the parent's session).
    global _sqlite_writers, _sqlite_writers_lock
    _sqlite_writers, _sqlite_writers_lock = {}, threading.Lock()
    for engine in list(_pooled):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _process_writer(engine: Engine):
    """SQLite: the lock the writers of this process take before BEGIN IMMEDIATE, one per
    database file. SQLite has one writer at a time, and a writer that finds it taken polls
    in sleeps of up to 100 ms (its busy handler); threads of one process (a runtime's
    workers and its progress listener) instead queue on this lock and go as soon as it is
    free. Other processes still wait on busy_timeout."""
    if engine.dialect.name != "sqlite":
        return nullcontext()
    database = engine.url.database or ""
    key = os.path.realpath(database) if database and database != ":memory:" else f"{database}@{id(engine)}"
    with _sqlite_writers_lock:
        return _sqlite_writers.setdefault(key, threading.RLock())


@contextmanager
def reading(engine: Engine, conn: Connection | None) -> Iterator[Connection]:
    """``conn``, to read inside an open transaction, or else a fresh connection of ``engine``."""
    if conn is not None:
        yield conn
    else:
        with engine.connect() as fresh:
            yield fresh


@contextmanager
def write_connection(engine: Engine, *, exclusive: bool = False) -> Iterator[Connection]:
    """A read-write transaction. ``exclusive`` serialises it against every other exclusive
    writer (statement scripts, migrations), so validation sees the state it applies to.

    On SQLite an exclusive write is also synced to disk when it commits; the others (what a
    runtime reports: observed states, progress, leases, bad records; event cursors) are
    written without waiting for the disk, which makes a bulk PAUSE/RESUME ALL several times
    faster. Either kind survives any process crash, and the database stays consistent; on
    a power loss or OS crash the last unsynced reports can be lost, and a runtime reports
    them again when it restarts (an exclusive commit syncs every report before it). On
    PostgreSQL the others may sit idle for :data:`PG_REPORT_IDLE_LIMIT` at most."""
    with _process_writer(engine), engine.connect() as conn:
        # an option of this Connection only: the pooled DBAPI connection's info outlives it
        conn.execution_options(streamql_write="synced" if exclusive else "unsynced")  # see _begin
        with conn.begin():
            if engine.dialect.name == "postgresql":
                if exclusive:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_WRITE_LOCK})
                else:
                    conn.execute(
                        text("SELECT set_config('idle_in_transaction_session_timeout', :v, true)"),
                        {"v": PG_REPORT_IDLE_LIMIT},
                    )
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
        write = conn.get_execution_options().get("streamql_write")
        if write:  # WAL: NORMAL commits without an fsync, FULL syncs the log (write_connection)
            conn.exec_driver_sql(f"PRAGMA synchronous={'FULL' if write == 'synced' else 'NORMAL'}")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def fork_safe(engine: Engine) -> None:
    """A pooled connection is used only by the process that opened it: a process forked
    with the pool (an Airflow task, a runtime's child) starts with an empty pool and opens
    its own instead of sharing the parent's socket or SQLite file handle; a connection
    from another process found at checkout anyway is detached (SQLAlchemy's pooling-with-
    fork recipes)."""
    _pooled.add(engine)

    @event.listens_for(engine, "connect")
    def _remember_pid(_dbapi_connection, record):
        record.info["pid"] = os.getpid()

    @event.listens_for(engine, "checkout")
    def _check_pid(_dbapi_connection, record, proxy):
        if record.info.get("pid") != os.getpid():
            # detached, not closed: closing would end the parent's connection too
            record.dbapi_connection = proxy.dbapi_connection = None
            raise exc.DisconnectionError(f"a connection of process {record.info.get('pid')} in process {os.getpid()}")
