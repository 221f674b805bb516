"""In-place upgrades on real runtimes: the ksqlDB "update a running persistent query"
scenarios on the ksqlMart example, KLIP-28's interleaving, automatic rollback, terminated
queries and the replacing path."""
import pytest

from airflow_provider_streamql.errors import StateError, ValidationError

from .support import stream_rows, table, wait_until

MART = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
CREATE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0;
"""


def put(engine, rows, columns="id, user, cost"):
    engine.execute(";".join(f"INSERT INTO purchases ({columns}) VALUES ({', '.join(map(repr, r))})"
                            for r in rows))


def upgrade(engine, sql):
    """CREATE OR REPLACE, then wait until the runtime runs the new version."""
    results = engine.execute(sql)
    engine.wait_for_results(results, timeout=90)
    return results[-1]


def test_removing_a_filter_in_place(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(MART)
    runtimes.start(engine)
    put(engine, [(1, "ann", 5.0), (2, "bob", -1.0)])
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    result = upgrade(engine, "CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases")
    assert result.report["verdict"] == "IN_PLACE" and result.version == 2
    assert [f["code"] for f in result.report["findings"]] == ["FILTER_CHANGED"]
    put(engine, [(3, "cat", -2.0), (4, "ann", 3.0)])
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    # the earlier negative purchase is not reprocessed; the later one now passes; none twice
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", 5.0), (3, "cat", -2.0), (4, "ann", 3.0)]
    query = engine.query("CSAS_VALID_PURCHASES_1")
    assert (query.id, query.version, query.running_version) == ("CSAS_VALID_PURCHASES_1", 2, 2)
    # version 2 is declared ready on the reconcile pass after its first committed batch
    wait_until(lambda: engine.catalog.versions(query.id)[1]["outcome"] == "ACTIVE", what="readiness")
    history = engine.catalog.versions(query.id)
    assert [(v["version"], v["outcome"]) for v in history] == [(1, "REPLACED"), (2, "ACTIVE")]
    assert history[1]["verdict"] == "IN_PLACE" and history[0]["ended_at"] <= history[1]["started_at"]


def test_appending_a_column_to_a_source_and_reissuing_the_query(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(MART)
    runtimes.start(engine)
    put(engine, [(1, "ann", 5.0)])
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    engine.execute("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost DOUBLE, popularity DOUBLE)")
    put(engine, [(2, "bob", 2.0, 0.5)], "id, user, cost, popularity")
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    # SELECT * was resolved when the query was created: it keeps its three columns
    assert [c.name for c in engine.catalog.source("VALID_PURCHASES").columns] == ["id", "user", "cost"]
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", 5.0), (2, "bob", 2.0)]

    result = upgrade(engine, "CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0")
    assert [f["code"] for f in result.report["findings"]] == ["COLUMN_APPENDED"]
    put(engine, [(3, "cat", 4.0, 0.9)], "id, user, cost, popularity")
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", 5.0, None), (2, "bob", 2.0, None),
                                                      (3, "cat", 4.0, 0.9)]


def test_adding_a_refund_filter_before_a_count_carries_the_counts_on(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
        CREATE TABLE purchase_stats AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user;
    """)
    runtimes.start(engine)
    put(engine, [(1, "ann", 5.0), (2, "ann", -5.0), (3, "bob", 1.0)])
    engine.wait_caught_up("CTAS_PURCHASE_STATS_1", timeout=60)
    assert table(engine, "purchase_stats") == {"ann": (2,), "bob": (1,)}
    result = upgrade(engine, "CREATE OR REPLACE TABLE purchase_stats AS SELECT user, COUNT(*) AS n "
                             "FROM purchases WHERE cost > 0 GROUP BY user")
    assert result.report["verdict"] == "IN_PLACE"
    assert any(w["code"] == "NO_BACKFILL" for w in result.report["warnings"])
    put(engine, [(4, "ann", -1.0), (5, "ann", 2.0), (6, "bob", -3.0)])
    engine.wait_caught_up("CTAS_PURCHASE_STATS_1", timeout=60)
    # the state carried on: earlier counts stay, only later refunds are left out
    assert table(engine, "purchase_stats") == {"ann": (3,), "bob": (1,)}


