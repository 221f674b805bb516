"""Headless deploys: plan and apply a SQL file against the catalog and a real runtime."""
from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import update

from airflow_provider_streamql.catalog import schema
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StateError, ValidationError
from airflow_provider_streamql.language.limits import Limits

from .support import cli, insert, stream_rows
from .test_statements import dump

V1 = """
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);
CREATE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0;
CREATE STREAM big_purchases AS SELECT id, user, cost FROM purchases WHERE cost > 100;
CREATE TABLE purchase_stats AS SELECT user, COUNT(*) AS n FROM valid_purchases GROUP BY user;
"""
# one filter changed, one column appended, one new query (declared before what it reads)
V2 = """
CREATE STREAM refunds AS SELECT id, user, cost FROM purchases WHERE cost < 0;
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);
CREATE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 1;
CREATE STREAM big_purchases AS SELECT id, user, cost, product FROM purchases WHERE cost > 100;
CREATE TABLE purchase_stats AS SELECT user, COUNT(*) AS n FROM valid_purchases GROUP BY user;
"""
VALID, BIG, STATS = "CSAS_VALID_PURCHASES_1", "CSAS_BIG_PURCHASES_2", "CTAS_PURCHASE_STATS_3"


def actions(deploy_plan) -> list[tuple]:
    return [(i.action, i.name, i.query_id, [f.split(":")[0] for f in i.findings]) for i in deploy_plan.items]


def test_plan_and_apply_change_exactly_what_the_file_changes(sqlite_engine, runtimes):
    engine = sqlite_engine
    first = engine.plan(V1)
    assert [i.action for i in first.items] == ["create"] * 4
    engine.apply(V1)
    runtimes.start(engine, readiness_window=3)
    for query_id in (VALID, BIG, STATS):
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    insert(engine, "purchases", [(1, "ann", "tea", 0.5), (2, "bob", "tv", 500.0)])
    for query_id in (VALID, BIG):
        engine.wait_caught_up(query_id, timeout=60)
    engine.wait_caught_up(STATS, timeout=60)
    run_ids = {q.id: q.run_id for q in engine.catalog.queries()}
    assert all(run_ids.values())

    second = engine.plan(V2)
    assert actions(second) == [
        ("unchanged", "PURCHASES", None, []),
        ("create", "REFUNDS", "CSAS_REFUNDS_4", []),  # upstream first, whatever the file's order
        ("replace in place", "VALID_PURCHASES", VALID, ["FILTER_CHANGED"]),
        ("replace in place", "BIG_PURCHASES", BIG, ["COLUMN_APPENDED"]),
        ("unchanged", "PURCHASE_STATS", STATS, []),
    ]
    assert [i.name for i in second.changes] == ["REFUNDS", "VALID_PURCHASES", "BIG_PURCHASES"]

    deploy_plan, results = engine.apply(V2, issuer="user:deployer")
    engine.wait_for_results(results, timeout=120)
    assert [(q.id, q.version) for q in engine.catalog.queries()] == [
        (VALID, 2), (BIG, 2), (STATS, 1), ("CSAS_REFUNDS_4", 1)]
    after = {q.id: q.run_id for q in engine.catalog.queries()}
    assert after[STATS] == run_ids[STATS]  # the untouched query was not restarted
    assert after[VALID] != run_ids[VALID] and after[BIG] != run_ids[BIG]
    assert {c["issuer"] for c in engine.catalog.commands.all()[-3:]} == {"user:deployer"}

    insert(engine, "purchases", [(3, "cat", "tv", 700.0), (4, "dan", "mug", -3.0)])
    for query_id in (BIG, "CSAS_REFUNDS_4"):
        engine.wait_caught_up(query_id, timeout=60)
    assert stream_rows(engine, "big_purchases") == [(2, "bob", 500.0, None), (3, "cat", 700.0, "tv")]
    assert stream_rows(engine, "refunds") == [(4, "dan", -3.0)]
    assert [i.action for i in engine.plan(V2).items] == ["unchanged"] * 5  # applied: nothing left to do


def test_an_incompatible_file_is_rejected_and_changes_nothing(sqlite_engine, env, tmp_path):
    engine = sqlite_engine
    engine.apply(V1)
    incompatible = V1.replace("SELECT id, user, cost FROM purchases WHERE cost > 100",
                              "SELECT id, cost FROM purchases WHERE cost > 100").replace(
                              "WHERE cost > 0", "WHERE cost > 5")
    deploy_plan = engine.plan(incompatible)
    rejected = deploy_plan.of("rejected")
    assert [(i.name, i.query_id) for i in rejected] == [("BIG_PURCHASES", BIG)]
    assert rejected[0].findings == ["COLUMN_REMOVED: output column 'user' was removed; columns may only be appended"]
    assert [i.name for i in deploy_plan.of("replace in place")] == ["VALID_PURCHASES"]
    before = dump(engine)
    with pytest.raises(ValidationError, match="nothing applied: 1 statement"):
        engine.apply(incompatible)
    assert dump(engine) == before  # not even the compatible filter change

    regroup = V1.replace("SELECT user, COUNT(*) AS n FROM valid_purchases GROUP BY user",
                         "SELECT product AS user, COUNT(*) AS n FROM valid_purchases GROUP BY product")
    assert [i.action for i in engine.plan(regroup).items][-1] == "replacing required"
    with pytest.raises(StateError, match="replacing required: GROUP_BY_CHANGED"):
        engine.apply(regroup)
    assert dump(engine) == before

    # the CLI: plan exits 1 when the file cannot be applied, apply 2 (a statement error)
    path = tmp_path / "pipeline.sql"
    path.write_text(incompatible)
    planned = cli(env, "plan", str(path))
    assert planned.returncode == 1 and "rejected             stream BIG_PURCHASES [CSAS_BIG_PURCHASES_2]" in planned.stdout
    applied = cli(env, "apply", str(path))
    assert applied.returncode == 2 and "nothing applied" in applied.stderr
    path.write_text(V1)
    assert cli(env, "plan", str(path)).stdout.splitlines()[-1] == "4 unchanged"
    assert dump(engine) == before


