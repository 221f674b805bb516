"""The example DAGs in dags/, run with dag.test() against a real runtime and catalog: what
they do to the queries (state, versions, output rows), not only that tasks succeeded."""
from __future__ import annotations

import os
import time

import pytest

from .airflow_support import DAGS, dag_bag, run_dag, set_connection, streamql_connection
from .support import stream_rows, table, wait_until

KSQLMART = open(os.path.join(DAGS, "sql", "ksqlmart.sql")).read()
VALID, STATS = "CSAS_VALID_PURCHASES_1", "CTAS_PURCHASE_STATS_2"


def buy(engine, *rows):
    """INSERT purchases (id, user, product, cost, quantity)."""
    engine.execute(";".join(f"INSERT INTO purchases VALUES ({', '.join(map(repr, r))})" for r in rows))


@pytest.fixture
def mart(sqlite_engine, home, monkeypatch, airflow_db, runtimes):
    """A runtime serving the default pipeline, and streamql_default pointing at its catalog."""
    set_connection(monkeypatch, "streamql_default", streamql_connection(sqlite_engine.catalog.url, home))
    runtimes.start(sqlite_engine, readiness_window=3)
    wait_until(lambda: sqlite_engine.runtimes("default"), 30, "the runtime's first heartbeat")
    return sqlite_engine


@pytest.fixture
def deployed(mart):
    mart.execute(KSQLMART)
    for query_id in (VALID, STATS):
        mart.wait_for_state(query_id, "RUNNING", timeout=90)
    return mart


def test_every_dag_file_imports_cleanly(airflow_db):
    bag = dag_bag(DAGS)
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["streamql_control", "streamql_deploy", "streamql_deploy_approval",
                                   "streamql_health", "streamql_repair",
                                   "streamql_rewind", "streamql_shadow_upgrade", "streamql_snapshots",
                                   "streamql_upgrade"]
    # scheduled on the query's events (tests/test_asset_events.py runs it end to end)
    [asset] = bag.get_dag("streamql_repair").timetable.asset_condition.objects
    [watcher] = asset.watchers
    assert (asset.uri, watcher.trigger.events) == ("streamql://streamql_default/VALID_PURCHASES", ["held"])
    assert bag.get_dag("streamql_snapshots").timetable.expression in ("@hourly", "0 * * * *")
    assert bag.get_dag("streamql_deploy").timetable.expression in ("@hourly", "0 * * * *")
    assert set(bag.get_dag("streamql_upgrade").params) == {"query_id", "new_sql", "mode", "dry_run"}


@pytest.mark.parametrize("dag_id, query_id, accepted", [
    ("streamql_control", "ALL", True), ("streamql_control", "CSAS_VALID_PURCHASES_1", True),
    ("streamql_control", "ALL; DROP STREAM purchases DELETE TOPIC", False),
    ("streamql_control", "CSAS_X_1 SKIP BAD RECORDS", False), ("streamql_control", "csas_x_1\n", False),
    ("streamql_control", "", False),
    # a rewind pauses what it names: one query, never ALL
    ("streamql_rewind", "CTAS_PURCHASE_STATS_2", True), ("streamql_rewind", "ALLOWANCES_3", True),
    ("streamql_rewind", "ALL", False), ("streamql_rewind", "all", False), ("streamql_rewind", "", False),
    ("streamql_rewind", "Q; DROP STREAM purchases", False),
])
def test_the_forms_take_a_query_id_and_nothing_else(airflow_db, dag_id, query_id, accepted):
    from airflow.sdk.exceptions import ParamValidationError
    param = dag_bag(DAGS).get_dag(dag_id).params.get_param("query_id")
    if accepted:
        assert param.resolve(query_id) == query_id
    else:
        with pytest.raises(ParamValidationError):
            param.resolve(query_id)


