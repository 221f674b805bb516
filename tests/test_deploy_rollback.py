"""Whole-deploy rollback: every apply of a deploy file that changes something is recorded
(its file's fingerprint, the versions it made, a snapshot of each upgraded query's checkpoint),
and a rollback returns all its queries to what they were before it in one step, or refuses
naming the query and why and changes nothing. The pipeline test runs on a real runtime."""
from __future__ import annotations

import hashlib
import json
import re

import pytest

from airflow_provider_streamql.errors import NotFoundError, StateError

from .support import cli, insert, stream_rows, table

V1 = """
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);
CREATE STREAM old_purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);
CREATE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0;
CREATE STREAM big_purchases AS SELECT id, user, cost FROM purchases WHERE cost > 100;
CREATE TABLE purchase_stats AS SELECT user, COUNT(*) AS n FROM valid_purchases GROUP BY user;
"""
# two queries changed (a filter; a column appended), the table reading one of them unchanged,
# and a new query
V2 = """
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);
CREATE STREAM old_purchases (id INT KEY, user STRING, product STRING, cost DOUBLE);
CREATE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 1;
CREATE STREAM big_purchases AS SELECT id, user, cost, product FROM purchases WHERE cost > 100;
CREATE TABLE purchase_stats AS SELECT user, COUNT(*) AS n FROM valid_purchases GROUP BY user;
CREATE STREAM refunds AS SELECT id, user, cost FROM purchases WHERE cost < 0;
"""
VALID, BIG, STATS, REFUNDS = "CSAS_VALID_PURCHASES_1", "CSAS_BIG_PURCHASES_2", "CTAS_PURCHASE_STATS_3", "CSAS_REFUNDS_4"


def changes(deploy) -> list[tuple]:
    return [(c.query_id, c.action.value, c.version_before, c.version_after) for c in deploy.changes]


def state(engine) -> list[tuple]:
    """What a rollback may change: each query's version, definition and desired state, each
    sink's columns, the deploys' record."""
    queries = [(q.id, q.version, q.sql, q.desired_state) for q in engine.catalog.queries()]
    sources = [(s.name, s.column_json()) for s in engine.catalog.sources().values()]
    return [queries, sorted(sources), [(d.id, d.rolled_back) for d in engine.deploys()]]


def test_each_apply_that_changes_something_is_a_deploy(engine):
    _plan, results = engine.apply(V1)
    assert results[-1].details["deploy"] == 1
    engine.apply(V1)  # nothing to change: no deploy
    _plan, results = engine.apply(V2, issuer="user:deployer")
    first, second = engine.deploys()
    assert changes(first) == [(BIG, "CREATED", None, 1), (VALID, "CREATED", None, 1), (STATS, "CREATED", None, 1)]
    assert changes(second) == [(BIG, "UPGRADED", 1, 2), (REFUNDS, "CREATED", None, 1), (VALID, "UPGRADED", 1, 2),
                               (STATS, "READER", 1, 1)]
    assert (second.fingerprint, second.issuer) == (hashlib.sha256(V2.encode()).hexdigest(), "user:deployer")
    assert results[-1].message.startswith("Deploy 2 recorded: ")


def test_rollback_returns_the_versions_before_and_then_the_deploy_before(engine):
    engine.apply(V1)
    before = state(engine)
    engine.apply(V2)
    result = engine.rollback()  # the last deploy
    assert result.details["deploy"] == 2
    assert result.details["restored"] == {VALID: 1, BIG: 1, STATS: 1} and result.details["terminated"] == [REFUNDS]
    queries, sources, deploys = state(engine)
    assert queries[:3] == before[0] and queries[3][0] == REFUNDS and queries[3][3] == "TERMINATED"
    assert [s for s in sources if s[0] != "REFUNDS"] == before[1]  # BIG_PURCHASES without product again
    assert deploys == [(1, False), (2, True)]
    assert [(v["version"], v["outcome"]) for v in engine.catalog.versions(VALID)][1] == (2, "ROLLED_BACK")
    engine.rollback()  # deploy 1 next: what it created is terminated
    assert {q.desired_state for q in engine.catalog.queries()} == {"TERMINATED"}
    with pytest.raises(StateError, match="pipeline 'default' has no deploy to roll back"):
        engine.rollback()


REFUSALS = [
    # (what happened after deploy 2, the deploy rolled back, the error names the query and why)
    ("CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 2", 2,
     "CSAS_VALID_PURCHASES_1 runs version 3 since deploy 2 made version 2: roll back the newer change first"),
    ("TERMINATE CSAS_BIG_PURCHASES_2", 2, "CSAS_BIG_PURCHASES_2 was terminated since deploy 2"),
    ("CREATE STREAM refund_log AS SELECT * FROM refunds", 2,
     "CSAS_REFUNDS_4, created by deploy 2, writes REFUNDS, which CSAS_REFUND_LOG_5 (created since) reads"),
    ("CREATE OR REPLACE STREAM refunds AS SELECT id, user, cost FROM purchases WHERE cost < -1", 2,
     "CSAS_REFUNDS_4 runs version 2 since deploy 2 created it"),
    ("", 1, "CSAS_VALID_PURCHASES_1 runs version 2 since deploy 1 created it"),  # deploy 2 stands on it
]