def test_a_teardown_file_removes_what_left_the_file(sqlite_engine, runtimes, home):
    engine = sqlite_engine
    engine.apply(V1)
    runtimes.start(engine)
    engine.wait_for_state(BIG, "RUNNING", timeout=120)
    insert(engine, "purchases", [(1, "ann", "tv", 500.0)])
    engine.wait_caught_up(BIG, timeout=60)
    without_big = V1.replace("CREATE STREAM big_purchases AS SELECT id, user, cost FROM purchases WHERE cost > 100;", "")
    deploy_plan = engine.plan(without_big)
    assert [(i.action, i.name, i.query_id) for i in deploy_plan.of("drop")] == [("drop", "BIG_PURCHASES", BIG)]
    engine.apply(without_big)  # without a teardown nothing is dropped
    assert engine.state(BIG) == "RUNNING"

    checkpoint, topic = engine.query(BIG).checkpoint, engine.catalog.source("BIG_PURCHASES").path
    assert os.path.isdir(checkpoint) and os.listdir(topic)
    engine.apply(without_big, teardown=f"TERMINATE {BIG}")
    engine.wait_for_state(BIG, "TERMINATED", timeout=60)
    engine.apply(without_big, teardown="DROP STREAM big_purchases DELETE TOPIC")
    assert engine.catalog.source("BIG_PURCHASES") is None
    assert not os.path.exists(checkpoint) and not os.path.exists(topic)
    assert engine.plan(without_big).of("drop") == []


@pytest.mark.parametrize("script, fragment", [
    ("CREATE STREAM s (id INT); PAUSE ALL", "a deploy file declares streams, tables and queries; QueryControl"),
    ("CREATE STREAM s (id INT); INSERT INTO s VALUES (1)", "InsertValues belongs in a teardown file"),
    ("CREATE STREAM a AS SELECT * FROM b; CREATE STREAM b AS SELECT * FROM a", "read each other in a cycle"),
])
def test_what_a_deploy_file_may_not_hold(sqlite_engine, script, fragment):
    with pytest.raises(ValidationError, match=fragment):
        sqlite_engine.plan(script)


def test_a_trait_added_to_the_shape_leaves_applied_queries_unchanged(sqlite_engine):
    """Queries recorded by another release (whose validator derived other traits) are not
    shown as changed: a deploy compares what runs (plan, settings, output), not the shape."""
    import json

    from sqlalchemy import select, update

    from airflow_provider_streamql.catalog import schema

    engine = sqlite_engine
    engine.apply(V1)
    with engine.catalog.engine.begin() as conn:
        for query_id in (VALID, BIG, STATS):
            where = schema.queries.c.id == query_id
            shape = json.loads(conn.execute(select(schema.queries.c.shape).where(where)).scalar())
            conn.execute(update(schema.queries).where(where).values(
                shape=json.dumps({**shape, "a_trait_of_another_release": True})))
    assert [i.action for i in engine.plan(V1).items] == ["unchanged"] * 4
    # ... while a changed setting is a change
    changed = engine.plan(V1.replace("valid_purchases AS", "valid_purchases WITH (on_error='PAUSE') AS"))
    assert [i.action for i in changed.items] == ["unchanged", "replace in place", "unchanged", "unchanged"]


WINDOWED = ("CREATE STREAM s (id INT, ts TIMESTAMP) WITH (timestamp='ts');"
            "CREATE TABLE w AS SELECT id, COUNT(*) AS n FROM s WINDOW HOPPING (SIZE 1 DAY, ADVANCE BY 10 SECONDS) GROUP BY id;")
INSERTED = ("CREATE STREAM u (ID INT, NAME STRING); CREATE STREAM t (ID INT, NAME STRING);"
            "INSERT INTO t SELECT ID + 1 AS ID, NAME FROM u;")


@pytest.mark.parametrize("script, created_with, recorded_sql", [
    # running as written, though the statement is over today's bound (8,640 windows per record)
    (WINDOWED, {"windows_per_record": 10000}, None),
    # an INSERT INTO whose plan an earlier release wrote with unquoted aliases
    (INSERTED, {}, "SELECT ID + 1 AS ID, NAME FROM sq_insertquery_3_u AS U"),
])
def test_a_redeploy_of_an_unchanged_script_changes_nothing(catalog_url, home, script, created_with, recorded_sql):
    first = Engine(catalog_url, home=home, limits=Limits(**created_with))
    first.apply(script)
    [query] = first.catalog.queries()
    if recorded_sql is not None:
        plan = {**query.plan.to_dict(), "spark_sql": recorded_sql}
        with first.catalog.engine.begin() as conn:
            conn.execute(update(schema.queries).where(schema.queries.c.id == query.id)
                         .values(select_sql=recorded_sql, plan=json.dumps(plan)))
    first.close()
    again = Engine(catalog_url, home=home)
    assert {i.action for i in again.plan(script).items} == {"unchanged"}
    again.apply(script)
    assert [q.id for q in again.catalog.queries()] == [query.id]  # no second writer, no new version
    assert again.catalog.query(query.id).version == 1
    again.close()
