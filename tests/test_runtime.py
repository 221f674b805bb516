"""KLIP-63's test plan against real runtimes on the shared local SparkSession."""
import pytest

from airflow_provider_streamql.errors import StateError
from airflow_provider_streamql.storage.checkpoints import last_committed_batch

from .support import insert, reconcile_passes, spark_streams, stream_rows, table, wait_until

PIPELINE = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
CREATE TABLE stats AS SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM purchases GROUP BY user;
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
"""
FIRST = [(1, "ann", 5.0), (2, "bob", -1.0), (3, "ann", 2.5)]
LATER = [(4, "bob", 10.0), (5, "cat", 1.0), (6, "ann", 0.5)]


def expected_stats(rows):
    out = {}
    for _id, user, cost in rows:
        n, total = out.get(user, (0, 0.0))
        out[user] = (n + 1, total + cost)
    return out


def caught_up(engine, *query_ids):
    for query_id in query_ids:
        engine.wait_caught_up(query_id, timeout=60)


def test_a_statement_is_acted_on_at_once_not_at_the_next_pass(engine, runtimes):
    """Both backends: a runtime whose passes are an hour apart still pauses and resumes a
    query at once: between passes it looks for a new statement every 5 ms (a read on
    SQLite; on PostgreSQL a look for the statement's announcement, then a read; that it is
    the announcement that wakes it, and not the read once a second, is
    test_catalog.py's test_on_postgresql_a_look_reads_only_once_a_statement_was_announced)."""
    engine.execute("CREATE STREAM purchases (id INT KEY, cost DOUBLE); CREATE STREAM valid AS SELECT * FROM purchases;")
    runtime = runtimes.start(engine, interval=3600)
    wait_until(lambda: "CSAS_VALID_1" in runtime.active, 60, "the query started by the first pass")
    engine.execute("PAUSE CSAS_VALID_1")
    engine.wait_for_state("CSAS_VALID_1", "PAUSED", timeout=60)
    engine.execute("RESUME CSAS_VALID_1")
    wait_until(lambda: "CSAS_VALID_1" in runtime.active, 60, "the query started again")


def test_pause_and_resume_lose_nothing_and_count_nothing_twice(engine, runtimes):
    """Both backends: PAUSE is observed, a paused query processes nothing while the other
    query on the same stream goes on, and RESUME continues from the checkpoint."""
    engine.execute(PIPELINE)
    insert(engine, "purchases", FIRST)
    runtime = runtimes.start(engine)
    engine.wait_for_state("CTAS_STATS_1", "RUNNING")
    caught_up(engine, "CTAS_STATS_1", "CSAS_VALID_2")
    assert table(engine, "stats") == expected_stats(FIRST)

    engine.execute("PAUSE CTAS_STATS_1")
    engine.wait_for_state("CTAS_STATS_1", "PAUSED", timeout=30)
    stats_query = engine.query("CTAS_STATS_1")
    assert (stats_query.desired_state, stats_query.observed_state) == ("PAUSED", "PAUSED")
    committed = last_committed_batch(stats_query.checkpoint)

    insert(engine, "purchases", LATER)
    caught_up(engine, "CSAS_VALID_2")  # the other query on the same stream keeps going
    assert engine.state("CSAS_VALID_2") == "RUNNING"
    assert [r[0] for r in stream_rows(engine, "valid")] == [1, 3, 4, 5, 6]
    # several reconcile passes over the paused query since its input arrived, and no
    # streaming query of it in the session: nothing ran it, nor can run it now
    reconcile_passes(engine, runtime.id, passes=3)
    assert "CTAS_STATS_1" not in runtime.active and not spark_streams(runtimes.spark, "CTAS_STATS_1")
    assert table(engine, "stats") == expected_stats(FIRST)
    assert last_committed_batch(stats_query.checkpoint) == committed

    engine.execute("RESUME CTAS_STATS_1")
    engine.wait_for_state("CTAS_STATS_1", "RUNNING")
    caught_up(engine, "CTAS_STATS_1")
    assert table(engine, "stats") == expected_stats(FIRST + LATER)
    # the listener reports asynchronously after the commit
    wait_until(lambda: getattr(engine.progress("CTAS_STATS_1"), "batch_id", -1) > committed,
               what="progress of the resumed query")
    assert engine.progress("CTAS_STATS_1").total_input_rows == len(FIRST + LATER)


def test_pausing_a_query_in_one_runtime_leaves_another_runtime_running(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE)")
    engine.execute("CREATE STREAM a AS SELECT * FROM purchases", pipeline="one")
    engine.execute("CREATE STREAM b AS SELECT * FROM purchases", pipeline="two")
    one, two = runtimes.start(engine, "one"), runtimes.start(engine, "two")
    insert(engine, "purchases", FIRST)
    caught_up(engine, "CSAS_A_1", "CSAS_B_2")
    # a runtime holds a query once its dead-letter companion has started too, which may be
    # after the query's first batch committed
    wait_until(lambda: set(one.active) == {"CSAS_A_1"} and set(two.active) == {"CSAS_B_2"}, 30,
               "each runtime to hold its own pipeline's query")

    engine.execute("PAUSE ALL", pipeline="one")
    engine.wait_for_state("CSAS_A_1", "PAUSED")
    insert(engine, "purchases", LATER)
    caught_up(engine, "CSAS_B_2")
    assert len(stream_rows(engine, "b")) == 6
    assert len(stream_rows(engine, "a")) == 3
    assert engine.state("CSAS_B_2") == "RUNNING"

    engine.execute("RESUME CSAS_A_1")
    caught_up(engine, "CSAS_A_1")
    assert stream_rows(engine, "a") == stream_rows(engine, "b")


def test_pause_all_resume_all_terminate_all(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    ids = ["CTAS_STATS_1", "CSAS_VALID_2"]
    engine.wait_for_results(engine.execute("PAUSE ALL"), timeout=60)
    assert [engine.state(i) for i in ids] == ["PAUSED", "PAUSED"]
    engine.wait_for_results(engine.execute("RESUME ALL"), timeout=60)
    assert [engine.state(i) for i in ids] == ["RUNNING", "RUNNING"]
    insert(engine, "purchases", FIRST)
    caught_up(engine, *ids)
    engine.wait_for_results(engine.execute("TERMINATE ALL"), timeout=60)
    assert [engine.state(i) for i in ids] == ["TERMINATED", "TERMINATED"]
    assert not [q for q in runtimes.spark.streams.active if q.name in ids]
    with pytest.raises(StateError, match="terminated and cannot be resumed"):
        engine.execute("RESUME CTAS_STATS_1")
    assert table(engine, "stats") == expected_stats(FIRST)  # output stays readable


def test_two_runtimes_of_one_pipeline_never_run_the_same_query(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE + "CREATE STREAM big AS SELECT * FROM purchases WHERE cost > 4;")
    ids = {"CTAS_STATS_1", "CSAS_VALID_2", "CSAS_BIG_3"}
    first, second = runtimes.start(engine), runtimes.start(engine)
    overlaps = []

    def all_running_once():
        overlaps.append(set(first.active) & set(second.active))
        return set(first.active) | set(second.active) == ids and \
            all(engine.state(i) == "RUNNING" for i in ids)
    wait_until(all_running_once, what="every query running in exactly one runtime")
    # then while each runtime goes through several passes over every query (and would
    # start any whose lease it could take)
    sample = lambda: overlaps.append(set(first.active) & set(second.active))
    reconcile_passes(engine, first.id, passes=3, also=sample)
    reconcile_passes(engine, second.id, passes=3, also=sample)
    assert not any(overlaps)

    runtimes.stop(first)  # its queries move to the other runtime, from their checkpoints
    wait_until(lambda: set(second.active) == ids, what="the second runtime taking over")
    insert(engine, "purchases", FIRST)
    caught_up(engine, *ids)
    assert table(engine, "stats") == expected_stats(FIRST)

    # A runtime whose lease is taken (fenced by a newer epoch) stops that query.
    engine.catalog.leases.release("CSAS_BIG_3", second.id)
    assert engine.catalog.leases.acquire("CSAS_BIG_3", "intruder", 60) is not None
    wait_until(lambda: "CSAS_BIG_3" not in second.active, what="the fenced query to stop")
    assert not [q for q in runtimes.spark.streams.active if q.name == "CSAS_BIG_3"]


def test_cascading_pipeline_and_second_writer(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
        CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
        CREATE TABLE spend AS SELECT user, SUM(cost) AS total FROM valid GROUP BY user;
        CREATE STREAM refunds (id INT KEY, user STRING, cost DOUBLE);
        INSERT INTO refunds SELECT id, user, -cost AS cost FROM purchases WHERE cost < 0;
    """)
    runtimes.start(engine)
    insert(engine, "purchases", FIRST + LATER)
    caught_up(engine, "CSAS_VALID_1", "INSERTQUERY_3")
    caught_up(engine, "CTAS_SPEND_2")  # after its source stream has caught up
    assert table(engine, "spend") == {"ann": (8.0,), "bob": (10.0,), "cat": (1.0,)}
    assert stream_rows(engine, "refunds") == [(2, "bob", 1.0)]


def test_a_failing_query_reports_error_and_others_keep_running(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
        CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
        CREATE STREAM numeric_users AS SELECT id, CAST(user AS INT) AS uid FROM purchases;
    """)
    runtimes.start(engine)
    insert(engine, "purchases", FIRST)
    engine.wait_for_state("CSAS_NUMERIC_USERS_2", "ERROR", timeout=60)
    error = engine.query("CSAS_NUMERIC_USERS_2").error
    assert "CAST_INVALID_INPUT" in error or "ann" in error
    caught_up(engine, "CSAS_VALID_1")
    assert engine.state("CSAS_VALID_1") == "RUNNING"
    shown = {r["query_id"]: r for r in engine.queries()}
    assert shown["CSAS_NUMERIC_USERS_2"]["state"] == "ERROR" and shown["CSAS_NUMERIC_USERS_2"]["error"]


def test_a_query_frame_is_built_again_only_when_what_it_runs_changed(spark, sqlite_engine):
    """RESUME restarts the frame a query ran (runtime/connectors.py Frames) unless its error
    policy, skipped records, sources or version changed since it was built."""
    from airflow_provider_streamql.runtime.badrecords import RecordGuard
    from airflow_provider_streamql.runtime.connectors import Frames
    from airflow_provider_streamql.runtime.evolution import source_evolution
    engine = sqlite_engine
    engine.execute("CREATE STREAM s (id INT, v DOUBLE); CREATE STREAM o AS SELECT * FROM s WHERE v > 0")
    query, frames = engine.query("CSAS_O_1"), Frames()

    def frame(guard, query=query):
        with source_evolution(spark, bool(query.plan.source_names)):  # as a start builds it
            return frames.frame(spark, query, query.plan, {"S": engine.catalog.source("S")}, guard)[0]

    first = frame(RecordGuard(query.id, "FAIL"))
    assert frame(RecordGuard(query.id, "FAIL")) is first  # a plain RESUME
    skipping = frame(RecordGuard(query.id, "FAIL", frozenset({"a1b2"})))  # RESUME ... SKIP BAD RECORDS
    assert skipping is not first
    assert frame(RecordGuard(query.id, "LOG_AND_CONTINUE")) not in (first, skipping)
    kept = frame(RecordGuard(query.id, "FAIL"))
    engine.execute("ALTER STREAM s ADD COLUMN w INT")  # the source read now has another column
    before = frame(RecordGuard(query.id, "FAIL"))
    assert before is not kept and frame(RecordGuard(query.id, "FAIL")) is before
    engine.execute("CREATE OR REPLACE STREAM o AS SELECT * FROM s WHERE v > 1")
    assert frame(RecordGuard(query.id, "FAIL"), engine.query("CSAS_O_1")) is not before  # version 2


def test_a_source_folder_replaced_by_a_link_while_paused_is_refused_at_resume(sqlite_engine, runtimes, tmp_path):
    """RESUME starts a query on the frame it ran before, built when the source's folder was
    checked; the folder is checked again at every start, so one replaced by a link to a
    folder outside the layout is refused, and nothing there is read."""
    import os
    import shutil

    engine = sqlite_engine
    engine.execute("CREATE STREAM s (id INT, v DOUBLE); CREATE STREAM o AS SELECT * FROM s WHERE v > 0")
    runtimes.start(engine)
    insert(engine, "s", [(1, 1.0)])
    caught_up(engine, "CSAS_O_1")
    engine.execute("PAUSE CSAS_O_1")
    engine.wait_for_state("CSAS_O_1", "PAUSED", timeout=60)
    folder, outside = engine.catalog.source("S").path, tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text('{"id": 99, "v": 9.0}\n')
    shutil.rmtree(folder)
    os.symlink(outside, folder)
    engine.execute("RESUME CSAS_O_1")
    wait_until(lambda: "is a link to" in (engine.query("CSAS_O_1").error or ""), 60, "the link refused")
    assert [tuple(r) for r in stream_rows(engine, "o")] == [(1, 1.0)]


def test_a_query_stopped_while_writing_its_first_offsets_resumes(sqlite_engine, runtimes):
    """A stop can interrupt Spark writing offsets/0 and leave its temp file; Spark refuses
    to start a stateful query whose offsets/ holds a file and no batch. The runtime removes
    what the interrupted write left before it starts the query again."""
    import os

    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    engine.wait_for_state("CTAS_STATS_1", "RUNNING", timeout=120)
    engine.execute("PAUSE CTAS_STATS_1")
    engine.wait_for_state("CTAS_STATS_1", "PAUSED", timeout=60)
    offsets = os.path.join(engine.query("CTAS_STATS_1").checkpoint, "offsets")
    os.makedirs(offsets, exist_ok=True)
    left = [".0.6dd1a371-a690-40db-a7ac-20f118ad62dd.tmp", "..0.6dd1a371-a690-40db-a7ac-20f118ad62dd.tmp.crc"]
    for name in left:  # what the interrupted write of offsets/0 left (seen in a CI run)
        open(os.path.join(offsets, name), "w").close()
    engine.execute("RESUME CTAS_STATS_1")
    insert(engine, "purchases", FIRST)
    caught_up(engine, "CTAS_STATS_1")
    assert engine.state("CTAS_STATS_1") == "RUNNING"
    assert table(engine, "stats") == expected_stats(FIRST)
    assert not set(left) & set(os.listdir(offsets))
