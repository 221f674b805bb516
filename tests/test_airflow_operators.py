"""The operators and sensors under dag.test(), against a real runtime and catalog: what
they change in the catalog and in the queries' output, what they push to XCom, and how
they fail on bad input."""
from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request

import psutil
import pytest

from .airflow_support import run_dag, set_connection, streamql_connection
from .support import insert, reconcile_passes, spark_streams, stream_rows, table, wait_until
from .test_statements import dump, topic_files

PIPELINE = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
CREATE TABLE stats AS SELECT user, COUNT(*) AS n FROM valid GROUP BY user;
"""


@pytest.fixture
def airflow(sqlite_engine, home, monkeypatch, airflow_db):
    """The streamql_default connection points at the test's catalog; returns its engine."""
    set_connection(monkeypatch, "streamql_default", streamql_connection(sqlite_engine.catalog.url, home))
    return sqlite_engine


@pytest.fixture
def running(airflow, runtimes):
    """PIPELINE created and RUNNING on a runtime (readiness window 3 s)."""
    airflow.execute(PIPELINE)
    runtimes.start(airflow, readiness_window=3)
    for query_id in ("CSAS_VALID_1", "CTAS_STATS_2"):
        airflow.wait_for_state(query_id, "RUNNING", timeout=90)
    return airflow


def meanwhile(*steps):
    """Run ``steps`` one after the other in a thread while a task runs in dag.test() (records
    arriving, a user acting), each step waiting for a condition or acting. Returns a join
    that re-raises what failed there."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for step in steps:
                step()
        except BaseException as e:  # noqa: B036 - handed to the test's thread by join()
            errors.append(e)
    thread = threading.Thread(target=run, name="meanwhile", daemon=True)
    thread.start()

    def join() -> None:
        thread.join(120)
        assert not thread.is_alive(), "the background steps did not finish"
        if errors:
            raise errors[0]
    return join


def deferrals() -> int:
    """How many times a streamql task has deferred so far: a deferring task registers its
    trigger in Airflow's metadata database, under dag.test() too."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import func, select
    with create_session() as session:
        return session.scalar(select(func.count()).select_from(Trigger).where(
            Trigger.classpath.like("airflow_provider_streamql.%.StreamQLConditionTrigger")))


def once_deferred():
    """A step that waits until a task defers after this call (for :func:`meanwhile`)."""
    before = deferrals()
    return lambda: wait_until(lambda: deferrals() > before, 90, "the task to defer")


def test_create_defers_until_running_and_is_idempotent(airflow, runtimes, capfd):
    engine = airflow
    runtimes.start(engine)
    run = run_dag("t_create", capfd, sql=PIPELINE)
    assert run.states == {"task": "success"}, run.log
    assert "Pausing task as DEFERRED" in run.log and "[DAG TEST] Trigger completed" in run.log
    assert run.xcom("task") == ["CSAS_VALID_1", "CTAS_STATS_2"]
    assert run.xcom("task", "states") == {"CSAS_VALID_1": "RUNNING", "CTAS_STATS_2": "RUNNING"}
    assert {q["query_id"]: q["state"] for q in engine.queries()} == {
        "CSAS_VALID_1": "RUNNING", "CTAS_STATS_2": "RUNNING"}
    assert engine.catalog.commands.all()[0]["issuer"].startswith("airflow:dag=t_create/run=manual__")

    again = run_dag("t_create", capfd, sql=PIPELINE)
    assert again.states == {"task": "success"}
    assert [a["action"] for a in again.xcom("task", "actions")] == ["unchanged"] * 3
    assert again.xcom("task", "versions") == {"CSAS_VALID_1": 1, "CTAS_STATS_2": 1}
    assert len(engine.catalog.commands.all()) == 3  # nothing new was applied
    assert "DEFERRED" not in again.log  # nothing to wait for