@pytest.mark.parametrize("since, deploy, reason", REFUSALS)
def test_a_rollback_that_cannot_be_done_whole_changes_nothing(sqlite_engine, since, deploy, reason):
    engine = sqlite_engine
    engine.apply(V1)
    engine.apply(V2)
    if since:
        engine.execute(since)
    before = state(engine)
    with pytest.raises(StateError, match=f"^deploy {deploy} cannot be rolled back: .*{re.escape(reason)}"):
        engine.rollback(deploy)
    assert state(engine) == before


def test_a_dropped_source_refuses_the_rollback_naming_it(sqlite_engine):
    engine = sqlite_engine
    engine.apply(V1.replace("FROM purchases WHERE cost > 100", "FROM old_purchases WHERE cost > 100"))
    engine.apply(V2)  # BIG reads purchases now (an in-place source change)
    engine.execute("DROP STREAM old_purchases")
    with pytest.raises(StateError, match="version 1 of CSAS_BIG_PURCHASES_2 reads OLD_PURCHASES, dropped since"):
        engine.rollback()


@pytest.mark.parametrize("deploy, error, message", [
    (99, NotFoundError, "there is no deploy 99"),
    (2, StateError, "deploy 2 was rolled back already"),
])
def test_what_cannot_be_rolled_back_at_all(sqlite_engine, deploy, error, message):
    sqlite_engine.apply(V1)
    sqlite_engine.apply(V2)
    sqlite_engine.rollback(2)
    with pytest.raises(error, match=message):
        sqlite_engine.rollback(deploy)


def test_the_cli_lists_deploys_and_rolls_back(sqlite_engine, env, tmp_path):
    for name, text in (("v1.sql", V1), ("v2.sql", V2)):
        (tmp_path / name).write_text(text)
        assert cli(env, "apply", str(tmp_path / name)).returncode == 0
    listed = cli(env, "deploys")
    assert listed.returncode == 0 and f"{BIG} v1->v2" in listed.stdout and f"{STATS} reader" in listed.stdout
    rolled = cli(env, "rollback", "--json")
    assert rolled.returncode == 0, rolled.stderr
    assert json.loads(rolled.stdout)["details"]["restored"] == {VALID: 1, BIG: 1, STATS: 1}
    again = cli(env, "rollback", "2")
    assert again.returncode != 0 and "deploy 2 was rolled back already" in again.stderr


@pytest.mark.slow
def test_a_three_query_pipeline_rolls_back_to_its_v1_text_and_state(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.apply(V1)
    runtimes.start(engine, readiness_window=3)
    for query_id in (VALID, BIG, STATS):
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    insert(engine, "purchases", [(1, "ann", "tea", 0.5), (2, "bob", "tv", 500.0)])
    caught_up(engine)

    engine.apply(V2)
    # each query it upgrades, and the table reading one of them, snapshotted before
    assert [(c.query_id, bool(c.snapshot)) for c in engine.deploys()[1].changes] == [
        (BIG, True), (REFUNDS, False), (VALID, True), (STATS, True)]
    for query_id in (VALID, BIG):
        engine.wait_for_version(query_id, 2, ready=True, timeout=120)
    insert(engine, "purchases", [(3, "cat", "tv", 700.0), (4, "ann", "mug", 1.0), (5, "dan", "pen", -2.0)])
    caught_up(engine, REFUNDS)
    assert stream_rows(engine, "big_purchases") == [(2, "bob", 500.0, None), (3, "cat", 700.0, "tv")]
    assert table(engine, "purchase_stats") == {"ann": (1,), "bob": (1,), "cat": (1,)}  # v2 left out ann's 1.0

    result = engine.rollback()
    engine.wait_for_results([result], timeout=120)
    for query_id in (VALID, BIG):
        engine.wait_for_version(query_id, 1, timeout=120)
    assert engine.query(VALID).sql.strip().endswith("cost > 0")
    assert engine.query(REFUNDS).desired_state == "TERMINATED"
    insert(engine, "purchases", [(6, "eve", "cup", 0.7)])
    caught_up(engine)
    # every input through v1 once, as if v2 had never run: its output taken out, run again
    assert [r[0] for r in stream_rows(engine, "valid_purchases")] == [1, 2, 3, 4, 6]
    assert stream_rows(engine, "big_purchases") == [(2, "bob", 500.0), (3, "cat", 700.0)]
    assert table(engine, "purchase_stats") == {"ann": (2,), "bob": (1,), "cat": (1,), "eve": (1,)}
    assert stream_rows(engine, "refunds") == [(5, "dan", -2.0)]  # kept


def caught_up(engine, *more: str) -> None:
    for query_id in (VALID, BIG, *more, STATS):  # STATS reads what VALID writes
        engine.wait_caught_up(query_id, timeout=90)
