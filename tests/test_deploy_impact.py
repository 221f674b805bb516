"""Approval with impact: a deploy plan lists, for each change, what it affects downstream and
what it will not do, and has a fingerprint of itself and the catalog it was made against; an
apply given that fingerprint refuses, changing nothing, if either changed since."""
from __future__ import annotations

import json

import pytest

from airflow_provider_streamql.errors import StateError
from airflow_provider_streamql.language import parse
from airflow_provider_streamql.language.deploys import RecordDeploy

from .airflow_support import run_dag, set_connection, streamql_connection
from .support import cli
from .test_deploy_rollback import V1, V2, state

VALID, BIG, STATS, REFUNDS = "CSAS_VALID_PURCHASES_1", "CSAS_BIG_PURCHASES_2", "CTAS_PURCHASE_STATS_3", "CSAS_REFUNDS_4"
V2_VALID = "CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 1"
V3 = V2.replace("CREATE STREAM old_purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);",
                "CREATE STREAM old_purchases (id INT KEY, user STRING, product STRING, cost DOUBLE, note STRING);")


@pytest.mark.parametrize("script, name, affects", [
    # (the file planned after V1, a change, what it affects: (effect, query) each)
    (V2, "VALID_PURCHASES", [("no backfill", VALID), ("reads the change", STATS)]),
    (V2, "BIG_PURCHASES", [("no backfill", BIG)]),
    (V2, "REFUNDS", [("starts", REFUNDS)]),
    (V2, "PURCHASE_STATS", []),  # unchanged
    (V3.replace("FROM purchases WHERE cost > 100", "FROM old_purchases WHERE cost > 100"), "OLD_PURCHASES",
     [("reads the change", BIG)]),  # a declared source's appended column: BIG reads it from now on
])
def test_a_plan_lists_what_each_change_affects(engine, script, name, affects):
    engine.apply(V1.replace("FROM purchases WHERE cost > 100", "FROM old_purchases WHERE cost > 100")
                 if name == "OLD_PURCHASES" else V1)
    item = next(i for i in engine.plan(script).items if i.name == name)
    assert [(a.effect.value, a.query_id) for a in item.affects] == affects


SUMMED = V1.replace("COUNT(*) AS n", "SUM(cost) AS n")
NOTED = V1.replace("product STRING, cost DOUBLE);", "product STRING, cost DOUBLE, note STRING);", 1)


@pytest.mark.parametrize("script, name, shown", [
    # (the file planned after V1, a change, the validator's report on it as the plan shows it)
    (V2, "VALID_PURCHASES", "validator: IN_PLACE (data selection; traits simple)"),
    (V2, "BIG_PURCHASES", "validator: IN_PLACE (schema evolution; traits simple)"),
    (V2, "REFUNDS", None),  # a new query: nothing to compare
    (SUMMED, "PURCHASE_STATS", "validator: REJECTED (data selection, schema evolution, topology; traits stateful)"),
    (NOTED, "PURCHASES", "validator: IN_PLACE (schema evolution)"),  # a declared source's appended column
])
def test_a_plan_shows_the_validators_report_on_each_change(sqlite_engine, script, name, shown):
    sqlite_engine.apply(V1)
    plan = sqlite_engine.plan(script)
    item = next(i for i in plan.items if i.name == name)
    assert (item.validation.render() if item.validation else None) == shown
    assert shown is None or f"{name}{f' [{item.query_id}]' if item.query_id else ''} (line {item.line})\n{'':<21}{shown}\n" in plan.render()


def test_what_left_the_file_lists_the_readers_that_would_lose_their_input(sqlite_engine):
    sqlite_engine.apply(V1)
    plan = sqlite_engine.plan(V1.replace("CREATE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0;", ""))
    (item,) = plan.of("drop")
    assert (item.name, [(a.effect.value, a.query_id) for a in item.affects]) == (
        "VALID_PURCHASES", [("loses its input", STATS)])
    assert "\nplan fingerprint: " + plan.fingerprint + "\n4 unchanged; 1 drop" in plan.render()


def test_the_fingerprint_is_of_the_plan_and_the_catalog_definitions(sqlite_engine):
    engine = sqlite_engine
    engine.apply(V1)
    first = engine.plan(V2).fingerprint
    assert engine.plan(V2).fingerprint == first
    engine.execute("PAUSE CSAS_BIG_PURCHASES_2")  # desired and observed state are not definitions
    assert engine.plan(V2).fingerprint == first
    assert engine.plan(V2.replace("cost > 1", "cost > 2")).fingerprint != first


