"""Snapshots with history and RESTORE (docs/operations.md, "Snapshots and rewinding"):
a snapshot taken while a query runs, retention by count, upgrade snapshots listed, and a
restore that runs the later batches again with every input record in the output once."""
import os

import pytest

from airflow_provider_streamql.errors import NotFoundError, ParseError, StateError
from airflow_provider_streamql.storage.layout import snapshots_of

from .support import insert, stream_rows, table, wait_until

PIPELINE = """
CREATE STREAM src (id INT, v INT);
CREATE STREAM big AS SELECT id, v FROM src WHERE v >= 10;
CREATE TABLE totals AS SELECT id % 2 AS k, COUNT(*) AS n, SUM(v) AS s FROM src GROUP BY id % 2;
"""
IDS = ["CSAS_BIG_1", "CTAS_TOTALS_2"]
FIRST = [(1, 10), (2, 20), (3, 5)]
LATER = [(4, 40), (5, 50), (6, 1)]


def caught_up(engine):
    for query_id in IDS:
        engine.wait_caught_up(query_id, timeout=60)


def expected(rows):
    big = sorted((i, v) for i, v in rows if v >= 10)
    totals = {}
    for i, v in rows:
        n, s = totals.get(i % 2, (0, 0))
        totals[i % 2] = (n + 1, s + v)
    return big, totals


def act(engine, statement, state, *ids):
    """``statement`` (PAUSE/RESUME ...), then wait until each of ``ids`` shows ``state``."""
    engine.execute(statement)
    for q in ids:
        engine.wait_for_state(q, state, timeout=60)


def snapshots(engine, query_id):
    return [r for r in engine.execute("SHOW SNAPSHOTS")[0].rows if r[0] == query_id]


def started(engine, runtimes, rows=FIRST):
    """The pipeline running, ``rows`` processed."""
    engine.execute(PIPELINE)
    runtimes.start(engine)
    insert(engine, "src", rows)
    caught_up(engine)
    return engine


def test_restore_runs_later_batches_again_with_each_record_once(sqlite_engine, runtimes):
    engine = started(sqlite_engine, runtimes)
    taken = {q: engine.execute(f"SNAPSHOT {q}")[0] for q in IDS}
    assert all(r.rows[0][1] == 1 and r.rows[0][2] == "MANUAL" for r in taken.values())
    insert(engine, "src", LATER)
    caught_up(engine)
    assert (stream_rows(engine, "big"), table(engine, "totals")) == expected(FIRST + LATER)

    act(engine, "PAUSE ALL", "PAUSED", *IDS)
    messages = [engine.execute(f"RESTORE {q} TO SNAPSHOT 1")[0].message for q in IDS]
    assert all("output of batches" in m and "taken out (kept with snapshot 2)" in m for m in messages), messages
    # the output of the later batches is gone until they run again, and so is their input count
    assert (stream_rows(engine, "big"), table(engine, "totals")) == expected(FIRST)
    assert engine.progress("CSAS_BIG_1").total_input_rows == len(FIRST)

    act(engine, "RESUME ALL", "RUNNING", *IDS)
    caught_up(engine)
    # every input record once: nothing lost, nothing counted twice
    assert (stream_rows(engine, "big"), table(engine, "totals")) == expected(FIRST + LATER)
    wait_until(lambda: engine.progress("CSAS_BIG_1").total_input_rows == len(FIRST + LATER), 30, "progress")
    kinds = [(r[1], r[2]) for r in snapshots(engine, "CTAS_TOTALS_2")]
    assert kinds == [(1, "MANUAL"), (2, "RESTORE")]


def test_a_restore_can_be_undone_with_the_snapshot_it_took(sqlite_engine, runtimes):
    engine = started(sqlite_engine, runtimes)
    engine.execute("SNAPSHOT CTAS_TOTALS_2")
    insert(engine, "src", LATER)
    caught_up(engine)
    act(engine, "PAUSE CTAS_TOTALS_2", "PAUSED", "CTAS_TOTALS_2")
    engine.execute("RESTORE CTAS_TOTALS_2 TO SNAPSHOT 1")
    assert table(engine, "totals") == expected(FIRST)[1]
    # undone: the checkpoint it replaced comes back, and the output it took out with it
    message = engine.execute("RESTORE CTAS_TOTALS_2 TO SNAPSHOT 2")[0].message
    assert "the output kept with snapshot 2 put back" in message
    assert table(engine, "totals") == expected(FIRST + LATER)[1]
    act(engine, "RESUME CTAS_TOTALS_2", "RUNNING", "CTAS_TOTALS_2")
    insert(engine, "src", [(8, 100)])
    caught_up(engine)
    assert table(engine, "totals") == expected(FIRST + LATER + [(8, 100)])[1]