def test_interleaved_statements_and_inputs(sqlite_engine, runtimes):
    """KLIP-28: create, insert, replace, insert, replace, insert: each record is processed
    once, by the version that was running when it arrived."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);"
                   "CREATE STREAM tagged AS SELECT id, user, cost FROM purchases WHERE cost > 1;")
    runtimes.start(engine)
    put(engine, [(1, "a", 1.0), (2, "b", 2.0)])
    engine.wait_caught_up("CSAS_TAGGED_1", timeout=60)
    upgrade(engine, "CREATE OR REPLACE STREAM tagged AS SELECT id, UPPER(user) AS user, cost FROM purchases")
    put(engine, [(3, "c", 1.0), (4, "d", 4.0)])
    engine.wait_caught_up("CSAS_TAGGED_1", timeout=60)
    upgrade(engine, "CREATE OR REPLACE STREAM tagged AS SELECT id, UPPER(user) AS user, cost * 10 AS cost "
                    "FROM purchases WHERE cost < 5")
    put(engine, [(5, "e", 3.0), (6, "f", 6.0)])
    engine.wait_caught_up("CSAS_TAGGED_1", timeout=60)
    assert stream_rows(engine, "tagged") == [(2, "b", 2.0), (3, "C", 1.0), (4, "D", 4.0), (5, "E", 30.0)]


def test_a_version_that_fails_is_rolled_back_and_loses_nothing(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(MART)
    runtimes.start(engine, readiness_window=60)
    put(engine, [(1, "ann", 5.0)])
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    # valid to the validator (same output schema), but CAST('bob' AS INT) fails at runtime
    results = engine.execute("CREATE OR REPLACE STREAM valid_purchases AS SELECT id, user, "
                             "cost / CAST(user AS INT) AS cost FROM purchases WHERE cost > 0")
    assert results[0].version == 2
    engine.wait_for_results(results, timeout=90)  # version 2 runs, in its readiness window
    put(engine, [(2, "bob", 7.0)])
    outcome = lambda: {v["version"]: v["outcome"] for v in engine.catalog.versions("CSAS_VALID_PURCHASES_1")}
    wait_until(lambda: outcome()[2] == "ROLLED_BACK", timeout=90, what="the automatic rollback")
    with pytest.raises(StateError, match="version 2 of CSAS_VALID_PURCHASES_1 was rolled back"):
        engine.wait_for_version("CSAS_VALID_PURCHASES_1", 2, timeout=5)
    engine.wait_for_state("CSAS_VALID_PURCHASES_1", "RUNNING", timeout=60)
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    query = engine.query("CSAS_VALID_PURCHASES_1")
    assert (query.version, query.running_version) == (1, 1)
    assert "version 2 failed and was rolled back" in query.error
    # version 1 processed the record version 2 choked on: nothing lost, nothing twice
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", 5.0), (2, "bob", 7.0)]
    assert outcome() == {1: "ACTIVE", 2: "ROLLED_BACK"}
    explained = dict(map(tuple, engine.execute("EXPLAIN CSAS_VALID_PURCHASES_1")[0].rows))
    assert explained["version 2"].startswith("ROLLED_BACK; verdict IN_PLACE")


def test_rejected_and_replacing_upgrades_change_nothing(sqlite_engine):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, region STRING, cost DOUBLE);
        CREATE TABLE stats AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user;
    """)
    before = engine.catalog.versions("CTAS_STATS_1")
    with pytest.raises(StateError, match="REPLACING_REQUIRED: GROUP_BY_CHANGED"):
        engine.execute("CREATE OR REPLACE TABLE stats AS SELECT region AS user, COUNT(*) AS n "
                       "FROM purchases GROUP BY region")
    with pytest.raises(ValidationError, match="REJECTED: COLUMN_REMOVED"):
        engine.execute("CREATE OR REPLACE TABLE stats AS SELECT user, SUM(cost) AS total FROM purchases GROUP BY user")
    assert engine.catalog.versions("CTAS_STATS_1") == before
    # a terminated query is validated against its last recorded version, not waved through
    engine.execute("TERMINATE CTAS_STATS_1")
    with pytest.raises(StateError, match="GROUP_BY_CHANGED"):
        engine.execute("CREATE OR REPLACE TABLE stats AS SELECT region AS user, COUNT(*) AS n "
                       "FROM purchases GROUP BY region")
    result = engine.execute("CREATE OR REPLACE TABLE stats AS SELECT user, COUNT(*) AS n "
                            "FROM purchases WHERE cost > 0 GROUP BY user")[0]
    assert result.version == 2 and engine.query("CTAS_STATS_1").desired_state == "RUNNING"


