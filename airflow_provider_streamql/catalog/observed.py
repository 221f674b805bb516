"""What runtimes report of each query: its observed state, written only while the runtime
holds the query's lease (:meth:`.leases.Leases.held`), and its progress: the latest batch
with running totals, and the last :data:`HISTORY` batches for throughput over time. The read
model and the conditions that wait read them; a RESTORE rewinds the progress."""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, Engine, case, delete, func, insert, or_, select, update

from . import schema as s
from .connections import reading, write_connection
from .leases import Leases
from .model import Progress
from .states import QueryState

#: batches of throughput history kept per query
HISTORY = 60


class ObservedState:
    """Observed state and progress of the queries; ``leases`` fences a runtime's writes.
    Pass ``conn`` to read inside an open transaction."""

    def __init__(self, engine: Engine, leases: Leases):
        self.engine = engine
        self.leases = leases

    def set(
        self,
        query_id: str,
        state: str,
        error: str | None = None,
        *,
        runtime_id: str | None = None,
        epoch: int | None = None,
        running_version: int | None = None,
        run_id: str | None = None,
        failures: int | None = None,
        retry_at: float | None = None,
        retry_batch: int | None = None,
    ) -> bool:
        """Write observed state; with ``runtime_id``/``epoch``, only while that lease is held.

        A failing query's retries: ERROR records its ``failures`` in a row and when it is
        started again (``retry_at``, None when it is not), RETRYING keeps its failures and
        records the batch it runs again first (``retry_batch``), and RUNNING, PAUSED or
        TERMINATED forget them."""
        with write_connection(self.engine) as conn:
            if runtime_id is not None and not self.leases.held(conn, query_id, runtime_id, epoch):
                return False
            values: dict[str, Any] = {"observed_state": state, "updated_at": time.time()}
            if error is not None or state in (QueryState.RUNNING, QueryState.PAUSED, QueryState.TERMINATED):
                values["error"] = error
            if state in (QueryState.RUNNING, QueryState.PAUSED, QueryState.TERMINATED):
                values.update(failures=None, retry_at=None, retry_batch=None)
            elif state == QueryState.ERROR and failures is not None:
                values.update(failures=failures, retry_at=retry_at, retry_batch=None)
            elif state == QueryState.RETRYING:
                values.update(retry_at=None, retry_batch=retry_batch)
            if running_version is not None:
                values["running_version"] = running_version
            if run_id is not None:
                values["run_id"] = run_id
            conn.execute(update(s.queries).where(s.queries.c.id == query_id).values(**values))
            return True

    def progress(self, query_id: str, conn: Connection | None = None) -> Progress | None:
        return self.progress_of([query_id], conn).get(query_id)

    def progress_of(self, query_ids: Collection[str], conn: Connection | None = None) -> dict[str, Progress]:
        """query id -> its latest batch, for those of ``query_ids`` that ran one (one read)."""
        with reading(self.engine, conn) as conn:
            rows = conn.execute(select(s.progress).where(s.progress.c.query_id.in_(list(query_ids)))).all()
        found = {}
        for row in rows:
            data = dict(row._mapping)
            data["source_offsets"] = json.loads(data["source_offsets"])
            data["state_operators"] = json.loads(data["state_operators"])
            found[row.query_id] = Progress(**data)
        return found

    def progress_history(self, query_id: str, conn: Connection | None = None) -> list[dict[str, Any]]:
        """The query's last batches, oldest first: batch_id, at, input_rows, rows_per_second."""
        h = s.progress_history
        with reading(self.engine, conn) as conn:
            return [
                dict(r._mapping)
                for r in conn.execute(
                    select(h.c.batch_id, h.c.at, h.c.input_rows, h.c.rows_per_second)
                    .where(h.c.query_id == query_id)
                    .order_by(h.c.batch_id)
                )
            ]

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
            violations=p.violations,
        )
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.progress).where(s.progress.c.query_id == p.query_id)).first()
            if row is None:
                conn.execute(
                    insert(s.progress).values(
                        query_id=p.query_id,
                        total_input_rows=p.input_rows,
                        late_rows=p.late_rows,
                        violations_total=p.violations,
                        **values,
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
                        violations_total=row.violations_total + (p.violations if new else 0),
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
