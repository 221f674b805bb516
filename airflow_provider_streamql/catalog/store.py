"""The catalog database: the control plane's source of truth and command channel.

:class:`Catalog` opens the database and keeps desired state itself: the sources, the queries
and their versions, as statements write them. What else the catalog records is a part it
holds, each over the same database and named for what it records, so a call says whose data
it touches (``catalog.leases.acquire(...)``, ``catalog.bad_records.hold(...)``):

- ``commands``: the command log (:mod:`.commands`), appended by every applied statement;
- ``leases`` and ``runtimes``: who runs what (:mod:`.leases`), the fence of a runtime's writes;
- ``observed``: observed state and progress, as runtimes report them (:mod:`.observed`);
- ``bad_records``: the records queries could not read (:mod:`.bad_records`), whose hold is
  fenced by ``leases`` and logged in ``commands``;
- ``snapshots``: the record of checkpoint snapshots (:mod:`.snapshots`);
- ``event_cursors``: how far each consumer of query events has read (:mod:`.events`);
- ``deploys``: each apply of a deploy file and what it changed (:mod:`.deploys`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    Connection,
    create_engine,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import QueuePool

from ..errors import CatalogError
from . import schema as s
from .bad_records import BadRecords
from .commands import CommandLog
from .connections import fork_safe, reading, serialise_sqlite, write_connection
from .deploys import DeployRecords
from .events import EventCursors
from .leases import Leases, Runtimes
from .migrations import LATEST, migrate
from .model import QueryInfo, Snapshot, SourceInfo
from .observed import ObservedState
from .snapshots import SnapshotRecords
from .urls import default_url, error_line, parse_url, safe_url, with_env_password


class Catalog:
    """Access to one catalog database (SQLite or PostgreSQL), migrated to the latest schema:
    desired state, and the parts that record the rest (see the module's docstring)."""

    def __init__(self, url: str | None = None, *, home: str | None = None, migrate_to: int = LATEST):
        self.url = with_env_password(url or default_url(home))
        if self.url.startswith("postgresql://"):
            self.url = "postgresql+psycopg://" + self.url[len("postgresql://") :]
        parsed = parse_url(self.url)
        shown = safe_url(self.url)
        try:
            if parsed.get_backend_name() == "sqlite":
                # pooled: opening a connection costs ten times the write it is for (its
                # pragmas); no limit, so any number of runtime workers is served at once
                self.engine = create_engine(
                    parsed,
                    poolclass=QueuePool,
                    pool_size=16,
                    max_overflow=-1,
                    connect_args={"timeout": 60, "check_same_thread": False},
                )
                serialise_sqlite(self.engine)
            else:
                self.engine = create_engine(parsed, pool_pre_ping=True)
            fork_safe(self.engine)
        except NoSuchModuleError:
            raise CatalogError(
                f"catalog URL {shown!r}: no database driver {parsed.drivername!r} (e.g. postgresql+psycopg, sqlite)"
            ) from None
        except ImportError as e:
            raise CatalogError(
                f"catalog URL {shown!r}: the driver of {parsed.drivername!r} is not installed ({e.msg})"
            ) from None
        except Exception as e:  # any other refusal of the URL (a bad query argument, ...)
            raise CatalogError(f"catalog URL {shown!r} cannot be used: {error_line(e, self.url)}") from None
        try:
            self.dialect = self.engine.dialect.name
            migrate(self.engine, migrate_to) if migrate_to else None
        except (ArgumentError, DBAPIError) as e:  # DBAPIError: OperationalError, InterfaceError, ...
            self.engine.dispose()
            raise CatalogError(f"cannot open catalog {shown!r}: {error_line(e, self.url)}") from None
        self.commands = CommandLog(self.engine)
        self.leases = Leases(self.engine)
        self.runtimes = Runtimes(self.engine, self.leases)
        self.observed = ObservedState(self.engine, self.leases)
        self.bad_records = BadRecords(self.engine, self.leases, self.commands)
        self.snapshots = SnapshotRecords(self.engine)
        self.event_cursors = EventCursors(self.engine)
        self.deploys = DeployRecords(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One serialised read-write transaction: statements are applied one script at a time."""
        with write_connection(self.engine, exclusive=True) as conn:
            yield conn

    # -- statements -----------------------------------------------------------------
    def snapshot(self, conn: Connection) -> Snapshot:
        sources = self.sources(conn)
        queries = {r.id: QueryInfo.from_row(r) for r in conn.execute(select(s.queries))}
        next_seq = (conn.execute(select(func.max(s.queries.c.seq))).scalar() or 0) + 1
        return Snapshot(sources, queries, next_seq)

    def insert_source(self, conn: Connection, src: SourceInfo) -> None:
        conn.execute(
            insert(s.sources).values(
                name=src.name,
                kind=src.kind,
                columns=src.column_json(),
                properties=json.dumps(src.properties),
                format=src.format,
                path=src.path,
                writer_query=src.writer_query,
                created_at=time.time(),
            )
        )

    def ensure_source(self, src: SourceInfo) -> SourceInfo:
        """The source named ``src.name``, inserted as ``src`` if it does not exist yet."""
        with write_connection(self.engine) as conn:
            existing = self.source(src.name, conn)
            if existing is not None:
                return existing
            self.insert_source(conn, src)
            return src

    def update_source(self, conn: Connection, src: SourceInfo) -> None:
        conn.execute(
            update(s.sources)
            .where(s.sources.c.name == src.name)
            .values(
                columns=src.column_json(),
                writer_query=src.writer_query,
                path=src.path,
                properties=json.dumps(src.properties),
                format=src.format,
            )
        )

    def delete_source(self, conn: Connection, name: str) -> None:
        conn.execute(delete(s.sources).where(s.sources.c.name == name))

    def insert_query(self, conn: Connection, q: QueryInfo, sink: SourceInfo) -> None:
        now = time.time()
        conn.execute(
            insert(s.queries).values(
                id=q.id,
                seq=q.seq,
                pipeline=q.pipeline,
                kind=q.kind,
                sink=q.sink,
                **q.definition(),
                version=q.version,
                checkpoint=q.checkpoint,
                desired_state=q.desired_state,
                observed_state=q.observed_state,
                error=None,
                created_at=now,
                updated_at=now,
            )
        )
        self._insert_version(conn, q, sink, None)

    def _insert_version(self, conn: Connection, q: QueryInfo, sink: SourceInfo, report: dict[str, Any] | None) -> None:
        conn.execute(
            insert(s.query_versions).values(
                query_id=q.id,
                version=q.version,
                **q.definition(),
                sink_columns=sink.column_json(),
                checkpoint=q.checkpoint,
                verdict=report["verdict"] if report else None,
                report=json.dumps(report) if report else None,
                created_at=time.time(),
            )
        )

    def add_version(self, conn: Connection, q: QueryInfo, sink: SourceInfo, report: dict[str, Any]) -> None:
        """Make ``q`` (already carrying its new version number) the query's desired version."""
        conn.execute(
            update(s.queries)
            .where(s.queries.c.id == q.id)
            .values(**q.definition(), version=q.version, desired_state=q.desired_state, updated_at=time.time())
        )
        self.update_source(conn, sink)
        self._insert_version(conn, q, sink, report)

    def next_version(self, conn: Connection, query_id: str) -> int:
        """Versions are never reused, even after a rollback."""
        return (
            conn.execute(
                select(func.max(s.query_versions.c.version)).where(s.query_versions.c.query_id == query_id)
            ).scalar()
            or 0
        ) + 1

    def versions(self, query_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        with reading(self.engine, conn) as conn:
            rows = conn.execute(
                select(s.query_versions)
                .where(s.query_versions.c.query_id == query_id)
                .order_by(s.query_versions.c.version)
            )
            return [dict(r._mapping) for r in rows]

    def mark_version(self, query_id: str, version: int, **values: Any) -> None:
        """Record a version's start, end, outcome or error (as the runtime sees them)."""
        with write_connection(self.engine) as conn:
            conn.execute(
                update(s.query_versions)
                .where(s.query_versions.c.query_id == query_id, s.query_versions.c.version == version)
                .values(**values)
            )

    def roll_back(self, query_id: str, good: int, failed: int, error: str) -> None:
        """Make version ``good`` the query's version again and record why ``failed`` ended."""
        with write_connection(self.engine) as conn:
            self.revert_version(conn, query_id, good, failed, error)

    def revert_version(self, conn: Connection, query_id: str, good: int, failed: int, error: str) -> None:
        """Inside ``conn``: version ``good``'s definition (and its sink's columns then) is the
        query's again; ``failed`` ends ROLLED_BACK with ``error`` (a runtime's rollback of a
        failed version, or a rollback of the deploy that made it)."""
        now = time.time()
        row = conn.execute(
            select(s.query_versions).where(s.query_versions.c.query_id == query_id, s.query_versions.c.version == good)
        ).one()
        conn.execute(
            update(s.queries)
            .where(s.queries.c.id == query_id)
            .values(**{name: row._mapping[name] for name in s.DEFINITION}, version=good, updated_at=now)
        )
        sink = conn.execute(select(s.queries.c.sink).where(s.queries.c.id == query_id)).scalar()
        conn.execute(update(s.sources).where(s.sources.c.name == sink).values(columns=row.sink_columns))
        conn.execute(
            update(s.query_versions)
            .where(s.query_versions.c.query_id == query_id, s.query_versions.c.version == failed)
            .values(outcome="ROLLED_BACK", ended_at=now, error=error)
        )

    def set_desired(self, conn: Connection, query_id: str, state: str) -> None:
        conn.execute(
            update(s.queries).where(s.queries.c.id == query_id).values(desired_state=state, updated_at=time.time())
        )

    # -- reads (pass ``conn`` to read inside an open transaction) ---------------------------
    def queries(
        self, pipeline: str | None = None, conn: Connection | None = None, *, ids: Collection[str] | None = None
    ) -> list[QueryInfo]:
        """The queries (of ``pipeline``; of the IDs ``ids``, those that exist), oldest first."""
        stmt = select(s.queries).order_by(s.queries.c.seq)
        if pipeline is not None:
            stmt = stmt.where(s.queries.c.pipeline == pipeline)
        if ids is not None:
            stmt = stmt.where(s.queries.c.id.in_(list(ids)))
        with reading(self.engine, conn) as conn:
            return [QueryInfo.from_row(r) for r in conn.execute(stmt)]

    def query(self, query_id: str, conn: Connection | None = None) -> QueryInfo | None:
        with reading(self.engine, conn) as conn:
            row = conn.execute(select(s.queries).where(s.queries.c.id == query_id)).first()
        return QueryInfo.from_row(row) if row else None

    def source(self, name: str, conn: Connection | None = None) -> SourceInfo | None:
        with reading(self.engine, conn) as conn:
            row = conn.execute(select(s.sources).where(s.sources.c.name == name)).first()
        return SourceInfo.from_row(row) if row else None

    def sources(self, conn: Connection | None = None) -> dict[str, SourceInfo]:
        """Every stream and table by name, in one read."""
        with reading(self.engine, conn) as conn:
            return {r.name: SourceInfo.from_row(r) for r in conn.execute(select(s.sources))}
