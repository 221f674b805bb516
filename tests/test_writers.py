"""Several writers of one stream (issue 15, item 5): each INSERT INTO ... SELECT is its own
query with its own ID and checkpoint; the output of a CREATE STREAM AS SELECT takes none."""
import pytest

from airflow_provider_streamql.errors import ValidationError

SOURCES = """
CREATE STREAM clicks (user STRING, page STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM taps (user STRING, screen STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM events (user STRING, what STRING, ts TIMESTAMP) WITH (timestamp='ts');
"""


def test_each_writer_is_its_own_query(engine):
    engine.execute(SOURCES)
    results = engine.execute("INSERT INTO events SELECT user, page AS what, ts FROM clicks;"
                             "INSERT INTO events SELECT user, screen AS what, ts FROM taps")
    ids = [r.query_id for r in results]
    assert len(set(ids)) == 2
    queries = {q.id: q for q in (engine.query(i) for i in ids)}
    assert {q.sink for q in queries.values()} == {"EVENTS"}
    assert len({q.checkpoint for q in queries.values()}) == 2
    assert [q.sources for q in queries.values()] == [["CLICKS"], ["TAPS"]]


def test_insert_into_a_query_output_is_refused_and_says_how_to_merge(engine):
    engine.execute(SOURCES + "CREATE STREAM ann AS SELECT user, page AS what, ts FROM clicks WHERE user = 'ann';")
    before = [q["query_id"] for q in engine.queries()]
    with pytest.raises(ValidationError) as info:
        engine.execute("INSERT INTO ann SELECT user, screen AS what, ts FROM taps")
    message = str(info.value)
    assert "ANN is the output of query CSAS_ANN_1" in message
    assert "_spark_metadata" in message
    assert "CREATE STREAM <merged> (user STRING, what STRING, ts TIMESTAMP)" in message
    assert [q["query_id"] for q in engine.queries()] == before


def test_insert_into_a_table_is_refused(engine):
    engine.execute(SOURCES + "CREATE TABLE per_user AS SELECT user, COUNT(*) AS n FROM clicks GROUP BY user;")
    with pytest.raises(ValidationError, match="PER_USER is a TABLE, not a STREAM"):
        engine.execute("INSERT INTO per_user SELECT user, 1 AS n FROM taps")