def test_validation_gate_fails_with_the_findings_and_changes_nothing(running, capfd):
    engine = running
    incompatible = "CREATE OR REPLACE STREAM valid AS SELECT id, cost FROM purchases"
    run = run_dag("t_validate_gate", capfd, sql=incompatible, query_id="CSAS_VALID_1")
    assert run.states == {"task": "failed"}
    assert "CSAS_VALID_1: REJECTED" in run.log and "COLUMN_REMOVED" in run.log
    assert run.xcom("task", "report")["findings"][0]["code"] == "COLUMN_REMOVED"
    assert [v["version"] for v in engine.catalog.versions("CSAS_VALID_1")] == [1]
    assert engine.state("CSAS_VALID_1") == "RUNNING"

    regroup = "CREATE OR REPLACE TABLE stats AS SELECT cost AS user, COUNT(*) AS n FROM valid GROUP BY cost"
    branch = run_dag("t_validate_branch", capfd, sql=regroup)
    assert branch.states == {"task": "success"}  # fail_on=(): the verdict is for a branch
    assert branch.xcom("task") == "REJECTED" or branch.xcom("task") == "REPLACING_REQUIRED"
    assert branch.xcom("task", "verdict") == branch.xcom("task")
    assert branch.xcom("task", "query_id") == "CTAS_STATS_2" and branch.xcom("task", "version") == 1


def test_validation_of_a_source_change(airflow, capfd):
    """CREATE OR REPLACE STREAM s (...) of a declared source: the verdict with its findings,
    no query ID or version; a refused change fails the gate and changes nothing."""
    engine = airflow
    engine.execute(PIPELINE)
    appended = "CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost DOUBLE, note STRING)"
    branch = run_dag("t_validate_branch", capfd, sql=appended)
    assert branch.states == {"task": "success"} and branch.xcom("task") == "IN_PLACE"
    report = branch.xcom("task", "report")
    assert (report["source"], report["findings"][0]["code"]) == ("PURCHASES", "SOURCE_COLUMN_APPENDED")
    assert branch.xcom("task", "query_id") is None and branch.xcom("task", "version") is None
    removed = "CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING)"
    gate = run_dag("t_validate_gate", capfd, sql=removed, query_id="")  # no query: a source change
    assert gate.states == {"task": "failed"}
    assert "PURCHASES: REJECTED" in gate.log and "SOURCE_COLUMN_REMOVED" in gate.log, gate.log[-3000:]
    assert [c.name for c in engine.catalog.source("PURCHASES").columns] == ["id", "user", "cost"]


def test_validation_dry_run_asks_spark(running, capfd):
    ok = "CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases WHERE cost > 1"
    run = run_dag("t_validate_branch", capfd, sql=ok, dry_run=True)
    assert run.states == {"task": "success"}, run.log
    report = run.xcom("task", "report")
    assert report["verdict"] == "IN_PLACE" and report["spark"]["ran"] is True
    assert "spark dry run: ran" in run.log


def test_replace_in_place_keeps_the_id_and_waits_for_the_new_version(running, capfd):
    engine = running
    insert(engine, "purchases", [(1, "ann", 5.0), (2, "bob", -1.0)])
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    # a record arrives once the new version runs (the task waits until it is ready)
    join = meanwhile(lambda: wait_until(lambda: engine.query("CSAS_VALID_1").running_version == 2,
                                        90, "version 2 to run"),
                     lambda: insert(engine, "purchases", [(3, "cat", -2.0)]))
    run = run_dag("t_replace", capfd, sql="CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases",
                  query_id="CSAS_VALID_1")
    join()
    assert run.states == {"task": "success"}, run.log
    assert run.xcom("task") == "CSAS_VALID_1"
    assert (run.xcom("task", "version"), run.xcom("task", "previous_version")) == (2, 1)
    assert run.xcom("task", "report")["verdict"] == "IN_PLACE"
    assert run.xcom("task", "state") == "RUNNING"
    assert [(v["version"], v["outcome"]) for v in engine.catalog.versions("CSAS_VALID_1")] == [
        (1, "REPLACED"), (2, "ACTIVE")]
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    # the new version lets negative purchases through from the swap on, not before
    assert stream_rows(engine, "valid") == [(1, "ann", 5.0), (3, "cat", -2.0)]