def test_replacing_upgrade_rebuilds_from_earliest(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, region STRING, cost DOUBLE);
        CREATE TABLE stats AS SELECT user AS k, COUNT(*) AS n FROM purchases GROUP BY user;
    """)
    runtimes.start(engine)
    engine.execute("INSERT INTO purchases VALUES (1, 'ann', 'eu', 1.0); INSERT INTO purchases VALUES (2, 'bob', 'eu', 1.0);")
    engine.wait_caught_up("CTAS_STATS_1", timeout=60)
    assert table(engine, "stats") == {"ann": (1,), "bob": (1,)}
    with pytest.raises(ValidationError, match="not supported for file topics"):
        engine.replace("CREATE OR REPLACE TABLE stats AS SELECT region AS k, COUNT(*) AS n "
                       "FROM purchases GROUP BY region", start_from="latest")
    assert engine.state("CTAS_STATS_1") == "RUNNING"  # the failed call changed nothing
    results = engine.replace("CREATE OR REPLACE TABLE stats AS SELECT region AS k, COUNT(*) AS n "
                             "FROM purchases GROUP BY region", start_from="earliest")
    new_id = results[-1].query_id
    assert new_id == "CTAS_STATS_2" and engine.query("CTAS_STATS_1").desired_state == "TERMINATED"
    engine.wait_for_state(new_id, "RUNNING", timeout=60)
    engine.wait_caught_up(new_id, timeout=60)
    assert table(engine, "stats") == {"eu": (2,)}


def test_a_new_runtime_takes_over_the_readiness_window(sqlite_engine, runtimes):
    """The runtime that swapped in version 2 stops inside its readiness window: the runtime
    that takes the query over still rolls a failing version 2 back, losing nothing."""
    engine = sqlite_engine
    engine.execute(MART)
    first = runtimes.start(engine, readiness_window=600)
    put(engine, [(1, "ann", 5.0)])
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    results = engine.execute("CREATE OR REPLACE STREAM valid_purchases AS SELECT id, user, "
                             "cost / CAST(user AS INT) AS cost FROM purchases WHERE cost > 0")
    engine.wait_for_results(results, timeout=90)  # version 2 runs, in its readiness window
    outcome = lambda: {v["version"]: v["outcome"] for v in engine.catalog.versions("CSAS_VALID_PURCHASES_1")}
    assert outcome() == {1: "REPLACED", 2: None}
    runtimes.stop(first)
    runtimes.start(engine, readiness_window=600)
    engine.wait_for_state("CSAS_VALID_PURCHASES_1", "RUNNING", timeout=90)
    assert outcome() == {1: "REPLACED", 2: None}  # still undecided: not ACTIVE on a restart
    put(engine, [(2, "bob", 7.0)])
    wait_until(lambda: outcome()[2] == "ROLLED_BACK", timeout=90, what="the automatic rollback")
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=90)
    assert outcome() == {1: "ACTIVE", 2: "ROLLED_BACK"}
    assert stream_rows(engine, "valid_purchases") == [(1, "ann", 5.0), (2, "bob", 7.0)]


def test_a_failed_version_of_a_count_is_rolled_back_to_the_counts_it_had(sqlite_engine, runtimes):
    """The rollback of a stateful query: the snapshot (hard links to the checkpoint's files)
    holds the counts as version 1 left them while version 2 ran and failed; restored, version
    1 counts on from them: nothing lost, nothing counted twice."""
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
        CREATE TABLE purchase_stats AS SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM purchases GROUP BY user;
    """)
    runtimes.start(engine, readiness_window=60)
    put(engine, [(1, "ann", 5.0), (2, "ann", 1.0), (3, "bob", 2.0)])
    engine.wait_caught_up("CTAS_PURCHASE_STATS_1", timeout=60)
    # valid to the validator (a filter before the count), but CAST('ann' AS INT) fails at runtime
    results = engine.execute("CREATE OR REPLACE TABLE purchase_stats AS SELECT user, COUNT(*) AS n, SUM(cost) AS "
                             "total FROM purchases WHERE CAST(user AS INT) > 0 GROUP BY user")
    assert results[0].version == 2
    engine.wait_for_results(results, timeout=90)
    put(engine, [(4, "ann", 3.0), (5, "cid", 4.0)])
    outcome = lambda: {v["version"]: v["outcome"] for v in engine.catalog.versions("CTAS_PURCHASE_STATS_1")}
    wait_until(lambda: outcome()[2] == "ROLLED_BACK", timeout=90, what="the automatic rollback")
    engine.wait_for_state("CTAS_PURCHASE_STATS_1", "RUNNING", timeout=60)
    engine.wait_caught_up("CTAS_PURCHASE_STATS_1", timeout=60)
    assert table(engine, "purchase_stats") == {"ann": (3, 9.0), "bob": (1, 2.0), "cid": (1, 4.0)}
    put(engine, [(6, "bob", 1.0)])
    engine.wait_caught_up("CTAS_PURCHASE_STATS_1", timeout=60)
    assert table(engine, "purchase_stats") == {"ann": (3, 9.0), "bob": (2, 3.0), "cid": (1, 4.0)}
