"""What runtimes write to the catalog: heartbeats, leases with epochs, observed state,
progress and the bad records they find. Mixed into :class:`~.store.Catalog`, apart from the
desired state that statements write, because only runtimes (and their tests) call it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, case, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from . import schema as s
from .connections import write_connection
from .model import HOLD_ISSUER, BadRecord, Progress
from .states import DesiredState, QueryState

#: batches of throughput history kept per query
HISTORY = 60


class ObservedState:
    """Heartbeats, leases, observed state, progress and bad records of one catalog."""

    engine: Engine

    # -- reads (pass ``conn`` to read inside an open transaction) ---------------------------
    @contextmanager
    def _reading(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
        else:
            with self.engine.connect() as fresh:
                yield fresh

    def progress(self, query_id: str, conn: Connection | None = None) -> Progress | None:
        with self._reading(conn) as conn:
            row = conn.execute(select(s.progress).where(s.progress.c.query_id == query_id)).first()
        if row is None:
            return None
        data = dict(row._mapping)
        data["source_offsets"] = json.loads(data["source_offsets"])
        data["state_operators"] = json.loads(data["state_operators"])
        return Progress(**data)

    def leases(self, conn: Connection | None = None) -> dict[str, dict[str, Any]]:
        """query id -> {runtime_id, epoch, expires_at, heartbeat_at} of its lease holder."""
        stmt = select(s.leases, s.runtimes.c.heartbeat_at).join(
            s.runtimes, s.runtimes.c.id == s.leases.c.runtime_id, isouter=True
        )
        with self._reading(conn) as conn:
            return {r.query_id: dict(r._mapping) for r in conn.execute(stmt)}

    def runtimes(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        with self._reading(conn) as conn:
            return [dict(r._mapping) for r in conn.execute(select(s.runtimes).order_by(s.runtimes.c.started_at))]

    # -- runtimes: heartbeats, leases, observed state, progress ------------------------------
    def heartbeat(self, runtime_id: str, pipeline: str, host: str, pid: int, **spark: str | None) -> None:
        """Record that a runtime is alive; the first beat registers it with ``spark``'s
        ``spark_app_id``, ``spark_ui_url`` and ``master``."""
        now = time.time()
        with write_connection(self.engine) as conn:
            done = conn.execute(
                update(s.runtimes).where(s.runtimes.c.id == runtime_id).values(heartbeat_at=now)
            ).rowcount
            if not done:
                conn.execute(
                    insert(s.runtimes).values(
                        id=runtime_id, pipeline=pipeline, host=host, pid=pid, started_at=now, heartbeat_at=now, **spark
                    )
                )

    def runtime_stopped(self, runtime_id: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(update(s.runtimes).where(s.runtimes.c.id == runtime_id).values(stopped_at=time.time()))
            conn.execute(delete(s.leases).where(s.leases.c.runtime_id == runtime_id))

    def acquire_lease(self, query_id: str, runtime_id: str, ttl: float) -> int | None:
        """Take or renew the lease on a query. Returns the epoch held, or None if another
        runtime holds a live lease. A take (not a renewal) increments the epoch."""
        now = time.time()
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.leases).where(s.leases.c.query_id == query_id)).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            insert(s.leases).values(
                                query_id=query_id, runtime_id=runtime_id, epoch=1, expires_at=now + ttl
                            )
                        )
                    return 1
                except IntegrityError:
                    return None
            if row.runtime_id == runtime_id:
                epoch = row.epoch
            elif row.expires_at < now:
                epoch = row.epoch + 1
            else:
                return None
            # The WHERE re-checks what was read, so two takers cannot both win.
            done = conn.execute(
                update(s.leases)
                .where(
                    s.leases.c.query_id == query_id,
                    s.leases.c.epoch == row.epoch,
                    s.leases.c.runtime_id == row.runtime_id,
                )
                .values(runtime_id=runtime_id, epoch=epoch, expires_at=now + ttl)
            ).rowcount
            return epoch if done else None

    def renew_lease(self, query_id: str, runtime_id: str, epoch: int, ttl: float) -> bool:
        """Extend a held lease; False means it was lost (expired and taken, or released)."""
        with write_connection(self.engine) as conn:
            return bool(
                conn.execute(
                    update(s.leases)
                    .where(
                        s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id, s.leases.c.epoch == epoch
                    )
                    .values(expires_at=time.time() + ttl)
                ).rowcount
            )

    def renew_leases(self, runtime_id: str, epochs: dict[str, int], ttl: float) -> dict[str, int]:
        """Extend every lease in ``epochs`` (query id -> epoch held) in one transaction.
        Returns the ones that were lost (expired and taken, or released), with their epoch."""
        if not epochs:
            return {}
        with write_connection(self.engine) as conn:
            renewed = conn.execute(
                update(s.leases)
                .where(s.leases.c.runtime_id == runtime_id, s.leases.c.query_id.in_(sorted(epochs)))
                .values(expires_at=time.time() + ttl)
                .returning(s.leases.c.query_id, s.leases.c.epoch)
            )
            held = {r.query_id for r in renewed if epochs[r.query_id] == r.epoch}
        return {q: e for q, e in epochs.items() if q not in held}

    def release_lease(self, query_id: str, runtime_id: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(delete(s.leases).where(s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id))

    def set_observed(
        self,
        query_id: str,
        state: str,
        error: str | None = None,
        *,
        runtime_id: str | None = None,
        epoch: int | None = None,
        running_version: int | None = None,
        run_id: str | None = None,
    ) -> bool:
        """Write observed state; with ``runtime_id``/``epoch``, only while that lease is held."""
        with write_connection(self.engine) as conn:
            if runtime_id is not None and not _lease_held(conn, query_id, runtime_id, epoch):
                return False
            values: dict[str, Any] = {"observed_state": state, "updated_at": time.time()}
            if error is not None or state in (QueryState.RUNNING, QueryState.PAUSED, QueryState.TERMINATED):
                values["error"] = error
            if running_version is not None:
                values["running_version"] = running_version
            if run_id is not None:
                values["run_id"] = run_id
            conn.execute(update(s.queries).where(s.queries.c.id == query_id).values(**values))
            return True

    def rewind_progress(self, query_id: str, batch_id: int, conn: Connection) -> None:
        """A query restored to ``batch_id``: its last batch is that one again; the later
        batches (run again) leave the history and the input total (as far as the history
        still holds them: it keeps the last :data:`HISTORY` batches)."""
        h, p = s.progress_history, s.progress
        later = (h.c.query_id == query_id) & (h.c.batch_id > batch_id)
        rows = conn.execute(select(func.coalesce(func.sum(h.c.input_rows), 0)).where(later)).scalar() or 0
        conn.execute(
            update(p)
            .where(p.c.query_id == query_id)
            .values(
                batch_id=batch_id,
                total_input_rows=case((p.c.total_input_rows > rows, p.c.total_input_rows - rows), else_=0),
            )
        )
        conn.execute(delete(h).where(later))

    def record_progress(self, p: Progress) -> None:
        """Store the latest batch; input and late rows accumulate over new batch ids. The
        last :data:`HISTORY` batches are kept for throughput over time."""
        values = dict(
            batch_id=p.batch_id,
            input_rows=p.input_rows,
            rows_per_second=p.rows_per_second,
            source_offsets=json.dumps(p.source_offsets),
            last_batch_at=p.last_batch_at,
            state_rows=p.state_rows,
            state_bytes=p.state_bytes,
            state_operators=json.dumps(p.state_operators),
        )
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.progress).where(s.progress.c.query_id == p.query_id)).first()
            if row is None:
                conn.execute(
                    insert(s.progress).values(
                        query_id=p.query_id, total_input_rows=p.input_rows, late_rows=p.late_rows, **values
                    )
                )
            else:
                new = p.batch_id != row.batch_id
                conn.execute(
                    update(s.progress)
                    .where(s.progress.c.query_id == p.query_id)
                    .values(
                        total_input_rows=row.total_input_rows + (p.input_rows if new else 0),
                        late_rows=row.late_rows + (p.late_rows if new else 0),
                        **values,
                    )
                )
            h = s.progress_history
            # ids above this batch belong to a checkpoint that was rolled back
            conn.execute(
                delete(h).where(
                    h.c.query_id == p.query_id, or_(h.c.batch_id >= p.batch_id, h.c.batch_id <= p.batch_id - HISTORY)
                )
            )
            conn.execute(
                insert(h).values(
                    query_id=p.query_id,
                    batch_id=p.batch_id,
                    at=p.last_batch_at,
                    input_rows=p.input_rows,
                    rows_per_second=p.rows_per_second,
                )
            )

    def progress_history(self, query_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """The query's last batches, oldest first: batch_id, at, input_rows, rows_per_second."""
        h = s.progress_history
        with self._reading(conn) as conn:
            return [
                dict(r._mapping)
                for r in conn.execute(
                    select(h.c.batch_id, h.c.at, h.c.input_rows, h.c.rows_per_second)
                    .where(h.c.query_id == query_id)
                    .order_by(h.c.batch_id)
                )
            ]

    # -- bad records ------------------------------------------------------------------------
    def record_bad_records(self, records: list[BadRecord], conn: Connection | None = None) -> None:
        """Store bad records; one already stored (same query, record and batch) takes the
        new status (a retried batch that fails again holds the query again)."""
        with self._reading(conn) if conn is not None else write_connection(self.engine) as conn:
            b = s.bad_records
            for r in records:
                done = conn.execute(
                    update(b)
                    .where(b.c.query_id == r.query_id, b.c.record_id == r.record_id, b.c.batch_id == r.batch_id)
                    .values(status=r.status, error=r.error)
                ).rowcount
                if not done:
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

    def hold_on_bad_records(
        self, query_id: str, records: list[BadRecord], reason: str, *, runtime_id: str, epoch: int
    ) -> bool:
        """Policy PAUSE: record the bad records and pause the query in one transaction
        (desired and observed PAUSED, ``reason`` as its error), while the lease is held."""
        with write_connection(self.engine) as conn:
            if not _lease_held(conn, query_id, runtime_id, epoch):
                return False
            self.record_bad_records(records, conn)
            pipeline = conn.execute(select(s.queries.c.pipeline).where(s.queries.c.id == query_id)).scalar()
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
            self.log_command(conn, f"PAUSE {query_id}", pipeline, HOLD_ISSUER.format(runtime_id=runtime_id))
            return True

    def bad_records(
        self, query_id: str | None = None, status: str | None = None, conn: Connection | None = None
    ) -> list[BadRecord]:
        b = s.bad_records
        stmt = select(b).order_by(b.c.id)
        if query_id is not None:
            stmt = stmt.where(b.c.query_id == query_id)
        if status is not None:
            stmt = stmt.where(b.c.status == status)
        with self._reading(conn) as conn:
            return [BadRecord(**{k: v for k, v in r._mapping.items() if k != "id"}) for r in conn.execute(stmt)]

    def bad_record_counts(self, conn: Connection | None = None) -> dict[str, dict[str, int]]:
        """query id -> {status: how many bad records}."""
        b = s.bad_records
        with self._reading(conn) as conn:
            counts: dict[str, dict[str, int]] = {}
            for r in conn.execute(select(b.c.query_id, b.c.status, func.count()).group_by(b.c.query_id, b.c.status)):
                counts.setdefault(r[0], {})[r[1]] = r[2]
            return counts

    def mark_bad_records(
        self,
        conn: Connection,
        query_id: str,
        from_status: str,
        to_status: str,
        handled_by: str | None = None,
        upto_batch: int | None = None,
    ) -> int:
        """Move a query's bad records from one status to another; returns how many."""
        b = s.bad_records
        stmt = update(b).where(b.c.query_id == query_id, b.c.status == from_status)
        if upto_batch is not None:
            stmt = stmt.where(b.c.batch_id <= upto_batch)
        values: dict[str, Any] = {"status": to_status}
        if handled_by is not None:
            values.update(handled_by=handled_by, handled_at=time.time())
        return conn.execute(stmt.values(**values)).rowcount


def _lease_held(conn: Connection, query_id: str, runtime_id: str, epoch: int | None) -> bool:
    """``runtime_id`` holds the lease on ``query_id`` under ``epoch`` (a fenced write checks it
    in the transaction of the write)."""
    held = select(s.leases.c.query_id).where(
        s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id, s.leases.c.epoch == epoch
    )
    return conn.execute(held).first() is not None