def test_replace_fails_with_the_reason_when_the_new_version_is_rolled_back(airflow, runtimes, capfd):
    engine = airflow
    engine.execute(PIPELINE)
    runtimes.start(engine, readiness_window=60)
    engine.wait_for_state("CSAS_VALID_1", "RUNNING", timeout=90)
    # valid to the validator, but CAST('bob' AS INT) fails on the first record
    failing = "CREATE OR REPLACE STREAM valid AS SELECT id, user, cost / CAST(user AS INT) AS cost FROM purchases"
    join = meanwhile(lambda: wait_until(lambda: engine.query("CSAS_VALID_1").running_version == 2,
                                        90, "version 2 to run"),
                     lambda: insert(engine, "purchases", [(1, "bob", 7.0)]))
    run = run_dag("t_replace", capfd, sql=failing, query_id="CSAS_VALID_1")
    join()
    assert run.states == {"task": "failed"}
    assert "version 2 of CSAS_VALID_1 was rolled back" in run.log
    engine.wait_for_state("CSAS_VALID_1", "RUNNING", timeout=60)
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    assert engine.query("CSAS_VALID_1").version == 1
    assert stream_rows(engine, "valid") == [(1, "bob", 7.0)]  # version 1 took the record


def test_replacing_mode_rebuilds_under_a_new_id(running, capfd):
    engine = running
    insert(engine, "purchases", [(1, "ann", 5.0), (2, "ann", 1.0), (3, "bob", 2.0)])
    engine.wait_caught_up("CTAS_STATS_2", timeout=60)
    regroup = "CREATE OR REPLACE TABLE stats AS SELECT user, SUM(cost) AS n FROM valid GROUP BY user"
    run = run_dag("t_replace", capfd, sql=regroup, query_id="CTAS_STATS_2", mode="replacing")
    assert run.states == {"task": "success"}, run.log
    new_id = run.xcom("task")
    assert (new_id, run.xcom("task", "previous_query_id")) == ("CTAS_STATS_3", "CTAS_STATS_2")
    assert engine.state("CTAS_STATS_2") == "TERMINATED" and engine.state(new_id) == "RUNNING"
    engine.wait_caught_up(new_id, timeout=60)
    assert table(engine, "stats") == {"ann": (6.0,), "bob": (2.0,)}  # rebuilt from the earliest input


def test_promote_a_shadow_then_retry_the_task(running, capfd):
    """The promote waits for the swap, drops the shadow's output; a retry of the task (after
    the statement committed) succeeds without promoting twice, and a discard of a promoted
    shadow fails saying so."""
    engine = running
    shadow = engine.upgrade("CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases WHERE cost > 1",
                            shadow=True).query_id
    engine.wait_for_state(shadow, "RUNNING", timeout=90)
    run = run_dag("t_promote", capfd, query_id=shadow)
    assert run.states == {"task": "success"}, run.log
    assert (run.xcom("task", "query_id"), run.xcom("task", "version")) == ("CSAS_VALID_1", 2)
    assert engine.query("CSAS_VALID_1").running_version == 2 and engine.state(shadow) == "TERMINATED"
    assert "VALID_SHADOW" not in {r[0] for r in engine.execute("SHOW STREAMS")[0].rows}  # dropped
    again = run_dag("t_promote", capfd, query_id=shadow)
    assert again.states == {"task": "success"}, again.log
    assert f"{shadow} was promoted already; CSAS_VALID_1 runs version 2" in again.log
    assert len([v for v in engine.catalog.versions("CSAS_VALID_1")]) == 2  # not promoted twice
    wrong = run_dag("t_discard", capfd, query_id=shadow)
    assert wrong.states == {"task": "failed"}
    assert f"shadow {shadow} was promoted already, not discarded" in wrong.log


