"""ksqlDB statement forms beyond the lifecycle: IF NOT EXISTS, SHOW TOPICS/PROPERTIES, UNSET."""

import pytest

from airflow_provider_streamql.errors import StreamQLError

DECLARED = "CREATE STREAM s (id INT KEY, x STRING); CREATE TABLE t (id INT PRIMARY KEY, y STRING);"

# script after DECLARED -> (message of its last result, or the error fragment), and the queries left
CASES = [
    ("CREATE STREAM IF NOT EXISTS s (other INT)", "Stream S exists; nothing created", []),
    ("CREATE STREAM IF NOT EXISTS u (id INT)", "Created stream U", []),
    ("CREATE TABLE IF NOT EXISTS s (id INT PRIMARY KEY)", "a stream named S already exists", []),
    ("CREATE STREAM IF NOT EXISTS n AS SELECT * FROM s; CREATE STREAM IF NOT EXISTS n AS SELECT x FROM s",
     "Stream N exists; nothing created", ["CSAS_N_1"]),
    ("SET 'auto.offset.reset' = 'earliest'; UNSET 'auto.offset.reset'", "Unset auto.offset.reset", []),
    ("UNSET 'no.such.thing'", "unknown property 'no.such.thing'", []),
]


@pytest.mark.parametrize("script, outcome, queries", CASES)
def test_statement_forms(engine, script, outcome, queries):
    engine.execute(DECLARED)
    try:
        message = engine.execute(script)[-1].message
    except StreamQLError as e:
        message = str(e)
    assert outcome in message
    assert [q["query_id"] for q in engine.queries()] == queries


def test_show_topics_and_properties(engine):
    engine.execute(DECLARED)
    topics = engine.execute("SHOW TOPICS")[0]
    assert topics.columns == ["name", "kind", "format", "topic"]
    assert [(r[0], r[1], r[3].endswith("/topics/" + r[0])) for r in topics.rows] == [
        ("S", "STREAM", True), ("T", "TABLE", True)]
    shown = engine.execute("SET 'auto.offset.reset' = 'earliest'; SHOW PROPERTIES; UNSET 'auto.offset.reset';"
                           "SHOW PROPERTIES")
    timestamp = ["starting.timestamp", None, "an ISO-8601 time with its zone, epoch milliseconds"]
    guarantee = ["processing.guarantee", None, "at_least_once, exactly_once_v2"]
    policy = ["on_error", None, "FAIL, LOG_AND_CONTINUE, PAUSE"]
    assert shown[1].rows == [["auto.offset.reset", "earliest", "earliest, latest"], timestamp, guarantee, policy]
    assert shown[3].rows == [["auto.offset.reset", None, "earliest, latest"], timestamp, guarantee, policy]