def test_deploy_creates_the_pipeline_and_checks_it_runs(mart, capfd):
    engine = mart
    run = run_dag("streamql_deploy", capfd, example=True)
    assert run.states == {"ensure_runtime": "success", "deploy": "success",
                          "all_queries_running": "success"}, run.log
    assert run.xcom("deploy", "query_ids") == [VALID, STATS]
    assert [i["action"] for i in run.xcom("deploy", "plan")["items"]] == ["create"] * 3
    assert run.xcom("all_queries_running", "states") == {VALID: "RUNNING", STATS: "RUNNING"}
    assert "nothing to submit" in run.log  # the runtime already served the pipeline
    buy(engine, (1, "ann", "tea", 2.5, 2), (2, "bob", "tea", 9.0, 0), (3, "bob", "mug", 4.0, 1))
    engine.wait_caught_up(VALID, timeout=60)
    engine.wait_caught_up(STATS, timeout=60)
    assert table(engine, "purchase_stats") == {"tea": (1, 5.0), "mug": (1, 4.0)}

    # the next scheduled run changes nothing; a paused query stays paused and passes the check
    engine.execute(f"PAUSE {STATS}")
    run_ids = {q.id: q.run_id for q in engine.catalog.queries()}
    again = run_dag("streamql_deploy", capfd, example=True)
    assert set(again.states.values()) == {"success"}
    assert again.xcom("deploy") == {"create": 0, "replace in place": 0, "replacing required": 0,
                                    "unchanged": 3, "rejected": 0, "drop": 0}
    assert [q.version for q in engine.catalog.queries()] == [1, 1]
    assert {q.id: q.run_id for q in engine.catalog.queries()} == run_ids  # nothing restarted
    assert again.xcom("all_queries_running", "states") == {VALID: "RUNNING", STATS: "PAUSED"}


def test_upgrade_in_place_carries_ids_and_versions_through_xcom(deployed, capfd):
    engine = deployed
    buy(engine, (1, "ann", "tea", 2.5, 0))  # quantity 0: filtered out by version 1
    engine.wait_caught_up(VALID, timeout=60)
    run = run_dag("streamql_upgrade", capfd, example=True, query_id=VALID,
                  new_sql="CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0")
    assert run.states == {"validate": "success", "choose": "success", "replace_in_place": "success",
                          "replace_rebuild": "skipped", "needs_replacing": "skipped",
                          "wait_for_progress": "success", "report": "success"}, run.log
    assert run.xcom("validate") == "IN_PLACE"
    assert run.xcom("report") == {"query_id": VALID, "version": 2, "previous_query_id": VALID,
                                  "previous_version": 1, "verdict": "IN_PLACE", "state": "RUNNING"}
    assert f"upgraded {VALID} v1 -> {VALID} v2 (IN_PLACE), now RUNNING" in run.log
    assert engine.query(VALID).running_version == 2
    buy(engine, (2, "bob", "mug", 4.0, 0))  # version 2 lets quantity 0 through
    engine.wait_caught_up(VALID, timeout=60)
    assert stream_rows(engine, "valid_purchases") == [(2, "bob", "mug", 4.0, 0)]


def test_upgrade_stops_at_the_gate_when_the_change_is_incompatible(deployed, capfd):
    engine = deployed
    run = run_dag("streamql_upgrade", capfd, example=True, query_id=VALID,
                  new_sql="CREATE OR REPLACE STREAM valid_purchases AS SELECT id, cost FROM purchases")
    assert run.states["validate"] == "failed"
    assert {run.states[t] for t in ("choose", "replace_in_place", "replace_rebuild", "report")} == {"upstream_failed"}
    assert "REJECTED" in run.log and "COLUMN_REMOVED" in run.log  # the findings, in the task log
    assert [v["version"] for v in engine.catalog.versions(VALID)] == [1]
    assert engine.state(VALID) == "RUNNING"
    buy(engine, (1, "ann", "tea", 2.5, 1))
    engine.wait_caught_up(VALID, timeout=60)
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", "tea", 2.5, 1)]  # v1 still runs