def test_alter_query_sets_a_rate_limit_in_place_and_refuses_zero(running, capfd):
    engine = running
    run = run_dag("t_alter_query", capfd, query_id="CSAS_VALID_1", value=2)
    assert run.states == {"task": "success"}, run.log
    assert (run.xcom("task", "query_id"), run.xcom("task", "version")) == ("CSAS_VALID_1", 2)
    assert [f["code"] for f in run.xcom("task", "report")["findings"]] == ["RATE_LIMIT_CHANGED"]
    assert engine.query("CSAS_VALID_1").running_version == 2
    assert engine.query("CSAS_VALID_1").settings["max_files_per_batch"] == 2
    zero = run_dag("t_alter_query", capfd, query_id="CSAS_VALID_1", value=0)
    assert zero.states == {"task": "failed"}
    assert "max_files_per_batch = 0 would stop the query reading: PAUSE it instead" in zero.log
    assert engine.query("CSAS_VALID_1").version == 2


def test_promote_when_ready_fails_with_the_figures_then_waits_for_the_readiness_sensor(running, capfd):
    """PromoteShadowOperator(when_ready=True): a paused shadow that fell behind is not ready
    within the bound (the task fails with the figures, nothing promoted); resumed, the
    readiness sensor passes and the promote waits for the gate, then promotes."""
    engine = running
    shadow = engine.upgrade("CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases WHERE cost > 1",
                            shadow=True).query_id
    engine.wait_for_state(shadow, "RUNNING", timeout=90)
    engine.execute(f"PAUSE {shadow}")
    engine.wait_for_state(shadow, "PAUSED", timeout=90)
    insert(engine, "purchases", [(1, "ann", 2.0), (2, "bob", 3.0)])
    engine.wait_caught_up("CSAS_VALID_1", timeout=90)
    early = run_dag("t_promote_when_ready_soon", capfd, query_id=shadow)
    assert early.states == {"task": "failed"}, early.log
    assert f"{shadow} has read 0 of the 2 input file(s) CSAS_VALID_1 has read (2 behind)" in early.log
    assert "nothing was promoted" in early.log
    assert engine.query("CSAS_VALID_1").version == 1 and engine.query(shadow).desired_state == "PAUSED"

    engine.execute(f"RESUME {shadow}")
    sensed = run_dag("t_shadow_ready_sensor", capfd, query_id=shadow)
    assert sensed.states == {"task": "success"}, sensed.log
    assert (sensed.xcom("task")["behind"], sensed.xcom("task")["lag"]) == (0, 0)
    run = run_dag("t_promote_when_ready", capfd, query_id=shadow)
    assert run.states == {"task": "success"}, run.log
    assert run.xcom("task", "readiness")["behind"] == 0 and run.xcom("task", "version") == 2
    assert engine.query("CSAS_VALID_1").running_version == 2 and engine.state(shadow) == "TERMINATED"