def test_retention_keeps_the_newest_snapshots(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    folders = snapshots_of(engine.query("CSAS_BIG_1").checkpoint)
    for rows in ([(1, 10)], [(2, 20)], [(3, 30)]):
        insert(engine, "src", rows)
        caught_up(engine)
        result = engine.execute("SNAPSHOT CSAS_BIG_1 WITH (keep = 2)")[0]
    assert "removed snapshot(s) 1" in result.message
    kept = snapshots(engine, "CSAS_BIG_1")
    assert [r[1] for r in kept] == [2, 3] and kept[0][4] < kept[1][4]  # later batch, later snapshot
    assert sorted(os.listdir(folders)) == ["s0002", "s0003"]
    # dropped with its data: the snapshots go too, record and folder
    act(engine, "TERMINATE CSAS_BIG_1", "TERMINATED", "CSAS_BIG_1")
    engine.execute("DROP STREAM big DELETE TOPIC")
    assert snapshots(engine, "CSAS_BIG_1") == [] and not os.path.exists(folders)


def test_an_in_place_upgrade_is_listed_and_restorable(sqlite_engine, runtimes):
    engine = started(sqlite_engine, runtimes)
    engine.execute("CREATE OR REPLACE STREAM big AS SELECT id, v FROM src WHERE v >= 15")
    engine.wait_for_version("CSAS_BIG_1", 2, timeout=60)
    upgrade = snapshots(engine, "CSAS_BIG_1")
    assert [(r[1], r[2], r[3]) for r in upgrade] == [(1, "UPGRADE", 1)]
    insert(engine, "src", LATER)
    caught_up(engine)
    act(engine, "PAUSE CSAS_BIG_1", "PAUSED", "CSAS_BIG_1")
    engine.execute("RESTORE CSAS_BIG_1 TO SNAPSHOT 1")  # version 2 replaced 1 in place
    act(engine, "RESUME CSAS_BIG_1", "RUNNING", "CSAS_BIG_1")
    caught_up(engine)
    # FIRST's output stays as version 1 wrote it; LATER runs again under version 2
    assert stream_rows(engine, "big") == [(1, 10), (2, 20), (4, 40), (5, 50)]


@pytest.mark.parametrize("statement, error, words", [
    ("RESTORE CSAS_BIG_1 TO SNAPSHOT 1", StateError, "PAUSE it and wait until it is PAUSED"),
    ("SNAPSHOT CSAS_NONE_9", NotFoundError, "no query 'CSAS_NONE_9'"),
    ("RESTORE CSAS_NONE_9 TO SNAPSHOT 1", NotFoundError, "no query 'CSAS_NONE_9'"),
    ("SNAPSHOT CSAS_BIG_1 WITH (keep = 0)", ParseError, "keep must be a whole number"),
    ("SNAPSHOT CSAS_BIG_1 WITH (path = '/tmp')", ParseError, "unknown property 'path'"),
    ("RESTORE CSAS_BIG_1 TO SNAPSHOT '../../x'", ParseError, "expected a whole number from 1 to"),
    ("SNAPSHOT CSAS_BIG_1", StateError, "has committed no batch yet"),
])
def test_bad_snapshot_statements_change_nothing(sqlite_engine, statement, error, words):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    with pytest.raises(error, match=words):
        engine.execute(statement)
    assert engine.execute("SHOW SNAPSHOTS")[0].rows == []


def test_restore_of_a_missing_snapshot_names_the_ones_there_are(sqlite_engine, runtimes):
    engine = started(sqlite_engine, runtimes)
    engine.execute("SNAPSHOT CSAS_BIG_1")
    act(engine, "PAUSE CSAS_BIG_1", "PAUSED", "CSAS_BIG_1")
    with pytest.raises(StateError, match=r"has no snapshot 7 \(its snapshots: 1\)"):
        engine.execute("RESTORE CSAS_BIG_1 TO SNAPSHOT 7")


def test_a_restore_that_fails_midway_changes_nothing(sqlite_engine, runtimes, monkeypatch):
    """A disk that fails while the snapshot is copied in (injected: the tests run as root,
    so no permission can make the copy fail): the checkpoint, the sink and the catalog are
    as before, and the query resumes where it was."""
    import shutil

    from airflow_provider_streamql.errors import StreamQLError
    from airflow_provider_streamql.planner import snapshots as planner_snapshots
    from airflow_provider_streamql.storage.checkpoints import last_committed_batch

    engine = started(sqlite_engine, runtimes)
    engine.execute("SNAPSHOT CTAS_TOTALS_2")
    insert(engine, "src", LATER)
    caught_up(engine)
    act(engine, "PAUSE CTAS_TOTALS_2", "PAUSED", "CTAS_TOTALS_2")
    checkpoint = engine.query("CTAS_TOTALS_2").checkpoint
    before = (last_committed_batch(checkpoint), table(engine, "totals"), snapshots(engine, "CTAS_TOTALS_2"))

    copytree = shutil.copytree

    def failing_copytree(source, target, *args, **kwargs):
        copytree(source, target, *args, **kwargs)
        if target == checkpoint:
            raise OSError(28, "No space left on device", target)

    monkeypatch.setattr(planner_snapshots.shutil, "copytree", failing_copytree)
    with pytest.raises(StreamQLError, match="No space left on device"):
        engine.execute("RESTORE CTAS_TOTALS_2 TO SNAPSHOT 1")
    monkeypatch.undo()
    assert (last_committed_batch(checkpoint), table(engine, "totals"), snapshots(engine, "CTAS_TOTALS_2")) == before
    assert not [n for n in os.listdir(os.path.dirname(checkpoint)) if n.startswith(".")]  # nothing left aside
    act(engine, "RESUME CTAS_TOTALS_2", "RUNNING", "CTAS_TOTALS_2")
    insert(engine, "src", [(8, 100)])
    caught_up(engine)
    assert table(engine, "totals") == expected(FIRST + LATER + [(8, 100)])[1]