BETWEEN = [
    # (what happens between the plan and the apply, whether the approved plan is applied)
    ("", True),
    ("PAUSE CSAS_VALID_PURCHASES_1", True),
    ("CREATE STREAM other (a INT)", False),
    ("CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 5", False),
    ("TERMINATE CSAS_BIG_PURCHASES_2", False),
]


@pytest.mark.parametrize("between, applied", BETWEEN)
def test_an_approved_plan_is_applied_only_if_the_catalog_did_not_change(sqlite_engine, between, applied):
    engine = sqlite_engine
    engine.apply(V1)
    approved = engine.plan(V2).fingerprint
    if between:
        engine.execute(between)
    before = state(engine)
    if applied:
        engine.apply(V2, plan_fingerprint=approved)
        assert engine.query(VALID).version == 2 and len(engine.deploys()) == 2
    else:
        with pytest.raises(StateError, match=f"nothing applied: the plan is no longer the one with fingerprint "
                                             f"'{approved}' \\(the catalog or the file changed since"):
            engine.apply(V2, plan_fingerprint=approved)
        assert state(engine) == before


def test_the_catalog_is_checked_again_inside_the_apply(sqlite_engine):
    """What changed between the apply's plan and its transaction is caught in the transaction."""
    engine = sqlite_engine
    engine.apply(V1)
    planned = engine.plan(V2).catalog_state
    engine.execute("CREATE STREAM other (a INT)")
    before = state(engine)
    with pytest.raises(StateError, match="nothing applied: the catalog changed since the deploy was planned"):
        engine.run([*parse(V2_VALID), RecordDeploy.of("0" * 64, catalog_state=planned)])
    assert state(engine) == before


def test_the_cli_prints_the_fingerprint_and_applies_only_that_plan(sqlite_engine, env, tmp_path):
    (tmp_path / "v1.sql").write_text(V1)
    (tmp_path / "v2.sql").write_text(V2)
    assert cli(env, "apply", str(tmp_path / "v1.sql")).returncode == 0
    planned = cli(env, "plan", str(tmp_path / "v2.sql"), "--json")
    fingerprint = json.loads(planned.stdout)["fingerprint"]
    assert json.loads(planned.stdout)["items"][2]["affects"][1] == {
        "effect": "reads the change", "query_id": STATS, "sink": "PURCHASE_STATS",
        "note": "reads VALID_PURCHASES: from the swap on, what the new definition writes"}
    sqlite_engine.execute("CREATE STREAM other (a INT)")
    stale = cli(env, "apply", str(tmp_path / "v2.sql"), "--plan-fingerprint", fingerprint)
    assert stale.returncode == 2 and "the catalog or the file changed since" in stale.stderr
    fresh = cli(env, "plan", str(tmp_path / "v2.sql")).stdout.splitlines()[-2].removeprefix("plan fingerprint: ")
    assert cli(env, "apply", str(tmp_path / "v2.sql"), "--plan-fingerprint", fresh).returncode == 0


def test_a_plan_only_task_pushes_the_fingerprint_an_apply_task_requires(sqlite_engine, home, monkeypatch,
                                                                       airflow_db, capfd):
    set_connection(monkeypatch, "streamql_default", streamql_connection(sqlite_engine.catalog.url, home))
    sqlite_engine.apply(V1)
    plan = run_dag("t_plan_only", capfd, sql=V2)
    assert plan.states == {"task": "success"}, plan.log
    approved = plan.xcom("task", "plan_fingerprint")
    assert plan.xcom("task", "plan")["fingerprint"] == approved and sqlite_engine.query(VALID).version == 1
    sqlite_engine.execute("CREATE STREAM other (a INT)")
    stale = run_dag("t_deploy_fingerprint", capfd, sql=V2, plan_fingerprint=approved)
    assert stale.states == {"task": "failed"} and "the catalog or the file changed since" in stale.log
    assert sqlite_engine.query(VALID).version == 1
    fresh = run_dag("t_plan_only", capfd, sql=V2).xcom("task", "plan_fingerprint")
    done = run_dag("t_deploy_fingerprint", capfd, sql=V2, plan_fingerprint=fresh)
    assert done.states == {"task": "success"}, done.log
    assert sqlite_engine.query(VALID).version == 2 and done.xcom("task", "deploy") == 2