def test_pause_resume_terminate_change_what_the_runtime_does(running, runtimes, capfd):
    engine = running
    (runtime, _thread), = runtimes.started
    paused = run_dag("t_pause", capfd, query_id="CTAS_STATS_2")
    assert paused.states == {"task": "success"}, paused.log
    assert (paused.xcom("task", "query_id"), paused.xcom("task", "state")) == ("CTAS_STATS_2", "PAUSED")
    insert(engine, "purchases", [(1, "ann", 5.0)])
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    # passes of the runtime over the paused query since its input arrived, and no streaming
    # query of it in the session: nothing ran it, nor can run it now
    reconcile_passes(engine, runtime.id, passes=3)
    assert "CTAS_STATS_2" not in runtime.active and not spark_streams(runtimes.spark, "CTAS_STATS_2")
    assert table(engine, "stats") == {}  # paused: the record waits

    resumed = run_dag("t_resume", capfd, query_id="CTAS_STATS_2")
    assert resumed.xcom("task", "state") == "RUNNING"
    engine.wait_caught_up("CTAS_STATS_2", timeout=60)
    assert table(engine, "stats") == {"ann": (1,)}

    in_worker = run_dag("t_pause_in_worker", capfd, query_id="ALL")
    assert in_worker.states == {"task": "success"} and "DEFERRED" not in in_worker.log
    assert in_worker.xcom("task", "states") == {"CSAS_VALID_1": "PAUSED", "CTAS_STATS_2": "PAUSED"}
    ended = run_dag("t_terminate", capfd, query_id="ALL")
    assert ended.xcom("task", "states") == {"CSAS_VALID_1": "TERMINATED", "CTAS_STATS_2": "TERMINATED"}
    assert {q["state"] for q in engine.queries()} == {"TERMINATED"}


def test_resume_skipping_bad_records(airflow, runtimes, capfd):
    engine = airflow
    engine.execute(PIPELINE)
    runtimes.start(engine, on_error="PAUSE")
    engine.wait_for_state("CSAS_VALID_1", "RUNNING", timeout=90)
    path = engine.catalog.source("PURCHASES").path
    with open(os.path.join(path, ".b.tmp"), "w") as f:
        f.write('{"id": 1, "user": "ann", "cost": 5.0}\n{"id": 2, "user": "bob", "cost": "free"}\n')
    os.rename(os.path.join(path, ".b.tmp"), os.path.join(path, "b.json"))
    engine.wait_for_state("CSAS_VALID_1", "PAUSED", timeout=90)
    run = run_dag("t_resume_skipping", capfd, query_id="CSAS_VALID_1")
    assert run.states == {"task": "success"}, run.log
    assert run.xcom("task", "state") == "RUNNING"
    assert "1 bad record(s) skipped (sent to CSAS_VALID_1_DLQ)" in run.log
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    assert stream_rows(engine, "valid") == [(1, "ann", 5.0)]
    (record,) = engine.bad_records("CSAS_VALID_1")
    assert record.status == "SKIPPED" and record.handled_by.startswith("airflow:dag=t_resume_skipping/")


def test_sensors_wait_for_state_progress_and_catch_up(running, capfd):
    engine = running
    state = run_dag("t_state_sensor", capfd, query_id="ALL", states="RUNNING")
    assert state.states == {"task": "success"}
    assert state.xcom("task", "states") == {"CSAS_VALID_1": "RUNNING", "CTAS_STATS_2": "RUNNING"}

    # the record arrives once the sensor has looked and deferred
    join = meanwhile(once_deferred(), lambda: insert(engine, "purchases", [(1, "ann", 5.0)]))
    progress = run_dag("t_progress_sensor", capfd, query_id="CSAS_VALID_1", batches=1)
    join()
    assert progress.states == {"task": "success"}, progress.log
    assert "DEFERRED" in progress.log  # nothing had happened yet when it started
    assert progress.xcom("task")["batches"] >= 1 and progress.xcom("task")["rows"] >= 1

    engine.execute("PAUSE CTAS_STATS_2")
    engine.wait_for_state("CTAS_STATS_2", "PAUSED", timeout=60)
    insert(engine, "purchases", [(2, "bob", 5.0)])
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)  # bob is in VALID, which STATS reads
    join = meanwhile(once_deferred(), lambda: engine.execute("RESUME CTAS_STATS_2"))
    caught_up = run_dag("t_caught_up_sensor", capfd, query_id="CTAS_STATS_2")
    join()
    assert caught_up.states == {"task": "success"}, caught_up.log
    assert "DEFERRED" in caught_up.log  # it waited for the resumed query
    assert table(engine, "stats") == {"ann": (1,), "bob": (1,)}  # what it waited for is there


