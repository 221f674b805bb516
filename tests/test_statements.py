"""Statements against a real catalog, on SQLite and on PostgreSQL."""
import os

import pytest
from sqlalchemy import select

from airflow_provider_streamql.catalog import schema
from airflow_provider_streamql.errors import NotFoundError, ParseError, StateError, ValidationError

SETUP = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
"""

# statement -> (error class, fragment of its message)
BAD_INPUT = [
    ("CREATE STREAM s (id INT", ParseError, "expected ')'"),
    ("CREATE STREAM x AS SELECT id FROM nowhere", ValidationError, "unknown stream or table 'nowhere'"),
    ("CREATE STREAM x AS SELECT id, colour FROM purchases", ValidationError, "unknown column 'colour'"),
    ("CREATE STREAM x AS SELECT id, cost + user AS c FROM purchases", ValidationError, "type error: + cannot take 'user' of type STRING"),
    ("CREATE TABLE x AS SELECT user, SUM(user) AS s FROM purchases GROUP BY user", ValidationError, "type error: SUM cannot take 'user'"),
    ("CREATE STREAM x AS SELECT id FROM purchases WHERE user", ValidationError, "WHERE needs a boolean condition"),
    ("CREATE STREAM purchases (id INT)", ValidationError, "a stream named PURCHASES already exists"),
    ("CREATE STREAM valid AS SELECT * FROM purchases", ValidationError, "a stream named VALID already exists"),
    ("CREATE STREAM `in/put` (id INT)", ParseError, "'in/put' is not a plain SQL name"),
    ("CREATE STREAM a..b (id INT)", ParseError, "'a..b' is not a plain SQL name"),
    ("PAUSE CSAS_NOPE_9", NotFoundError, "no query 'CSAS_NOPE_9'"),
    ("CREATE STREAM x AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user", ValidationError, "an aggregation makes a TABLE"),
    ("CREATE TABLE x AS SELECT user FROM purchases", ValidationError, "needs a GROUP BY"),
    ("CREATE STREAM x (id INT) WITH (colour='red')", ValidationError, "unknown property 'colour'"),
    ("CREATE STREAM x (id INT) WITH (value_format='XML')", ValidationError, "must be one of JSON, CSV, DELIMITED, PARQUET"),
    ("INSERT INTO purchases (id, cost) VALUES (1, 'cheap')", ValidationError, "value 'cheap' does not fit column 'cost'"),
    ("INSERT INTO valid (id) VALUES (1)", ValidationError, "VALID is written by query CSAS_VALID_1"),
    ("CREATE STREAM x AS SELECT id, cost * 2 AS id FROM purchases", ValidationError, "column 'id' appears twice in the output"),
    # streamql's own column names (a HAVING result, a changelog's file, Spark's corrupt record)
    ("CREATE STREAM x (id INT, __file STRING)", ParseError, "'__file' is not a plain SQL name: names starting with '__'"),
    ("CREATE STREAM x (id INT, _CORRUPT_RECORD STRING)", ParseError, "_corrupt_record are reserved for streamql's own"),
    ("CREATE TABLE x AS SELECT user, COUNT(*) AS __streamql_having FROM purchases GROUP BY user", ValidationError,
     "output column '__streamql_having': names starting with '__'"),
    ("CREATE TABLE x AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user HAVING __streamql_having", ValidationError,
     "no column '__streamql_having'"),
    ("CREATE STREAM x AS SELECT CAST(java_method('java.lang.System', 'exit', 0) AS STRING) AS r FROM purchases",
     ValidationError, "java_method() is refused: it calls a Java method by name"),
    ("SELECT id FROM purchases WHERE reflect('java.lang.Thread', 'sleep', 9) IS NULL", ValidationError,
     "reflect() is refused"),
    ("CREATE TABLE x AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user HAVING try_reflect('a', 'b') = ''",
     ValidationError, "try_reflect() is refused"),
    ("DROP STREAM purchases", StateError, "queries CSAS_VALID_1 use it"),
    ("CREATE STREAM ext (id INT) WITH (path='/tmp'); DROP STREAM ext DELETE TOPIC", ValidationError, "is outside the topics folder"),
    ("SET 'auto.offset.reset' = 'sometimes'", ValidationError, "must be one of earliest, latest"),
    ("CREATE STREAM a (id INT); CREATE STREAM b (id INT); INSERT INTO a VALUES (1); PAUSE ALL; "
     "CREATE STREAM c AS SELECT nope FROM a", ValidationError, "unknown column 'nope'"),
]


def dump(engine):
    """Every row of every catalog table: 'nothing written' means this did not change."""
    with engine.catalog.engine.connect() as conn:
        return {t.name: sorted(map(tuple, conn.execute(select(t)))) for t in schema.metadata.sorted_tables}


def topic_files(home):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(home) for f in files
                  if not f.startswith("catalog.db"))


@pytest.mark.parametrize("sql, error, fragment", BAD_INPUT)
def test_bad_input_is_rejected_and_nothing_is_written(engine, home, sql, error, fragment):
    engine.execute(SETUP)
    before, files = dump(engine), topic_files(home)
    with pytest.raises(error) as info:
        engine.execute(sql)
    assert fragment in str(info.value)
    assert info.value.line is not None and info.value.col is not None
    assert dump(engine) == before
    assert topic_files(home) == files


def test_fifth_statement_error_points_at_its_line(engine):
    script = "\n".join(["CREATE STREAM a (id INT);", "CREATE STREAM b (id INT);",
                        "CREATE STREAM c AS SELECT * FROM a;", "PAUSE CSAS_C_1;",
                        "CREATE STREAM d AS SELECT id FROM b WHERE id = 'x';"])
    with pytest.raises(ValidationError) as info:
        engine.execute(script)
    assert info.value.line == 5
    assert engine.execute("SHOW STREAMS")[0].rows == []


def test_query_ids_are_stable_and_readable(engine):
    engine.execute(SETUP)
    results = engine.execute("CREATE TABLE stats AS SELECT user, COUNT(*) AS n, SUM(cost) AS total "
                             "FROM valid GROUP BY user; INSERT INTO purchases VALUES (1, 'a', 1.0);")
    assert results[0].query_id == "CTAS_STATS_2"
    assert [q["query_id"] for q in engine.queries()] == ["CSAS_VALID_1", "CTAS_STATS_2"]
    stats = engine.catalog.source("STATS")
    assert [(c.name, c.type.spark(), c.key) for c in stats.columns] == [
        ("user", "STRING", True), ("n", "BIGINT", False), ("total", "DOUBLE", False)]


def test_command_log_records_order_and_issuer(engine):
    engine.execute(SETUP, issuer="airflow:dag=d/run=r/task=t")
    engine.execute("PAUSE CSAS_VALID_1; SHOW QUERIES", issuer="user:ann")
    log = engine.catalog.commands.all()
    assert [c["statement"] for c in log] == [
        "CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE)",
        "CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0",
        "PAUSE CSAS_VALID_1"]
    assert [c["issuer"] for c in log] == ["airflow:dag=d/run=r/task=t"] * 2 + ["user:ann"]
    assert log[0]["seq"] < log[1]["seq"] < log[2]["seq"]


def test_pause_resume_terminate_set_desired_state(engine):
    engine.execute(SETUP + "CREATE STREAM big AS SELECT * FROM purchases WHERE cost > 100;")
    engine.execute("PAUSE CSAS_VALID_1")
    assert [q["desired"] for q in engine.queries()] == ["PAUSED", "RUNNING"]
    engine.execute("PAUSE ALL")
    assert [q["desired"] for q in engine.queries()] == ["PAUSED", "PAUSED"]
    engine.execute("RESUME ALL")
    assert [q["desired"] for q in engine.queries()] == ["RUNNING", "RUNNING"]
    engine.execute("TERMINATE CSAS_BIG_2")
    with pytest.raises(StateError, match="CSAS_BIG_2 is terminated and cannot be resumed"):
        engine.execute("RESUME CSAS_BIG_2")
    engine.execute("TERMINATE ALL")
    assert [q["desired"] for q in engine.queries()] == ["TERMINATED", "TERMINATED"]


def test_all_is_scoped_to_the_pipeline(engine):
    engine.execute(SETUP, pipeline="one")
    engine.execute("CREATE STREAM big AS SELECT * FROM purchases WHERE cost > 100", pipeline="two")
    engine.execute("PAUSE ALL", pipeline="one")
    assert {q["query_id"]: q["desired"] for q in engine.queries()} == {
        "CSAS_VALID_1": "PAUSED", "CSAS_BIG_2": "RUNNING"}


def test_insert_values_and_pull_query(engine, home):
    engine.execute(SETUP + "CREATE TABLE prices (sku STRING PRIMARY KEY, price DOUBLE);")
    engine.execute("INSERT INTO purchases VALUES (1, 'ann', 5); INSERT INTO purchases (id, user) VALUES (2, 'bob');"
                   "INSERT INTO prices VALUES ('a', 1.0); INSERT INTO prices VALUES ('a', 2.0); INSERT INTO prices VALUES ('b', 3.0);")
    rows = engine.execute("SELECT id, user, cost FROM purchases")[0].rows
    assert sorted(rows) == [[1, "ann", 5.0], [2, "bob", None]]
    assert sorted(engine.execute("SELECT * FROM prices")[0].rows) == [["a", 2.0], ["b", 3.0]]
    assert engine.execute("SELECT sku FROM prices WHERE price > 2.5 LIMIT 1")[0].rows == [["b"]]
    # every file in the topic is whole: temporary files are hidden and renamed into place
    names = os.listdir(os.path.join(home, "topics", "PURCHASES"))
    assert len(names) == 2 and not any(n.startswith(".") for n in names)


@pytest.mark.parametrize("fmt", ["JSON", "CSV", "PARQUET"])
def test_insert_values_in_every_format(engine, fmt):
    engine.execute(f"CREATE STREAM s (id INT, name STRING, ok BOOLEAN) WITH (value_format='{fmt}');"
                   "INSERT INTO s VALUES (1, 'x', TRUE); INSERT INTO s VALUES (2, NULL, FALSE);")
    assert sorted(engine.execute("SELECT * FROM s")[0].rows) == [[1, "x", True], [2, None, False]]


def test_alter_adds_columns_and_drop_removes(engine, home):
    engine.execute("CREATE STREAM s (id INT); ALTER STREAM s ADD COLUMN note STRING; INSERT INTO s VALUES (1, 'n');")
    assert engine.execute("SELECT note FROM s")[0].rows == [["n"]]
    engine.execute("DROP STREAM s DELETE TOPIC")
    assert not os.path.exists(os.path.join(home, "topics", "S"))
    assert engine.execute("DROP STREAM IF EXISTS s")[0].message == "S does not exist; nothing dropped"


def test_show_describe_explain(engine):
    engine.execute(SETUP)
    shown = engine.execute("SHOW QUERIES EXTENDED")[0]
    assert shown.columns[:4] == ["query_id", "pipeline", "state", "desired"]
    assert shown.rows[0][:6] == ["CSAS_VALID_1", "default", "PENDING", "RUNNING", 1, "VALID"]
    described = engine.execute("DESCRIBE valid")[0]
    assert "Written by: CSAS_VALID_1" in described.message
    assert described.rows == [["id", "INT", ""], ["user", "STRING", ""], ["cost", "DOUBLE", ""]]
    explained = dict(map(tuple, engine.execute("EXPLAIN CSAS_VALID_1")[0].rows))
    assert explained["spark_select"] == ("SELECT `id`, `user`, `cost` FROM sq_csas_valid_1_purchases "
                                         "AS purchases WHERE cost > 0")
    assert explained["sources"] == "PURCHASES"


DEPLOY = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE) WITH (value_format='JSON');
ALTER STREAM purchases ADD COLUMN note STRING;
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
CREATE OR REPLACE TABLE stats AS SELECT user, COUNT(*) AS n FROM valid GROUP BY user;
CREATE STREAM extra (id INT KEY, user STRING, cost DOUBLE, note STRING);
INSERT INTO extra SELECT * FROM purchases WHERE cost > 100;
"""

