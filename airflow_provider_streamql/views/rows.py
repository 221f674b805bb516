"""The rows every reader shows of a query or a snapshot: SHOW QUERIES, ``streamql queries``,
the UI's list, the metrics scrape and the waits all read a query's state through
:func:`shown_state` and its figures through :func:`query_rows`."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import Connection

from ..catalog import ACTIVE_STATES, Catalog, CheckpointSnapshot, QueryInfo, QueryState

QUERY_COLUMNS = [
    "query_id",
    "pipeline",
    "state",
    "desired",
    "version",
    "sink",
    "sources",
    "last_batch",
    "rows_per_sec",
    "state_rows",
    "state_bytes",
    "late_rows",
    "bad_records",
    "error",
]
#: SHOW SNAPSHOTS and SNAPSHOT: one row per checkpoint snapshot
SNAPSHOT_COLUMNS = ["query_id", "snapshot", "kind", "version", "batch", "position", "taken_at", "taken_by"]


def shown_state(query: QueryInfo, lease: dict[str, Any] | None, now: float | None = None) -> str:
    """Observed state as users should see it: an active query whose runtime stopped
    heartbeating (lease expired) is UNASSIGNED."""
    now = now or time.time()
    if query.observed_state in ACTIVE_STATES and (lease is None or lease["expires_at"] < now):
        return QueryState.UNASSIGNED
    return query.observed_state


def query_rows(catalog: Catalog, queries: list[QueryInfo], conn: Connection | None = None) -> list[dict[str, Any]]:
    """One dict per query with state, progress and last error."""
    leases = catalog.leases.holders(conn)
    bad = catalog.bad_records.counts(conn)
    rows = []
    for q in queries:
        p = catalog.observed.progress(q.id, conn)
        rows.append(
            {
                "query_id": q.id,
                "pipeline": q.pipeline,
                "state": shown_state(q, leases.get(q.id)),
                "desired": q.desired_state,
                "version": q.version,
                "sink": q.sink,
                "sources": ",".join(q.sources),
                "last_batch": p.batch_id if p else None,
                "rows_per_sec": round(p.rows_per_second, 1) if p else None,
                "state_rows": p.state_rows if p else None,
                "state_bytes": p.state_bytes if p else None,
                "late_rows": p.late_rows if p else None,
                "bad_records": sum(bad.get(q.id, {}).values()),
                "error": q.error,
            }
        )
    return rows


def snapshot_row(snap: CheckpointSnapshot) -> list:
    """A snapshot as a row of :data:`SNAPSHOT_COLUMNS`."""
    taken = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(snap.taken_at)) + " UTC"
    ordered = sorted(snap.position.items(), key=lambda item: (not item[0].isdigit(), item[0].zfill(12)))
    position = ", ".join(f"source {i}: {json.dumps(offset)}" for i, offset in ordered) or "-"
    return [snap.query_id, snap.number, snap.kind, snap.version, snap.batch_id, position, taken, snap.taken_by]
