"""The records queries could not read: stored by the runtime that found them (with where
each sits, its text and the error), held (policy PAUSE: the query paused at them, under its
lease, the PAUSE logged as the runtime's command) and handled by a statement (``RESUME ...
[SKIP BAD RECORDS]`` marks them RETRIED or SKIPPED) or by the runtime (RESOLVED once a
retried batch commits)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any

from sqlalchemy import Connection, Engine, Select, and_, func, insert, or_, select, update

from . import schema as s
from .commands import CommandLog
from .connections import reading, write_connection
from .leases import Leases
from .model import HOLD_ISSUER, BadRecord
from .states import BadRecordStatus, DesiredState, QueryState


class BadRecords:
    """The bad records of every query; ``leases`` fences a hold, which ``commands`` logs.
    Pass ``conn`` to read or write inside an open transaction."""

    def __init__(self, engine: Engine, leases: Leases, commands: CommandLog):
        self.engine = engine
        self.leases = leases
        self.commands = commands

    def of(
        self, query_id: str | None = None, status: str | None = None, conn: Connection | None = None
    ) -> list[BadRecord]:
        """The bad records of ``query_id`` (of every query if None), with ``status`` if
        given, in the order they were recorded."""
        b = s.bad_records
        stmt = select(b)
        if query_id is not None:
            stmt = stmt.where(b.c.query_id == query_id)
        if status is not None:
            stmt = stmt.where(b.c.status == status)
        return self._read(stmt, conn)

    def of_each(
        self, wanted: Mapping[str, Collection[str]], conn: Connection | None = None
    ) -> dict[str, list[BadRecord]]:
        """query id -> its bad records with one of the statuses ``wanted[query id]``, in the
        order they were recorded (one read, whatever the number of queries)."""
        b = s.bad_records
        by_statuses: dict[tuple[str, ...], list[str]] = {}
        for q, statuses in wanted.items():
            if statuses:
                by_statuses.setdefault(tuple(sorted(statuses)), []).append(q)
        either = [and_(b.c.query_id.in_(ids), b.c.status.in_(statuses)) for statuses, ids in by_statuses.items()]
        found: dict[str, list[BadRecord]] = {q: [] for q in wanted}
        if either:
            for record in self._read(select(b).where(or_(*either)), conn):
                found[record.query_id].append(record)
        return found

    def _read(self, stmt: Select, conn: Connection | None) -> list[BadRecord]:
        with reading(self.engine, conn) as conn:
            rows = conn.execute(stmt.order_by(s.bad_records.c.id))
            return [BadRecord(**{k: v for k, v in r._mapping.items() if k != "id"}) for r in rows]

    def counts(self, conn: Connection | None = None) -> dict[str, dict[str, int]]:
        """query id -> {status: how many bad records}."""
        b = s.bad_records
        with reading(self.engine, conn) as conn:
            counts: dict[str, dict[str, int]] = {}
            for r in conn.execute(select(b.c.query_id, b.c.status, func.count()).group_by(b.c.query_id, b.c.status)):
                counts.setdefault(r[0], {})[r[1]] = r[2]
            return counts

    def record(self, records: list[BadRecord], conn: Connection | None = None) -> None:
        """Store bad records; one already stored (same query, record and batch) takes the
        new status (a retried batch that fails again holds the query again), unless it was
        skipped: a retry under policy FAIL that was already failing on it when ``RESUME ...
        SKIP BAD RECORDS`` came does not undo the skip (the next start leaves it out)."""
        with reading(self.engine, conn) if conn is not None else write_connection(self.engine) as conn:
            b = s.bad_records
            for r in records:
                same = (b.c.query_id == r.query_id, b.c.record_id == r.record_id, b.c.batch_id == r.batch_id)
                done = conn.execute(
                    update(b).where(*same, b.c.status != BadRecordStatus.SKIPPED).values(status=r.status, error=r.error)
                ).rowcount
                if not done and conn.execute(select(func.count()).select_from(b).where(*same)).scalar_one() == 0:
                    conn.execute(
                        insert(b).values(
                            query_id=r.query_id,
                            record_id=r.record_id,
                            batch_id=r.batch_id,
                            source=r.source,
                            file=r.file,
                            line=r.line,
                            raw=r.raw,
                            error=r.error,
                            status=r.status,
                            recorded_at=r.recorded_at or time.time(),
                            handled_by=r.handled_by,
                            handled_at=r.handled_at,
                        )
                    )

    def hold(self, query_id: str, records: list[BadRecord], reason: str, *, runtime_id: str, epoch: int) -> bool:
        """Policy PAUSE: record the bad records and pause the query in one transaction
        (desired and observed PAUSED, ``reason`` as its error, the PAUSE in the command log
        as the runtime's), while the lease is held."""
        with write_connection(self.engine) as conn:
            if not self.leases.held(conn, query_id, runtime_id, epoch):
                return False
            self.record(records, conn)
            pipeline = conn.execute(select(s.queries.c.pipeline).where(s.queries.c.id == query_id)).scalar_one()
            conn.execute(
                update(s.queries)
                .where(s.queries.c.id == query_id)
                .values(
                    desired_state=DesiredState.PAUSED,
                    observed_state=QueryState.PAUSED,
                    error=reason,
                    updated_at=time.time(),
                )
            )
            self.commands.log(conn, f"PAUSE {query_id}", pipeline, HOLD_ISSUER.format(runtime_id=runtime_id))
            return True

    def mark(
        self,
        conn: Connection,
        query_id: str,
        from_status: str,
        to_status: str,
        handled_by: str | None = None,
        upto_batch: int | None = None,
        after_batch: int | None = None,
    ) -> int:
        """Move a query's bad records from one status to another (of batches up to
        ``upto_batch`` and after ``after_batch`` if given); returns how many."""
        b = s.bad_records
        stmt = update(b).where(b.c.query_id == query_id, b.c.status == from_status)
        if upto_batch is not None:
            stmt = stmt.where(b.c.batch_id <= upto_batch)
        if after_batch is not None:
            stmt = stmt.where(b.c.batch_id > after_batch)
        values: dict[str, Any] = {"status": to_status}
        if handled_by is not None:
            values.update(handled_by=handled_by, handled_at=time.time())
        return conn.execute(stmt.values(**values)).rowcount