# a second script against DEPLOY's catalog -> the action of each statement, or the error
REDEPLOY = [
    (DEPLOY, ["unchanged"] * 6),
    ("create   stream PURCHASES (ID int key, USER string, COST double) with (VALUE_FORMAT='JSON')", ["unchanged"]),
    ("CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases WHERE cost > 1", ["replaced"]),
    ("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost DOUBLE, note STRING, n INT)", ["replaced"]),
    ("ALTER STREAM purchases ADD COLUMN n INT", ["altered"]),
    ("INSERT INTO extra SELECT * FROM purchases WHERE cost > 200", ["created"]),
    ("CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 1", "a stream named VALID already exists"),
    ("CREATE STREAM purchases (id INT KEY, user STRING)", ["unchanged"]),  # later columns were added
    ("CREATE STREAM purchases (id INT KEY, user STRING, price DOUBLE)", "a stream named PURCHASES already exists"),
    ("CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE) WITH (value_format='CSV')",
     "a stream named PURCHASES already exists"),
]


@pytest.mark.parametrize("script, expected", REDEPLOY)
def test_skip_unchanged_applies_a_script_again_without_changes(engine, script, expected):
    engine.execute(DEPLOY, skip_unchanged=True)
    before, log = dump(engine), len(engine.catalog.commands.all())
    if isinstance(expected, str):
        with pytest.raises(ValidationError, match=expected):
            engine.execute(script, skip_unchanged=True)
        assert dump(engine) == before
        return
    results = engine.execute(script, skip_unchanged=True)
    assert [r.action for r in results] == expected
    if set(expected) == {"unchanged"}:
        assert dump(engine) == before
        assert len(engine.catalog.commands.all()) == log  # nothing to log: nothing happened
    else:
        assert dump(engine) != before


