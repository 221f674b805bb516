"""dags/streamql_deploy_approval.py run for real with dag.test(): while the run waits at its
human-in-the-loop task, a person reads the plan it shows and answers through Airflow's REST
API route for HITL details (the one the Required Actions page calls); only the plan approved
is applied, and only if the catalog did not change since it was made."""
from __future__ import annotations

import pytest

from .airflow_support import DAGS, Reviewer, dag_bag, run_dag, set_connection, streamql_connection
from .test_deploy_rollback import state

V1 = """CREATE STREAM orders (id INT KEY, cost DOUBLE);
CREATE STREAM big_orders AS SELECT * FROM orders WHERE cost > 10;
CREATE STREAM huge_orders AS SELECT * FROM big_orders WHERE cost > 100;
"""
V2 = V1.replace("cost > 10", "cost > 20")
BIG, HUGE = "CSAS_BIG_ORDERS_1", "CSAS_HUGE_ORDERS_2"
MEANWHILE = "CREATE OR REPLACE STREAM big_orders AS SELECT * FROM orders WHERE cost > 30"


@pytest.mark.parametrize("answer, between, apply, version", [
    # (the person's answer, what someone else does before it, the apply task, BIG's version after)
    ("Approve", None, "success", 2),
    ("Reject", None, "skipped", 1),
    ("Approve", MEANWHILE, "failed", 2),  # version 2 is MEANWHILE's, not the plan's
])
def test_only_the_plan_a_person_approved_is_applied(sqlite_engine, home, monkeypatch, airflow_db, request,
                                                   tmp_path, capfd, answer, between, apply, version):
    engine = sqlite_engine
    set_connection(monkeypatch, "streamql_default", streamql_connection(engine.catalog.url, home))
    engine.apply(V1)
    if apply == "success":  # the apply waits until the runtime runs the new version
        request.getfixturevalue("runtimes").start(engine, readiness_window=3)
        engine.wait_for_state(BIG, "RUNNING", timeout=90)
    (tmp_path / "orders.sql").write_text(V2)
    monkeypatch.setattr(dag_bag(DAGS).get_dag("streamql_deploy_approval"), "template_searchpath", [str(tmp_path)])
    before: list = []

    def meanwhile() -> None:
        if between:
            engine.execute(between)
        before.append(state(engine))
    reviewer = Reviewer("streamql_deploy_approval", "approve", answer, before=meanwhile)
    reviewer.start()
    run = run_dag("streamql_deploy_approval", capfd, example=True, file="orders.sql")
    shown = reviewer.answered()
    assert run.states == {"plan": "success", "approve": "success", "apply": apply}, run.log
    assert f"-> reads the change: {HUGE} (HUGE_ORDERS)" in shown["body"]
    assert "validator: IN_PLACE (data selection; traits simple)" in shown["body"]
    assert (reviewer.recorded["chosen_options"], reviewer.recorded["responded_by"]["name"]) == ([answer], "reviewer")
    assert engine.query(BIG).version == version
    if apply == "failed":
        assert "the plan is no longer the one with fingerprint" in run.log and [state(engine)] == before
        assert "cost > 30" in engine.query(BIG).sql