# (DAG, params, connection override or None to keep it, fragment of the task's error)
BAD_INPUT = [
    ("t_pause", {"query_id": "CSAS_NOPE_9"}, None, "no query 'CSAS_NOPE_9'"),
    ("t_resume", {"query_id": " "}, None, "give a query ID or ALL"),
    # a query ID is a name, never a script: the hostile one runs nothing at all
    ("t_pause", {"query_id": "ALL; DROP STREAM purchases DELETE TOPIC"}, None,
     "query ID 'ALL; DROP STREAM purchases DELETE TOPIC' is not a plain SQL name"),
    ("t_resume", {"query_id": "CSAS_VALID_1;TERMINATE ALL"}, None, "is not a plain SQL name"),
    ("t_create", {"sql": "CREATE STREAM broken (id INT"}, None, "expected ')'"),
    ("t_create", {"sql": "CREATE STREAM ok (id INT); CREATE STREAM x AS SELECT nope FROM ok"}, None,
     "line 1, column 54: unknown column 'nope'"),
    ("t_replace", {"sql": "CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases",
                   "query_id": "CTAS_STATS_2"}, None, "VALID is written by CSAS_VALID_1, not by CTAS_STATS_2"),
    ("t_replace", {"sql": "CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases", "mode": "sideways"},
     None, "mode must be one of in_place, replacing, shadow, not 'sideways'"),
    ("t_pause", {"query_id": "CSAS_VALID_1"}, "missing", "connection 'streamql_default' does not exist"),
    ("t_pause", {"query_id": "CSAS_VALID_1"}, json.dumps({"conn_type": "postgres", "host": "db"}),
     "has type 'postgres'; streamql needs a connection of type 'streamql'"),
    ("t_pause", {"query_id": "CSAS_VALID_1"}, "bad-catalog", "cannot open catalog 'postgresql+psycopg://u:***@127.0.0.1:1/x'"),
    ("t_pause", {"query_id": "CSAS_VALID_1"}, "not-a-url", "catalog 'no such url' is not a database URL"),
]


@pytest.mark.parametrize("dag_id, params, connection, fragment", BAD_INPUT)
def test_bad_input_fails_the_task_with_the_engines_message(airflow, home, monkeypatch, capfd,
                                                           dag_id, params, connection, fragment):
    engine = airflow
    engine.execute(PIPELINE)
    before, files = dump(engine), topic_files(home)
    overrides = {"missing": None, "bad-catalog": streamql_connection(
        "postgresql+psycopg://u:secret@127.0.0.1:1/x", home),
        "not-a-url": streamql_connection("no such url", home)}
    if connection is not None:
        set_connection(monkeypatch, "streamql_default", overrides.get(connection, connection))
    run = run_dag(dag_id, capfd, **params)
    assert run.states == {"task": "failed"}
    assert fragment in run.log
    assert "secret" not in run.log  # the catalog password never reaches the log
    assert dump(engine) == before and topic_files(home) == files  # nothing half-applied


def test_submit_runtime_returns_at_once_when_a_runtime_serves_the_pipeline(airflow, runtimes, capfd):
    runtime = runtimes.start(airflow)
    wait_until(lambda: airflow.runtimes("default"), 30, "the runtime's heartbeat")
    run = run_dag("t_submit_runtime", capfd, spark_conn_id="nowhere")  # never consulted
    assert run.states == {"task": "success"}, run.log
    assert run.xcom("task") == runtime.id and run.xcom("task", "pid") is None
    assert "nothing to submit" in run.log


def test_submit_runtime_refuses_a_missing_spark_connection(airflow, capfd):
    run = run_dag("t_submit_runtime", capfd, spark_conn_id="spark_missing")
    assert run.states == {"task": "failed"}
    assert "Spark connection 'spark_missing' does not exist" in run.log
    assert "does not fall back to master 'yarn'" in run.log
    assert airflow.runtimes() == []


