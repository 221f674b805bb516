"""A status you can trust, on a real runtime: a query failing and retried shows ERROR with the
attempt that comes next and when, then RETRYING with its last error kept while it runs the
batch it failed in again, never RUNNING with no error while it fails; a skip moves it on."""
from __future__ import annotations

import json
import re
import threading

from airflow_provider_streamql.cli import main

from .support import wait_until
from .test_bad_records import MALFORMED, PAYMENTS, good, produce, start

QUERY = "CSAS_COPY_1"


def row(engine) -> dict:
    return next(r for r in engine.queries() if r["query_id"] == QUERY)


def test_a_failing_query_shows_its_retries_until_a_batch_commits(sqlite_engine, home, runtimes, capsys):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='FAIL') AS SELECT * FROM payments;")
    start(engine, runtimes, QUERY)
    produce(engine, "payments", [good(1), MALFORMED, good(2)], "a.json")

    seen: list[dict] = []

    def failed_three_times() -> bool:
        seen.append(row(engine))
        return bool(seen[-1]["retry"]) and seen[-1]["retry"].startswith("attempt 4")

    wait_until(failed_three_times, 120, "three failures in a row")
    failing = seen[next(i for i, r in enumerate(seen) if r["state"] == "ERROR"):]
    assert "RUNNING" not in {r["state"] for r in failing}  # it never looks healthy while it fails
    assert all("cannot read a record of PAYMENTS" in r["error"] for r in failing)  # the last error is kept
    retries = {r["retry"] for r in failing if r["state"] == "ERROR"}
    assert {re.sub(r" at .*", "", r) for r in retries} >= {"attempt 2", "attempt 3", "attempt 4"}
    assert all(re.fullmatch(r"attempt \d at \d\d:\d\d:\d\d UTC \(in \d+s\)", r) for r in retries)

    wait_until(lambda: row(engine)["state"] == "RETRYING", 120, "a retry running")
    retrying = row(engine)
    assert retrying["retry"].endswith("running") and "cannot read a record" in retrying["error"]
    wait_until(lambda: row(engine)["state"] == "ERROR", 120, "the retry failing again")

    # what SHOW QUERIES EXTENDED, EXPLAIN and `streamql queries` print of it
    where = ["--home", home, "--catalog", engine.catalog.url]
    assert main(["queries", *where]) == 0
    out = capsys.readouterr().out
    assert re.search(r"CSAS_COPY_1 .*ERROR.*attempt \d at \d\d:\d\d:\d\d UTC", out), out
    assert "Retry                : attempt" in engine.execute("SHOW QUERIES EXTENDED")[0].message
    explained = dict(engine.execute(f"EXPLAIN {QUERY}")[0].rows)
    assert explained["retry"].startswith("attempt")

    engine.execute(f"RESUME {QUERY} SKIP BAD RECORDS")
    engine.wait_caught_up(QUERY, timeout=90)
    wait_until(lambda: engine.query(QUERY).observed_state == "RUNNING", 60, "the runtime to write RUNNING")
    ran_on = row(engine)
    assert (ran_on["state"], ran_on["error"], ran_on["retry"]) == ("RUNNING", None, None)


def test_a_paused_query_shows_no_rate_and_its_lag_in_files_and_records(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy AS SELECT * FROM payments;")
    start(engine, runtimes, QUERY)
    produce(engine, "payments", [good(i) for i in range(1, 4)], "a.json")
    engine.wait_caught_up(QUERY, timeout=90)
    wait_until(lambda: row(engine)["rows_per_sec"] is not None, 60, "the rate of its batch")
    assert (row(engine)["lag_files"], row(engine)["lag_records"]) == (0, 0)

    engine.execute(f"PAUSE {QUERY}")
    engine.wait_for_state(QUERY, "PAUSED", timeout=60)
    produce(engine, "payments", [good(i) for i in range(4, 9)], "b.json")
    produce(engine, "payments", [good(9)], "c.json")
    paused = row(engine)
    assert (paused["rows_per_sec"], paused["lag_files"], paused["lag_records"]) == (None, 2, 6)
    # over time (the page's chart): none after its batch, two files of six records now
    *after_batches, now = engine.lag_history(QUERY)
    assert after_batches and {(p.files, p.records) for p in after_batches} == {(0, 0)}
    assert (now.batch_id, now.files, now.records) == (None, 2, 6)


def _hold_every_task_slot(spark, flag: str) -> threading.Thread:
    """A Spark job whose tasks take every task slot of the shared local[2] session until
    ``flag`` is removed: the streaming query's batches get no executor meanwhile, as on a
    cluster whose executors another job holds."""
    slots = spark.sparkContext.defaultParallelism

    def hold(_):
        import os
        import time
        while os.path.exists(flag):
            time.sleep(0.1)

    thread = threading.Thread(target=lambda: spark.sparkContext.parallelize(range(slots), slots).foreach(hold))
    thread.start()
    return thread


def test_a_query_that_makes_no_progress_is_marked_stuck(sqlite_engine, runtimes, tmp_path, capsys, home):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy AS SELECT * FROM payments;")
    start(engine, runtimes, QUERY)
    produce(engine, "payments", [good(1)], "a.json")
    engine.wait_caught_up(QUERY, timeout=90)
    assert row(engine)["stuck"] is False

    flag = tmp_path / "hold"
    flag.write_text("")
    holder = _hold_every_task_slot(runtimes.spark, str(flag))
    try:
        produce(engine, "payments", [good(2), good(3)], "b.json")
        produce(engine, "payments", [good(4)], "c.json")
        stuck = wait_until(lambda: next((r for r in engine.queries(stuck_after=1.0) if r["query_id"] == QUERY
                                         and r["stuck"]), None), 60, "the stuck mark")
        assert (stuck["state"], stuck["lag_files"], stuck["lag_records"]) == ("RUNNING", 2, 3)
        assert row(engine)["stuck"] is False  # the default threshold (5 minutes) is not reached
        where = ["--home", home, "--catalog", engine.catalog.url]
        assert main(["queries", *where, "--stuck-after", "1", "--json"]) == 0
        (shown,) = [r for r in json.loads(capsys.readouterr().out) if r["query_id"] == QUERY]
        assert shown["stuck"] is True
    finally:
        flag.unlink()
        holder.join(60)
    engine.wait_caught_up(QUERY, timeout=90)
    assert next(r for r in engine.queries(stuck_after=1.0) if r["query_id"] == QUERY)["stuck"] is False
