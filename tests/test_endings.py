"""The one decision every wait takes (views/endings.py ``stopped``): whether a query a wait has
not seen get there can no longer get there on its own, and why; a line per case. What a wait reads of
the catalog to decide it (views/waits.py ``looks``), for many queries at once, is at the end;
the waits themselves, on a real runtime, are in test_waits.py."""
from __future__ import annotations

import time
from dataclasses import replace

import pytest
from sqlalchemy import event

from airflow_provider_streamql.catalog import BadRecord, BadRecordStatus, DesiredState, Progress, QueryState
from airflow_provider_streamql.conditions import QueriesInState
from airflow_provider_streamql.errors import NotFoundError
from airflow_provider_streamql.views.endings import stopped
from airflow_provider_streamql.views.waits import QueryLook, look, looks

RUNNING = QueryLook("CSAS_O_1", QueryState.RUNNING, DesiredState.RUNNING, None, 2, 2, None, None, 4, 1.0e9)
ON_RECORD = BadRecord("CSAS_O_1", "r1", 5, "O", "/t/o/part-5.json", 51, "{", "malformed JSON: {",
                      BadRecordStatus.FAILED)
HOLDING = replace(ON_RECORD, status=BadRecordStatus.PENDING)
ERROR = replace(RUNNING, state=QueryState.ERROR, error="boom")


def seen_as(**changes) -> QueryLook:
    return replace(RUNNING, **changes)


# (what the wait sees, through retries, awaited states, the stop or None, fragments of the message)
CASES = [
    (RUNNING, False, (), None, []),
    (seen_as(state=QueryState.STARTING, error="boom"), False, (), None, []),  # a retry starting
    (ERROR, False, (), "ERROR", ["query CSAS_O_1 is in ERROR while waiting for X: boom; ", "--through-retries"]),
    (ERROR, True, (), None, []),
    (replace(ERROR, bad_record=ON_RECORD, error="malformed JSON: {"), False, (), "ERROR",
     [": malformed JSON: { (at /t/o/part-5.json:51); every retry fails on it again: RESUME CSAS_O_1 SKIP BAD "
      "RECORDS sends it to the dead-letter stream", "on_error='PAUSE'"]),
    (replace(ERROR, skipped=True), False, (), None, []),  # its record was just skipped: it starts again past it
    (replace(ERROR, running_version=1), False, (), None, []),  # the ERROR of the version replaced
    (replace(ERROR, desired=DesiredState.PAUSED), False, (), None, []),  # the runtime pauses it next
    (seen_as(desired=DesiredState.TERMINATED), False, (), "TERMINATED",
     ["query CSAS_O_1 was terminated while waiting for X; a terminated query does not run again"]),
    (seen_as(desired=DesiredState.TERMINATED), True, (), "TERMINATED", []),
    (seen_as(desired=DesiredState.TERMINATED), False, ("TERMINATED",), None, []),
    (replace(ERROR, desired=DesiredState.TERMINATED), False, ("TERMINATED",), None, []),
    (seen_as(desired=DesiredState.PAUSED, state=QueryState.PAUSED, bad_record=HOLDING), False, (), "HELD",
     ["is held (PAUSED) at a bad record while waiting for X: malformed JSON: { (at /t/o/part-5.json:51); "
      "RESUME CSAS_O_1 SKIP BAD RECORDS"]),
    (seen_as(desired=DesiredState.PAUSED, state=QueryState.PAUSED, bad_record=HOLDING), True, (), "HELD", []),
    (seen_as(desired=DesiredState.PAUSED, state=QueryState.PAUSED), False, (), None, []),  # someone paused it
    (seen_as(version=1, running_version=1, rolled_back=(2, "CAST failed")), False, (), "ROLLED_BACK",
     ["version 2 of CSAS_O_1 was rolled back while waiting for X: CAST failed; the runtime runs version 1 again"]),
    (seen_as(version=1, running_version=1, rolled_back=(2, None)), True, (), "ROLLED_BACK", []),
]


@pytest.mark.parametrize(("seen", "through_retries", "awaited", "stop", "said"), CASES)
def test_what_stops_a_wait(seen, through_retries, awaited, stop, said):
    decided = stopped(seen, through_retries=through_retries, awaited=awaited)
    assert (decided.stop if decided else None) == stop
    for fragment in said:
        assert fragment in decided.message("X"), decided.message("X")


