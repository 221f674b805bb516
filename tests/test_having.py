"""HAVING retracts (issue 17): a group an update makes fail HAVING is deleted from the output
table (a tombstone), as in ksqlDB, instead of keeping the row it had while it passed; pull
queries stop returning it. Run on SQLite and PostgreSQL catalogs."""
from __future__ import annotations

import pytest
import sqlglot

from airflow_provider_streamql.language.streaming import HAVING_COLUMN

from .support import DELETED, changelog, insert, table

SPENDS = "CREATE STREAM spends (user STRING, x INT, ts TIMESTAMP) WITH (timestamp='ts');"
# (user, x): ann passes SUM(x) > 10 at 13, fails it at 9; bob passes at 20; cat never does
SPENT = [("ann", 8), ("ann", 5), ("bob", 20), ("ann", -4), ("cat", 3)]
AT = "2024-01-01 00:00:{:02d}"


def test_a_group_that_stops_matching_having_is_deleted(engine, runtimes):
    engine.execute(SPENDS + """
        CREATE TABLE big AS SELECT user, SUM(x) AS total FROM spends GROUP BY user HAVING SUM(x) > 10;
        CREATE TABLE big_alias AS SELECT user, SUM(x) AS total FROM spends GROUP BY user HAVING total > 10;
        CREATE TABLE busy AS SELECT user, COUNT(*) AS n, WINDOWSTART FROM spends
          WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY user
          HAVING SUM(x) > 10 AND WINDOWEND > '2024-01-01' EMIT CHANGES;
    """)
    ids = [q["query_id"] for q in engine.queries()]
    runtimes.start(engine)
    for i, (user, x) in enumerate(SPENT):  # one record per micro-batch: ann passes, then fails
        insert(engine, "spends", [(user, x, AT.format(i))])
        for query_id in ids:
            engine.wait_caught_up(query_id, timeout=60)
    assert table(engine, "big") == table(engine, "big_alias") == {"bob": (20,)}
    assert [(u, n) for u, n, *_ in engine.execute("SELECT * FROM busy")[0].rows] == [("bob", 1)]
    assert engine.execute("SELECT * FROM big WHERE user = 'ann'")[0].rows == []
    # ann's changelog: her row while she passed, then her tombstone (a group that fails HAVING
    # when first seen is deleted too: a tombstone of a key the table never held changes nothing)
    ann = [r for r in changelog(engine, "big") if r["user"] == "ann"]
    assert ann[-2:] == [{"user": "ann", "total": 13}, {"user": "ann", DELETED: True}]
    assert [r for r in ann if DELETED not in r] == [{"user": "ann", "total": 13}]
    assert all(HAVING_COLUMN not in r for r in changelog(engine, "busy"))


def test_having_over_a_table_deletes_a_group_an_update_empties(engine, runtimes):
    engine.execute("""
        CREATE TABLE users (id INT PRIMARY KEY, region STRING);
        CREATE TABLE crowded AS SELECT region, COUNT(*) AS n FROM users GROUP BY region HAVING COUNT(*) > 1;
        INSERT INTO users VALUES (1, 'eu'); INSERT INTO users VALUES (2, 'eu'); INSERT INTO users VALUES (3, 'us');
    """)
    runtimes.start(engine)
    engine.wait_caught_up("CTAS_CROWDED_1", timeout=60)
    assert table(engine, "crowded") == {"eu": (2,)}
    engine.execute("INSERT INTO users VALUES (2, 'us')")  # eu drops to 1, us rises to 2
    engine.wait_caught_up("CTAS_CROWDED_1", timeout=60)
    assert table(engine, "crowded") == {"us": (2,)}


# a HAVING clause -> the column the plan computes instead (no HAVING left in Spark's SQL)
PLANS = [
    ("HAVING SUM(x) > 10", "COALESCE(SUM(x) > 10, FALSE) AS __streamql_having"),
    ("HAVING total > 10", "COALESCE(SUM(x) > 10, FALSE) AS __streamql_having"),  # an output name
    ("HAVING COUNT(*) > 1 AND user <> 'x'", "COALESCE(COUNT(*) > 1 AND user <> 'x', FALSE) AS __streamql_having"),
    ("HAVING MAX(x) > total", "COALESCE(MAX(x) > SUM(x), FALSE) AS __streamql_having"),
    # a source column wins over an output of the same name, as Spark resolves HAVING
    ("HAVING user <> 'x' AND total > 1", "COALESCE(user <> 'x' AND SUM(x) > 1, FALSE) AS __streamql_having"),
]