def test_upgrade_that_needs_a_new_checkpoint(deployed, capfd):
    engine = deployed
    buy(engine, (1, "ann", "tea", 2.5, 2), (2, "bob", "tea", 1.0, 1))
    engine.wait_caught_up(VALID, timeout=60)
    engine.wait_caught_up(STATS, timeout=60)
    by_user = ("CREATE OR REPLACE TABLE purchase_stats AS SELECT user AS product, COUNT(*) AS purchases, "
               "SUM(cost * quantity) AS revenue FROM valid_purchases GROUP BY user")
    refused = run_dag("streamql_upgrade", capfd, example=True, query_id=STATS, new_sql=by_user)
    assert refused.xcom("validate") == "REPLACING_REQUIRED"
    assert refused.states["needs_replacing"] == "failed" and refused.states["replace_in_place"] == "skipped"
    assert engine.query(STATS).version == 1

    rebuilt = run_dag("streamql_upgrade", capfd, example=True, query_id=STATS, new_sql=by_user, mode="replacing")
    assert rebuilt.states["replace_rebuild"] == "success" and rebuilt.states["report"] == "success", rebuilt.log
    new_id = rebuilt.xcom("report")["query_id"]
    assert new_id == "CTAS_PURCHASE_STATS_3" and engine.state(STATS) == "TERMINATED"
    assert table(engine, "purchase_stats") == {"ann": (1, 5.0), "bob": (1, 1.0)}  # rebuilt from earliest


def test_control_pauses_and_resumes_from_a_form(deployed, capfd):
    engine = deployed
    paused = run_dag("streamql_control", capfd, example=True, action="pause", query_id=STATS)
    assert paused.states == {"route": "success", "pause": "success", "resume": "skipped",
                             "terminate": "skipped", "report": "success"}, paused.log
    assert paused.xcom("report") == {STATS: "PAUSED"}
    buy(engine, (1, "ann", "tea", 2.5, 2))
    engine.wait_caught_up(VALID, timeout=60)
    time.sleep(1.0)
    assert table(engine, "purchase_stats") == {}  # the paused query did not take it

    resumed = run_dag("streamql_control", capfd, example=True, action="resume", query_id=STATS)
    assert resumed.xcom("report") == {STATS: "RUNNING"}
    engine.wait_caught_up(STATS, timeout=60)
    assert table(engine, "purchase_stats") == {"tea": (1, 5.0)}

    ended = run_dag("streamql_control", capfd, example=True, action="terminate", query_id="ALL")
    assert ended.xcom("report") == {VALID: "TERMINATED", STATS: "TERMINATED"}


def caught_up(engine):
    for query_id in (VALID, STATS):  # STATS reads what VALID writes
        engine.wait_caught_up(query_id, timeout=60)


def test_scheduled_snapshots_and_a_rewind_from_the_form(deployed, capfd):
    engine = deployed
    buy(engine, (1, "ann", "tea", 2.5, 2))
    caught_up(engine)
    snapped = run_dag("streamql_snapshots", capfd, example=True)
    assert snapped.state == "success", snapped.log
    assert sorted(r[0] for r in engine.execute("SHOW SNAPSHOTS")[0].rows) == [VALID, STATS]
    buy(engine, (2, "bob", "tea", 1.0, 3), (3, "cy", "jam", 4.0, 1))
    caught_up(engine)
    before = table(engine, "purchase_stats")
    assert before == {"tea": (2, 8.0), "jam": (1, 4.0)}

    rewound = run_dag("streamql_rewind", capfd, example=True, query_id=STATS, snapshot=1, timestamp="")
    assert rewound.states == {"pause": "success", "restore": "success", "resume": "success"}, rewound.log
    assert "Restored CTAS_PURCHASE_STATS_2 to snapshot 1" in rewound.log
    caught_up(engine)
    # the purchases after the snapshot were counted again, once
    assert table(engine, "purchase_stats") == before
    assert [r[2] for r in engine.execute("SHOW SNAPSHOTS")[0].rows if r[0] == STATS] == ["MANUAL", "RESTORE"]