def test_submit_runtime_starts_a_runtime_through_spark_submit(airflow, monkeypatch, capfd):
    engine = airflow
    engine.execute(PIPELINE)
    set_connection(monkeypatch, "spark_local", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    run = run_dag("t_submit_runtime", capfd, spark_conn_id="spark_local", conf={"spark.ui.port": "0"})
    pid = run.xcom("task", "pid")
    try:
        assert run.states == {"task": "success"}, run.log
        runtime = engine.runtimes("default")[0]
        assert run.xcom("task") == runtime["id"] and runtime["master"] == "local[1]"
        engine.wait_for_state("CTAS_STATS_2", "RUNNING", timeout=120)
        insert(engine, "purchases", [(1, "ann", 5.0)])
        engine.wait_caught_up("CSAS_VALID_1", timeout=120)
        engine.wait_caught_up("CTAS_STATS_2", timeout=120)
        assert table(engine, "stats") == {"ann": (1,)}
        with open(run.xcom("task", "log")) as log:
            assert "serving pipeline 'default'" in log.read()
        # the Spark UI link of a task acting on one of its queries is that runtime's live UI
        paused = run_dag("t_pause", capfd, query_id="CSAS_VALID_1")
        ui = paused.xcom("task", "_link_SparkUILink")
        assert ui == runtime["spark_ui_url"] == run.xcom("task", "_link_SparkUILink")
        with urllib.request.urlopen(ui + "/StreamingQuery/", timeout=30) as page:
            assert page.status == 200
        # the query's page of the UI plugin (installed with the package)
        assert paused.xcom("task", "_link_StreamQLQueryLink").endswith("/streamql/queries/CSAS_VALID_1")
    finally:
        if pid:
            os.killpg(pid, signal.SIGTERM)
            wait_until(lambda: not engine.runtimes("default"), 90, "the runtime to stop")
            # and its processes end: spark-submit's JVM and the runtime's Python (which once
            # hung for good in a log handler while the interpreter finalized)
            wait_until(lambda: not _running_in_group(pid), 90, "every process of the runtime to exit")


def _running_in_group(group: int) -> list[int]:
    """The processes of process group ``group`` still running (a zombie has ended)."""
    running = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == group and proc.info["status"] != psutil.STATUS_ZOMBIE:
                running.append(proc.pid)
        except (ProcessLookupError, psutil.Error):  # it ended meanwhile
            pass
    return running


def test_a_deploy_task_records_the_deploy_and_a_rollback_task_undoes_it(airflow, runtimes, capfd):
    engine = airflow
    runtimes.start(engine, readiness_window=3)
    first = run_dag("t_deploy", capfd, sql=PIPELINE)
    assert first.states == {"task": "success"}, first.log
    assert first.xcom("task", "deploy") == 1
    insert(engine, "purchases", [(1, "ann", 0.5)])
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    engine.wait_caught_up("CTAS_STATS_2", timeout=60)
    second = run_dag("t_deploy", capfd, sql=PIPELINE.replace("cost > 0", "cost > 1"))
    assert second.xcom("task", "deploy") == 2
    engine.wait_for_version("CSAS_VALID_1", 2, ready=True, timeout=90)
    insert(engine, "purchases", [(2, "bob", 0.7)])  # left out by version 2
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)

    run = run_dag("t_rollback_deploy", capfd, deploy="last")
    assert run.states == {"task": "success"}, run.log
    assert run.xcom("task") == 2
    assert run.xcom("task", "restored") == {"CSAS_VALID_1": 1, "CTAS_STATS_2": 1}  # the table reads it
    assert engine.query("CSAS_VALID_1").running_version == 1
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    assert stream_rows(engine, "valid") == [(1, "ann", 0.5), (2, "bob", 0.7)]  # version 1 ran bob's again

    again = run_dag("t_rollback_deploy", capfd, deploy=2)
    assert again.states == {"task": "failed"}
    assert "deploy 2 was rolled back already" in again.log