# -- what a wait reads: every query of a wait in the same few reads ----------------------------

WORLD = "CREATE STREAM src (id INT, v DOUBLE);" + "".join(
    f"CREATE STREAM o{i} AS SELECT * FROM src WHERE id % 5 = {i};" for i in range(5))
#: (query, what happened to it, then as the wait sees it: state, held, failing, its bad record, skipped)
SEEN = [
    (0, "running, batch 4 committed", QueryState.RUNNING, False, False, None, False),
    (1, "held at a bad record", QueryState.PAUSED, True, False, "held", False),
    (2, "failed on a record after its last commit", QueryState.ERROR, False, True, "failed-5", False),
    (3, "failed on a record since skipped", QueryState.ERROR, False, False, "failed-5", True),
    (4, "failed; its bad record was before its last commit", QueryState.ERROR, False, True, None, False),
]


def _bad(query_id: str, record_id: str, batch: int, status: BadRecordStatus, handled_at: float | None = None):
    return BadRecord(query_id, record_id, batch, "SRC", "/t/src/f.json", 1, "{", "malformed JSON: {", status,
                     handled_at=handled_at)


@pytest.fixture
def wait_world(engine):
    """Five queries, one per way a wait reads a query's progress and bad records."""
    ids = [r.query_id for r in engine.execute(WORLD) if r.query_id]
    catalog = engine.catalog
    catalog.runtimes.heartbeat("rt-1", "default", "worker-1", 7)  # a live runtime runs them all
    epochs = {q: catalog.leases.acquire(q, "rt-1", 30.0) for q in ids}
    for q in ids:
        catalog.observed.record_progress(Progress(q, 4, 1, 5, 1.0, [], 1.0e9))
    catalog.observed.set(ids[0], QueryState.RUNNING, runtime_id="rt-1", epoch=epochs[ids[0]])
    catalog.bad_records.hold(ids[1], [_bad(ids[1], "held", 5, BadRecordStatus.PENDING)], "held",
                             runtime_id="rt-1", epoch=epochs[ids[1]])
    for q in ids[2:]:
        catalog.observed.set(q, QueryState.ERROR, "boom", runtime_id="rt-1", epoch=epochs[q])
    catalog.bad_records.record([_bad(ids[2], "failed-5", 5, BadRecordStatus.FAILED),
                                _bad(ids[3], "failed-5", 5, BadRecordStatus.FAILED),
                                _bad(ids[3], "skipped-5", 5, BadRecordStatus.SKIPPED, handled_at=time.time() + 60),
                                _bad(ids[4], "failed-3", 3, BadRecordStatus.FAILED)])
    return engine, ids


@pytest.mark.parametrize(("i", "what", "state", "held", "failing", "record", "skipped"), SEEN,
                         ids=[case[1] for case in SEEN])
def test_a_wait_sees_each_query_as_it_stands(wait_world, i, what, state, held, failing, record, skipped):
    engine, ids = wait_world
    queries = engine.catalog.queries(ids=ids)
    seen = looks(engine.catalog, queries, engine.catalog.leases.holders())[ids[i]]
    assert (seen.state, seen.held, seen.failing, seen.skipped, seen.last_batch) == (state, held, failing, skipped, 4)
    assert (seen.bad_record.record_id if seen.bad_record else None) == record
    assert seen == look(engine.catalog, queries[i], engine.catalog.leases.holders().get(ids[i]))


def test_a_wait_on_many_queries_reads_them_in_as_many_reads_as_one(wait_world):
    engine, ids = wait_world
    statements: list[str] = []
    event.listen(engine.catalog.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    reads = []
    for awaited in (ids[:1], ids[2:3], ids):  # every kind of read in the last
        statements.clear()
        check = QueriesInState(awaited, ["PAUSED"], through_retries=True).check(engine)
        assert not check.done
        reads.append(sum(1 for s in statements if s.lstrip().upper().startswith("SELECT")))
    assert reads[0] <= reads[1] == reads[2], reads
    with pytest.raises(NotFoundError, match="no query 'CSAS_GONE_7'"):
        QueriesInState([*ids, "CSAS_GONE_7"], ["PAUSED"]).check(engine)