def test_a_rewind_to_a_time_from_the_form(deployed, capfd):
    from .test_rewinds import after_all

    engine = deployed
    buy(engine, (1, "ann", "tea", 2.5, 2))
    caught_up(engine)
    between = after_all(engine, "PURCHASES")
    buy(engine, (2, "bob", "tea", 1.0, 3), (3, "cy", "jam", 4.0, 1))
    caught_up(engine)
    before = stream_rows(engine, "valid_purchases")
    assert len(before) == 3

    # dag.test() keeps the last run's params on the DAG: each run gives both
    neither = run_dag("streamql_rewind", capfd, example=True, query_id=VALID, snapshot=None, timestamp="")
    assert neither.states["restore"] == "failed" and neither.states["resume"] != "success"
    assert stream_rows(engine, "valid_purchases") == before  # nothing changed
    rewound = run_dag("streamql_rewind", capfd, example=True, query_id=VALID, snapshot=None, timestamp=between)
    assert rewound.states == {"pause": "success", "restore": "success", "resume": "success"}, rewound.log
    assert f"Restored {VALID} to {between}" in rewound.log
    caught_up(engine)
    assert stream_rows(engine, "valid_purchases") == before  # the later purchases again, once each


def test_a_shadow_upgrade_promoted_by_the_automatic_gate(deployed, capfd):
    engine = deployed
    buy(engine, (1, "ann", "tea", 2.5, 2))
    caught_up(engine)
    run = run_dag("streamql_shadow_upgrade", capfd, example=True, gate="auto", max_changed_rows=0, min_compared_inputs=0,
                  new_sql="CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0")
    assert run.states == {"shadow": "success", "ready": "success", "diff": "success", "gate": "success",
                          "ask": "skipped", "promote": "success", "discard": "skipped"}, run.log
    assert (run.xcom("diff")["changed"], run.xcom("diff")["inputs"]) == (0, 0)  # no input since the copy
    assert "Promoted: Replaced CSAS_VALID_PURCHASES_1 in place: version 2" in run.log
    assert run.xcom("promote", "readiness")["behind"] == 0  # it waited for the readiness gate
    assert engine.query(VALID).running_version == 2
    assert "VALID_PURCHASES_SHADOW" not in {r[0] for r in engine.execute("SHOW STREAMS")[0].rows}  # dropped
    buy(engine, (2, "bob", "mug", 4.0, 0))  # version 2 lets quantity 0 through
    caught_up(engine)
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", "tea", 2.5, 2), (2, "bob", "mug", 4.0, 0)]


def test_health_flags_queries_that_need_attention(deployed, runtimes, capfd):
    engine = deployed
    healthy = run_dag("streamql_health", capfd, example=True)
    assert healthy.states == {"check_queries": "success"} and healthy.xcom("check_queries") == 2

    # a query nobody runs, with input older than the limit waiting for it
    engine.execute("CREATE STREAM orphan AS SELECT * FROM purchases", pipeline="nobody")
    buy(engine, (1, "ann", "tea", 2.5, 2))
    old = time.time() - 600
    for name in os.listdir(engine.catalog.source("PURCHASES").path):
        os.utime(os.path.join(engine.catalog.source("PURCHASES").path, name), (old, old))
    engine.wait_caught_up(VALID, timeout=60)  # the served queries keep up: they are fine
    stale = run_dag("streamql_health", capfd, example=True, stale_after_minutes=5)
    assert stale.states == {"check_queries": "failed"}
    assert "1 of 3 queries need attention" in stale.log
    assert "CSAS_ORPHAN_3 (nobody): no progress for 300s: 1 input file(s) older than that" in stale.log

    for runtime, _thread in runtimes.started:
        runtimes.stop(runtime)
    gone = run_dag("streamql_health", capfd, example=True, stale_after_minutes=60)
    assert gone.states == {"check_queries": "failed"}
    assert f"{VALID} (default): UNASSIGNED: its runtime stopped heartbeating" in gone.log
    assert f"{STATS} (default): UNASSIGNED" in gone.log
