"""What a wait sees of a query at one look: its shown state and last error, the version it
runs, whether the version a wait is on was rolled back, the bad record holding it (or the one
it failed on) and its last batch. A plain read; :mod:`airflow_provider_streamql.conditions`
decides from it how a wait stands (observe here, decide there)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..catalog import BadRecord, BadRecordStatus, Catalog, DesiredState, Progress, QueryInfo, QueryState
from ..errors import first_line
from . import lag
from .rows import shown_state


@dataclass(frozen=True)
class QueryLook:
    """One query as a wait sees it."""

    query_id: str
    state: QueryState
    desired: DesiredState
    #: the first line of its last error (or of the note on why it runs the version it runs)
    error: str | None
    version: int
    running_version: int | None
    #: the awaited version, when it was rolled back since, with why
    rolled_back: tuple[int, str | None] | None
    #: the bad record holding it (policy PAUSE), or the one its failing batch failed on
    bad_record: BadRecord | None
    last_batch: int | None
    last_batch_at: float | None
    #: the record its failing batch failed on was skipped (RESUME ... SKIP BAD RECORDS) since
    #: it last reported: its runtime starts it again past it
    skipped: bool = False

    @property
    def held(self) -> bool:
        """Paused by its runtime at a bad record (policy PAUSE), not by someone."""
        return self.bad_record is not None and self.bad_record.status == BadRecordStatus.PENDING

    @property
    def failing(self) -> bool:
        """In ERROR on the version it should run, and still to run: an ERROR of a version
        replaced since is not the new version's (it is started once the runtime's back-off
        ends), one asked to pause or terminate is stopped by the runtime's next pass, and one
        whose bad record was just skipped is started again past it."""
        return (
            self.state == QueryState.ERROR
            and self.desired == DesiredState.RUNNING
            and self.running_version in (None, self.version)
            and not self.skipped
        )


def look(catalog: Catalog, query: QueryInfo, lease: dict | None, awaited_version: int | None = None) -> QueryLook:
    """Read ``query`` (its lease from ``catalog.leases.holders()``) as a wait sees it;
    ``awaited_version``: the version the wait is on (the query's when it started)."""
    seen = looks(catalog, [query], {query.id: lease})[query.id]
    if awaited_version is not None and awaited_version != query.version:
        row = next((v for v in catalog.versions(query.id) if v["version"] == awaited_version), None)
        if row is not None and row["outcome"] == "ROLLED_BACK":
            return replace(seen, rolled_back=(awaited_version, first_line(row["error"]) if row["error"] else None))
    return seen


def looks(catalog: Catalog, queries: list[QueryInfo], leases: Mapping[str, dict | None]) -> dict[str, QueryLook]:
    """Each of ``queries`` as a wait sees it (``leases``: ``catalog.leases.holders()``), by
    query id: one read of their progress and one of the bad records that matter, whatever
    their number (a wait on PAUSE ALL's 40 queries looks at each of them every poll)."""
    if not queries:  # none waiting: nothing to read
        return {}
    shown = {q.id: QueryState(shown_state(q, leases.get(q.id))) for q in queries}
    wanted: dict[str, tuple[str, ...]] = {}
    for q in queries:
        if q.desired_state == DesiredState.PAUSED:  # held at a bad record?
            wanted[q.id] = (BadRecordStatus.PENDING,)
        elif shown[q.id] == QueryState.ERROR:  # failed on one, or on one skipped since?
            wanted[q.id] = (BadRecordStatus.FAILED, BadRecordStatus.SKIPPED)
    progress = catalog.observed.progress_of([q.id for q in queries])
    records = catalog.bad_records.of_each(wanted)
    return {q.id: _look(q, shown[q.id], progress.get(q.id), records.get(q.id, [])) for q in queries}


def _look(query: QueryInfo, state: QueryState, progress: Progress | None, records: list[BadRecord]) -> QueryLook:
    """``query`` as a wait sees it, from what :func:`looks` read."""
    bad, skipped = None, False
    if query.desired_state == DesiredState.PAUSED:
        bad = next(iter(records), None)
    elif state == QueryState.ERROR:
        # the batch that failed is after the last one committed
        after = progress.batch_id if progress else -1
        failed = [r for r in records if r.status == BadRecordStatus.FAILED and r.batch_id > after]
        bad = failed[-1] if failed else None
        skipped = any(
            r.status == BadRecordStatus.SKIPPED and r.batch_id > after and (r.handled_at or 0) >= query.updated_at
            for r in records
        )
    return QueryLook(
        query.id,
        state,
        query.desired_state,
        first_line(query.error) if query.error else None,
        query.version,
        query.running_version,
        None,
        bad,
        progress.batch_id if progress else None,
        progress.last_batch_at if progress else None,
        skipped,
    )


def doing(catalog: Catalog, query: QueryInfo, lease: dict | None, now: float | None = None) -> str:
    """What the query is doing, in a line (what a wait that timed out says): its state, its
    last batch and when, and its lag in input files (file topics)."""
    seen = look(catalog, query, lease)
    now = now or time.time()
    if seen.last_batch is None or seen.last_batch_at is None:
        batch = "no batch committed yet"
    else:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seen.last_batch_at))
        batch = f"last batch {seen.last_batch} at {at} UTC ({now - seen.last_batch_at:.0f}s ago)"
    parts = [f"{seen.query_id} is {seen.state}", batch]
    if not lag.kafka_sources(catalog, query) and query.desired_state != DesiredState.TERMINATED:
        parts.append(f"{lag.unprocessed_files(catalog, query)} input file(s) not processed")
    if seen.error:
        parts.append(f"last error: {seen.error}")
    return ", ".join(parts)
