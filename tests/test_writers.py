"""Several writers of one stream (issue 15, item 5): each INSERT INTO ... SELECT is its own
query with its own ID and checkpoint, into a declared stream or a CREATE STREAM AS SELECT output
(written as whole files since several writers became possible; an older one takes none)."""
import pytest

from airflow_provider_streamql.catalog.model import BATCH_FILES
from airflow_provider_streamql.errors import StateError, ValidationError

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


def _source(engine, name):
    with engine.catalog.transaction() as conn:
        return engine.catalog.snapshot(conn).sources[name]


def _as_before_several_writers(engine, name):
    """Make ``name`` look like an output created by an earlier release (no BATCH_FILES)."""
    src = _source(engine, name)
    del src.properties[BATCH_FILES]
    with engine.catalog.transaction() as conn:
        engine.catalog.update_source(conn, src)


def test_insert_into_a_query_output_is_another_writer(engine):
    """ksqlDB's multiple writers: CREATE STREAM merged AS SELECT ... FROM a; INSERT INTO
    merged SELECT ... FROM b. A new CSAS output is written as whole files, so it takes more."""
    engine.execute(SOURCES + "CREATE STREAM merged AS SELECT user, page AS what, ts FROM clicks;")
    assert _source(engine, "MERGED").batch_files
    (result,) = engine.execute("INSERT INTO merged SELECT user, screen AS what, ts FROM taps")
    insert = engine.query(result.query_id)
    assert (insert.kind, insert.sink, insert.sources) == ("INSERT", "MERGED", ["TAPS"])
    assert insert.checkpoint != engine.query(_source(engine, "MERGED").writer_query).checkpoint
    with pytest.raises(ValidationError, match="do not match MERGED's"):
        engine.execute("INSERT INTO merged SELECT user, ts FROM taps")
    # the same script again changes nothing: the marker is not a change
    script = SOURCES + (
        "CREATE STREAM merged AS SELECT user, page AS what, ts FROM clicks;"
        "INSERT INTO merged SELECT user, screen AS what, ts FROM taps;"
    )
    assert {i.action for i in engine.plan(script).items} == {"unchanged"}
    assert _source(engine, "MERGED").batch_files


def test_replacing_one_writer_of_a_merged_output_is_rejected(engine):
    """As in ksqlDB (KLIP-28): CREATE OR REPLACE of a sink INSERT INTO queries write is refused."""
    engine.execute(SOURCES + "CREATE STREAM merged AS SELECT user, page AS what, ts FROM clicks;")
    (insert,) = engine.execute("INSERT INTO merged SELECT user, screen AS what, ts FROM taps")
    replacement = "CREATE OR REPLACE STREAM merged AS SELECT user, page AS what, ts FROM clicks WHERE user = 'ann'"
    report = engine.validate(replacement)
    assert report.verdict == "REJECTED"
    assert any(f.code == "MULTIPLE_WRITERS" and insert.query_id in f.message for f in report.findings)
    with pytest.raises(ValidationError, match="MULTIPLE_WRITERS"):
        engine.execute(replacement)
    with pytest.raises(StateError, match="cannot drop MERGED"):
        engine.execute("DROP STREAM merged")
    engine.execute(f"TERMINATE {insert.query_id}")
    (replaced,) = engine.execute(replacement)
    assert replaced.action == "replaced"
    assert _source(engine, "MERGED").batch_files  # kept by the replacement


def test_the_marker_is_never_taken_from_a_with_clause(engine):
    engine.execute(SOURCES)
    with pytest.raises(ValidationError, match="unknown property 'batch_files'"):
        engine.execute("CREATE STREAM mine WITH (batch_files=true) AS SELECT user, page AS what, ts FROM clicks")
    with pytest.raises(ValidationError, match="unknown property 'batch_files'"):
        engine.execute("CREATE STREAM mine (user STRING) WITH (batch_files=true)")
    engine.execute("CREATE TABLE per_user AS SELECT user, COUNT(*) AS n FROM clicks GROUP BY user;")
    assert not _source(engine, "PER_USER").batch_files  # a table: its changelog
    engine.execute("CREATE STREAM on_kafka WITH (kafka_topic='clicks') AS SELECT user, page AS what, ts FROM clicks")
    assert not _source(engine, "ON_KAFKA").batch_files  # a Kafka output keeps the Kafka sink


def test_insert_into_a_query_output_is_refused_and_says_how_to_merge(engine):
    """An output created before several writers were possible keeps Spark's file sink."""
    engine.execute(SOURCES + "CREATE STREAM ann AS SELECT user, page AS what, ts FROM clicks WHERE user = 'ann';")
    _as_before_several_writers(engine, "ANN")
    before = [q["query_id"] for q in engine.queries()]
    with pytest.raises(ValidationError) as info:
        engine.execute("INSERT INTO ann SELECT user, screen AS what, ts FROM taps")
    message = str(info.value)
    assert "ANN is the output of query CSAS_ANN_1" in message
    assert "created before several writers were possible" in message
    assert "_spark_metadata" in message
    assert "DROP STREAM ANN DELETE TOPIC" in message
    assert "CREATE STREAM <merged> (user STRING, what STRING, ts TIMESTAMP)" in message
    assert [q["query_id"] for q in engine.queries()] == before


def test_insert_into_a_table_is_refused(engine):
    engine.execute(SOURCES + "CREATE TABLE per_user AS SELECT user, COUNT(*) AS n FROM clicks GROUP BY user;")
    with pytest.raises(ValidationError, match="PER_USER is a TABLE, not a STREAM"):
        engine.execute("INSERT INTO per_user SELECT user, 1 AS n FROM taps")
