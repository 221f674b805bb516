"""The rows every reader shows of a query or a snapshot: SHOW QUERIES, ``streamql queries``,
the UI's list, the metrics scrape and the waits all read a query's state through
:func:`shown_state` and its figures through :func:`query_rows`."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import Connection

from ..catalog import ACTIVE_STATES, Catalog, CheckpointSnapshot, DesiredState, Progress, QueryInfo, QueryState
from ..language.expectations import Recorded
from ..storage.checkpoints import last_committed_batch
from ..storage.kafka_topics import KafkaSettings
from . import lag

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
    "lag_files",
    "lag_records",
    "lag_note",
    "stuck",
    "state_rows",
    "state_bytes",
    "late_rows",
    "bad_records",
    "error",
    "retry",
]
#: SHOW SNAPSHOTS and SNAPSHOT: one row per checkpoint snapshot
SNAPSHOT_COLUMNS = ["query_id", "snapshot", "kind", "version", "batch", "position", "taken_at", "taken_by"]


def replaying(query: QueryInfo) -> bool:
    """RETRYING, and the batch it runs again first (the one it failed in) has not committed
    yet. Once it has, the query is RUNNING (as the runtime writes at its next look)."""
    return query.observed_state == QueryState.RETRYING and last_committed_batch(query.checkpoint) < (
        query.retry_batch if query.retry_batch is not None else -1
    )


def shown_state(query: QueryInfo, lease: dict[str, Any] | None, now: float | None = None) -> str:
    """Observed state as users should see it: an active query whose runtime stopped
    heartbeating (lease expired) is UNASSIGNED; a RETRYING one whose batch it failed in
    has committed is RUNNING (its runtime writes so at its next look)."""
    now = now or time.time()
    if query.observed_state in ACTIVE_STATES and (lease is None or lease["expires_at"] < now):
        return QueryState.UNASSIGNED
    if query.observed_state == QueryState.RETRYING and not replaying(query):
        return QueryState.RUNNING
    return query.observed_state


def retry(query: QueryInfo, state: str, now: float | None = None) -> str | None:
    """A failing query's retries as users should see them (None when it is not failing):
    in ERROR, the attempt that comes next and when; once started again (RETRYING), the
    attempt running. Attempt 1 was its first run."""
    if query.failures is None or state not in (QueryState.ERROR, QueryState.STARTING, QueryState.RETRYING):
        return None
    attempt = query.failures + 1
    if state != QueryState.ERROR:
        return f"attempt {attempt} running"
    if query.retry_at is None:
        return f"failed {query.failures} time(s) in a row; not retried"
    at = time.strftime("%H:%M:%S", time.gmtime(query.retry_at))
    return f"attempt {attempt} at {at} UTC (in {max(0.0, query.retry_at - (now or time.time())):.0f}s)"


#: seconds input may wait, with no batch committed, before a query that should run is marked
#: stuck (:func:`stuck`): far above a healthy batch, whose trigger starts as soon as input waits
STUCK_AFTER = 300.0


def stuck(query: QueryInfo, state: str, behind: lag.Lag, last_batch_at: float | None, now: float, after: float) -> bool:
    """Whether a query that should make progress makes none: it should run and is shown
    RUNNING or RETRYING (a paused, failed or unassigned one says so itself), input waits for
    it (lag in files or records above 0), that input has waited longer than ``after`` seconds
    (on file topics, the oldest unprocessed file's commit time; a Kafka topic cannot tell),
    and no batch has committed for ``after`` seconds either (none ever: since its state was
    last written). Its lag is then growing or standing still while its last batch ages."""
    if query.desired_state != DesiredState.RUNNING or state not in (QueryState.RUNNING, QueryState.RETRYING):
        return False
    if not behind.behind or (behind.waiting_since is not None and now - behind.waiting_since <= after):
        return False
    return now - (last_batch_at if last_batch_at is not None else query.updated_at) > after


def query_rows(
    catalog: Catalog,
    queries: list[QueryInfo],
    conn: Connection | None = None,
    kafka: KafkaSettings | None = None,
    stuck_after: float = STUCK_AFTER,
) -> list[dict[str, Any]]:
    """One dict per query with state, progress, lag, whether it is :func:`stuck` (after
    ``stuck_after`` seconds) and last error; with ``kafka``, the lag in records of a query on
    a Kafka topic too (asked of the broker: never inside a catalog transaction)."""
    now = time.time()
    leases = catalog.leases.holders(conn)
    bad = catalog.bad_records.counts(conn)
    rows = []
    ranges = lag.TopicRanges(kafka) if kafka is not None and kafka.given else None
    for q in queries:
        p = catalog.observed.progress(q.id, conn)
        state = shown_state(q, leases.get(q.id))
        behind = lag.query_lag(catalog, q, kafka, ranges)
        rows.append(
            {
                "query_id": q.id,
                "pipeline": q.pipeline,
                "state": state,
                "desired": q.desired_state,
                "version": q.version,
                "sink": q.sink,
                "sources": ",".join(q.sources),
                "last_batch": p.batch_id if p else None,
                # the last batch's rate is not the query's now once it stopped running
                "rows_per_sec": round(p.rows_per_second, 1) if p and state == QueryState.RUNNING else None,
                "lag_files": behind.files,
                "lag_records": behind.records,
                # why a lag is not known (a Kafka broker that cannot be reached, say)
                "lag_note": behind.note,
                "stuck": stuck(q, state, behind, p.last_batch_at if p else None, now, stuck_after),
                "state_rows": p.state_rows if p else None,
                "state_bytes": p.state_bytes if p else None,
                "late_rows": p.late_rows if p else None,
                "bad_records": sum(bad.get(q.id, {}).values()),
                "expectation": expectation(q, p),
                "violations": p.violations if p else None,
                # a retry that has committed its batch no longer failed
                "error": None if state == QueryState.RUNNING and q.failures else q.error,
                "retry": retry(q, state),
            }
        )
    return rows


def snapshot_row(snap: CheckpointSnapshot) -> list:
    """A snapshot as a row of :data:`SNAPSHOT_COLUMNS`."""
    taken = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(snap.taken_at)) + " UTC"
    ordered = sorted(snap.position.items(), key=lambda item: (not item[0].isdigit(), item[0].zfill(12)))
    position = ", ".join(f"source {i}: {json.dumps(offset)}" for i, offset in ordered) or "-"
    return [snap.query_id, snap.number, snap.kind, snap.version, snap.batch_id, position, taken, snap.taken_by]


def expectation(q: QueryInfo, p: Progress | None) -> str | None:
    """The query's expectation and the rows violating it (None: it has none)."""
    expected = Recorded.of(q.settings)
    if expected is None:
        return None
    last, total = (p.violations, p.violations_total) if p else (0, 0)
    return f"{expected.describe()}: {last} violating rows in the last batch, total {total}"