@pytest.mark.parametrize("having, column", PLANS)
def test_having_becomes_a_column_of_the_plan(sqlite_engine, having, column):
    sqlite_engine.execute(SPENDS + f"CREATE TABLE t AS SELECT user, SUM(x) AS total FROM spends GROUP BY user {having}")
    plan = sqlite_engine.query("CTAS_T_1").plan
    assert plan.having_column == HAVING_COLUMN and " HAVING " not in plan.spark_sql.upper()
    assert plan.spark_sql.replace("`", "").endswith(f"{column} FROM sq_ctas_t_1_spends AS spends GROUP BY user")


def test_a_source_column_in_having_is_not_an_output_of_the_same_name(sqlite_engine):
    sqlite_engine.execute(SPENDS + "CREATE TABLE t AS SELECT x AS n, COUNT(*) AS x FROM spends GROUP BY x HAVING x > 1")
    assert "COALESCE(x > 1, FALSE) AS __streamql_having" in sqlite_engine.query("CTAS_T_1").plan.spark_sql


# windowed outputs: every column of the table is an output of the plan (its keys included)
WINDOWED = [
    "SELECT user, COUNT(*) AS n, WINDOWSTART AS ws FROM spends WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user "
    "HAVING n > 1",
    "SELECT user, COUNT(*) AS n FROM spends WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE) GROUP BY user "
    "HAVING WINDOWEND > '2024-01-01'",
    "SELECT user, WINDOWEND, COUNT(*) AS n FROM spends WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user",
]


@pytest.mark.parametrize("select", WINDOWED)
def test_a_windowed_plan_outputs_every_column_of_its_table(sqlite_engine, select):
    sqlite_engine.execute(SPENDS + f"CREATE TABLE t AS {select}")
    plan = sqlite_engine.query("CTAS_T_1").plan
    outputs = {p.alias_or_name.upper() for p in sqlglot.parse_one(plan.spark_sql, dialect="spark").expressions}
    assert {c.name.upper() for c in sqlite_engine.catalog.source("T").columns} <= outputs


# shapes whose plan keeps HAVING in Spark's SQL: nothing there to retract
KEPT = [
    "CREATE TABLE t AS SELECT user, COUNT(*) AS n FROM spends WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user "
    "HAVING COUNT(*) > 1 EMIT FINAL",  # a final window is emitted once, never updated
    "CREATE TABLE u (id INT PRIMARY KEY, r STRING); CREATE TABLE t AS SELECT r, COUNT(*) AS n FROM u GROUP BY r "
    "HAVING COUNT(*) > 1",  # over a table: recomputed from snapshots, a group gone is deleted
]


@pytest.mark.parametrize("sql", KEPT)
def test_having_stays_in_the_sql_where_nothing_is_updated_in_place(sqlite_engine, sql):
    sqlite_engine.execute(SPENDS + sql)
    plan = sqlite_engine.query("CTAS_T_1").plan
    assert plan.having_column == "" and " HAVING " in plan.spark_sql.upper()


def test_a_checkpoint_of_the_filtering_plan_restarts_under_the_retracting_one(spark, sqlite_engine, tmp_path,
                                                                              monkeypatch):
    """docs/language.md: a version planned before retraction (HAVING in Spark's SQL) can be
    replaced in place by one that retracts: Spark keeps the same aggregates in state, so it
    restarts on the old checkpoint and carries the sums on."""
    from airflow_provider_streamql.language import streaming
    engine = sqlite_engine
    sql = "CREATE OR REPLACE TABLE big AS SELECT user, SUM(x) AS total FROM spends GROUP BY user HAVING COUNT(*) > 1"
    with monkeypatch.context() as patched:
        patched.setattr(streaming, "_having_as_column", lambda tree, columns: None)  # HAVING stays in the SQL
        engine.execute(SPENDS + sql)
    before = engine.query("CTAS_BIG_1").plan
    engine.execute(sql)
    after = engine.query("CTAS_BIG_1").plan
    assert " HAVING " in before.spark_sql and " HAVING " not in after.spark_sql
    source, checkpoint = tmp_path / "in", str(tmp_path / "checkpoint")
    source.mkdir()
    batches = []

    def run(plan, n, x):
        (source / f"{n}.json").write_text(f'{{"user": "ann", "x": {x}}}\n')
        spark.readStream.schema("user STRING, x INT, ts TIMESTAMP").json(str(source)) \
            .createOrReplaceTempView(plan.views["SPENDS"])
        query = spark.sql(plan.spark_sql).writeStream.outputMode("update") \
            .option("checkpointLocation", checkpoint).foreachBatch(lambda df, _: batches.append(df.collect())).start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    run(before, 1, 5)
    run(before, 2, 7)  # ann's second record: she passes HAVING with 12
    run(after, 3, 1)  # the retracting plan on the same state: 13
    assert [[tuple(r) for r in b] for b in batches] == [[], [("ann", 12)], [("ann", 13, True)]]