def test_unchanged_queries_keep_their_ids_versions_and_desired_state(engine):
    engine.execute(DEPLOY, skip_unchanged=True)
    engine.execute("PAUSE CSAS_VALID_1")
    again = engine.execute(DEPLOY, skip_unchanged=True)
    assert [(r.query_id, r.version) for r in again if r.query_id] == [
        ("CSAS_VALID_1", 1), ("CTAS_STATS_2", 1), ("INSERTQUERY_3", 1)]
    assert {q["query_id"]: q["desired"] for q in engine.queries()}["CSAS_VALID_1"] == "PAUSED"
    # without skip_unchanged a second CREATE is an error, as before
    with pytest.raises(ValidationError, match="already exists"):
        engine.execute(DEPLOY)


def test_upgrade_and_replace_hand_the_engine_statements_not_rewritten_text(engine):
    """A comment where the old regex expected a space made upgrade() a plain CREATE ("already
    exists"); statements carry OR REPLACE as a field, so the text's spelling does not matter."""
    engine.execute(SETUP)
    upgraded = engine.upgrade("CREATE/* v2 */STREAM valid AS SELECT * FROM purchases WHERE cost > 1")
    assert (upgraded.query_id, upgraded.version, upgraded.action) == ("CSAS_VALID_1", 2, "replaced")
    rebuilt = engine.replace("CREATE/**/OR/**/REPLACE STREAM valid AS SELECT id, cost FROM purchases",
                             start_from="earliest")
    assert [r.query_id for r in rebuilt if r.action == "created"] == ["CSAS_VALID_2"]
    assert [c["statement"] for c in engine.catalog.commands.all()][-4:-1] == [
        "TERMINATE CSAS_VALID_1", "DROP STREAM VALID DELETE TOPIC", "SET 'auto.offset.reset' = 'earliest'"]


@pytest.mark.parametrize("action, query_id, fragment", [
    ("PAUSE", "ALL; DROP STREAM purchases DELETE TOPIC", "is not a plain SQL name"),
    ("PAUSE", "CSAS_VALID_1 SKIP BAD RECORDS", "is not a plain SQL name"),
    ("PAUSE", "x" * 129, "at most 128 characters"),
    ("DROP", "CSAS_VALID_1", "is not one of PAUSE, RESUME, TERMINATE"),
    ("PAUSE", 7, "must be a string"),
])
def test_control_takes_one_checked_query_id(engine, home, action, query_id, fragment):
    engine.execute(SETUP)
    before, files = dump(engine), topic_files(home)
    with pytest.raises(ParseError, match=fragment):
        engine.control(action, query_id)
    assert dump(engine) == before and topic_files(home) == files
