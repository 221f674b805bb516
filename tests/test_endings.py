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
    f"CREATE STREAM o{i} AS SELECT * FROM src WHERE id % 9 = {i};" for i in range(9))
#: (query, what happened to it, then as the wait sees it: state, held, failing, its bad record,
#: skipped, last batch); every query but the last committed batch 4
SEEN = [
    (0, "running", QueryState.RUNNING, False, False, None, False, 4),
    (1, "held at a bad record", QueryState.PAUSED, True, False, "held", False, 4),
    (2, "failed on a record after its last commit", QueryState.ERROR, False, True, "failed-5", False, 4),
    (3, "failed on a record since skipped", QueryState.ERROR, False, False, "failed-5", True, 4),
    (4, "failed; its bad record was before its last commit", QueryState.ERROR, False, True, None, False, 4),
    (5, "failed twice, a record skipped before its error between", QueryState.ERROR, False, True, "failed-7", False, 4),
    (6, "paused by someone while in ERROR on a record", QueryState.ERROR, False, False, None, False, 4),
    (7, "held at two records: the first", QueryState.PAUSED, True, False, "held-a", False, 4),
    (8, "failed in its first batch", QueryState.ERROR, False, True, "failed-0", False, None),
]


def _bad(query_id: str, record_id: str, batch: int, status: BadRecordStatus, handled_at: float | None = None):
    return BadRecord(query_id, record_id, batch, "SRC", "/t/src/f.json", 1, "{", "malformed JSON: {", status,
                     handled_at=handled_at)


@pytest.fixture
def wait_world(engine):
    """Nine queries, one per way a wait reads a query's progress and bad records (SEEN)."""
    ids = [r.query_id for r in engine.execute(WORLD) if r.query_id]
    catalog = engine.catalog
    catalog.runtimes.heartbeat("rt-1", "default", "worker-1", 7)  # a live runtime runs them all
    epochs = {q: catalog.leases.acquire(q, "rt-1", 30.0) for q in ids}
    for q in ids[:-1]:
        catalog.observed.record_progress(Progress(q, 4, 1, 5, 1.0, [], 1.0e9))
    catalog.observed.set(ids[0], QueryState.RUNNING, runtime_id="rt-1", epoch=epochs[ids[0]])
    for i, held in ((1, ["held"]), (7, ["held-a", "held-b"])):
        catalog.bad_records.hold(ids[i], [_bad(ids[i], r, 5, BadRecordStatus.PENDING) for r in held], "held",
                                 runtime_id="rt-1", epoch=epochs[ids[i]])
    for q in [*ids[2:7], ids[8]]:
        catalog.observed.set(q, QueryState.ERROR, "boom", runtime_id="rt-1", epoch=epochs[q])
    engine.execute(f"PAUSE {ids[6]}")
    catalog.bad_records.record([_bad(ids[2], "failed-5", 5, BadRecordStatus.FAILED),
                                _bad(ids[3], "failed-5", 5, BadRecordStatus.FAILED),
                                _bad(ids[3], "skipped-5", 5, BadRecordStatus.SKIPPED, handled_at=time.time() + 60),
                                _bad(ids[4], "failed-3", 3, BadRecordStatus.FAILED),
                                _bad(ids[5], "failed-5", 5, BadRecordStatus.FAILED),
                                _bad(ids[5], "skipped-6", 6, BadRecordStatus.SKIPPED, handled_at=1.0),
                                _bad(ids[5], "failed-7", 7, BadRecordStatus.FAILED),
                                _bad(ids[6], "failed-5", 5, BadRecordStatus.FAILED),
                                _bad(ids[8], "failed-0", 0, BadRecordStatus.FAILED)])
    return engine, ids


@pytest.mark.parametrize(("i", "what", "state", "held", "failing", "record", "skipped", "last_batch"), SEEN,
                         ids=[case[1] for case in SEEN])
def test_a_wait_sees_each_query_as_it_stands(wait_world, i, what, state, held, failing, record, skipped,
                                             last_batch):
    engine, ids = wait_world
    queries, leases = engine.catalog.queries(ids=ids), engine.catalog.leases.holders()
    together = looks(engine.catalog, queries, leases)[ids[i]]  # as a wait on all of them reads it
    alone = look(engine.catalog, queries[i], leases.get(ids[i]))  # as a wait on it alone
    for seen in (together, alone):
        assert (seen.state, seen.held, seen.failing, seen.skipped) == (state, held, failing, skipped)
        assert (seen.bad_record.record_id if seen.bad_record else None, seen.last_batch) == (record, last_batch)


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


@pytest.mark.parametrize(("awaited", "error"), [
    (lambda ids: [*ids, "CSAS_GONE_7", "CSAS_GONE_8"], "no query 'CSAS_GONE_7'"),  # the first unknown is named
    (lambda ids: ["CSAS_GONE_8", *ids], "no query 'CSAS_GONE_8'"),
    (lambda ids: [ids[0].lower(), ids[0]], None),  # any letter case, twice: the one query
])
def test_a_wait_on_queries_names_the_first_it_cannot_find(wait_world, awaited, error):
    engine, ids = wait_world
    wait = QueriesInState(awaited(ids), ["RUNNING"])
    if error is None:
        assert wait.check(engine).done
    else:
        with pytest.raises(NotFoundError, match=error):
            wait.check(engine)


@pytest.mark.parametrize(("waits", "grouped"), [
    ([("CSAS_A_1", "PAUSED"), ("CSAS_B_2", "PAUSED")], [(["CSAS_A_1", "CSAS_B_2"], ["PAUSED"])]),  # PAUSE ALL
    ([("CSAS_A_1", "RUNNING"), ("CSAS_B_2", "PAUSED"), ("CSAS_C_3", "RUNNING")],
     [(["CSAS_A_1", "CSAS_C_3"], ["RUNNING"]), (["CSAS_B_2"], ["PAUSED"])]),
    ([], []),
])
def test_a_script_is_waited_on_with_one_wait_per_state(waits, grouped):
    # exec --wait and the deploy operators: each look reads a state's queries together
    assert [(w.query_ids, w.states) for w in QueriesInState.by_state(waits)] == grouped
