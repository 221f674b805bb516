"""Dead letters of a query reading Kafka topics go to a Kafka topic (issue 30, part 3), as
ksqlDB users expect of a processing log: under LOG_AND_CONTINUE a poison pill goes to the
query's dead-letter topic, once per source record even when a batch runs again, and RESUME
... SKIP BAD RECORDS sends the record it skips there too; the stream <QUERY_ID>_DLQ over the
topic is read as any other (PRINT, pull queries, DESCRIBE). Through a real runtime and the
real broker; the planning checks without either."""
from __future__ import annotations

import json
import os
import re

import pytest

from airflow_provider_streamql.catalog.states import QueryState
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ValidationError
from airflow_provider_streamql.runtime.evolution import source_evolution
from airflow_provider_streamql.storage.checkpoints import last_committed_batch
from airflow_provider_streamql.storage.deadletter import dead_letter_topic
from airflow_provider_streamql.storage.layout import dead_letter_checkpoint

from .support import wait_until
from .test_kafka_lifecycle import MALFORMED, WRONG_TYPE, good, orders
from .test_storage_faults import garble

COPY = "CREATE STREAM copy WITH (kafka_topic='copy'{props}) AS SELECT * FROM {source} PARTITION BY id"

# WITH properties of the query -> its dead-letter topic, or a fragment of the error
TOPIC_CASES = [
    ("", "CSAS_COPY_1_DLQ"),
    (", on_error='LOG_AND_CONTINUE'", "CSAS_COPY_1_DLQ"),
    (", dead_letter_topic='orders.dead-letters_1'", "orders.dead-letters_1"),
    (", dead_letter_topic='bad topic'", "property dead_letter_topic = 'bad topic': must be a Kafka topic name"),
    (", dead_letter_topic=''", "property dead_letter_topic = '': must be a Kafka topic name"),
    (", dead_letter_topic='..'", "property dead_letter_topic = '..': must be a Kafka topic name"),
    (f", dead_letter_topic='{'x' * 250}'", "must be a Kafka topic name: 1 to 249 of the characters"),
    (", dead_letter_topic=5", "property dead_letter_topic = 5: must be a Kafka topic name"),
    (", dead_letter_topic='orders'", "property dead_letter_topic = 'orders': it is the topic of ORDERS; dead "
                                     "letters go to a topic of their own"),
    (", dead_letter_topic='copy'", "it is the topic of COPY"),
]


@pytest.mark.parametrize("props, expected", TOPIC_CASES)
def test_a_dead_letter_topic_is_named_by_the_query_or_after_it(sqlite_engine, props, expected):
    engine = sqlite_engine
    engine.execute(orders("orders"))
    statement = COPY.format(props=props, source="orders")
    if " " not in expected:
        engine.execute(statement)
        sources = engine.catalog.sources()
        assert dead_letter_topic(engine.catalog.query("CSAS_COPY_1"), sources) == expected
        # a CREATE OR REPLACE that does not restate it keeps it
        engine.execute(COPY.format(props="", source="orders").replace("CREATE", "CREATE OR REPLACE")
                       .replace("SELECT *", "SELECT id, item, qty"))
        assert dead_letter_topic(engine.catalog.query("CSAS_COPY_1"), sources) == expected
        return
    with pytest.raises(ValidationError, match=re.escape(expected)):
        engine.execute(statement)
    assert engine.catalog.source("COPY") is None  # nothing written


def test_a_query_reading_files_has_its_dead_letters_in_files(sqlite_engine):
    engine = sqlite_engine
    engine.execute("CREATE STREAM f (id INT KEY, item STRING, qty INT)")
    with pytest.raises(ValidationError, match=re.escape(
            "property dead_letter_topic = 'dlq': a dead-letter topic is for queries reading Kafka topics only; "
            "F is not one (its dead letters go to the stream CSAS_G_1_DLQ in files)")):
        engine.execute("CREATE STREAM g WITH (dead_letter_topic='dlq') AS SELECT * FROM f")
    engine.execute("CREATE STREAM g AS SELECT * FROM f")
    sources = engine.catalog.sources()
    assert dead_letter_topic(engine.catalog.query("CSAS_G_1"), sources) is None


@pytest.fixture
def kafka_engine(sqlite_url, home, kafka_broker):
    """The test's catalog through an engine with the broker's settings (for PRINT and pull
    queries of a topic)."""
    e = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_broker.bootstrap)
    yield e
    e.close()


def letters(kafka_topics, topic: str, isolation: str = "read_committed") -> list[tuple[str, dict]]:
    """The dead letters a reader of ``topic`` sees: (key, value) in offset order."""
    return [(k, json.loads(v)) for k, v, _, _ in kafka_topics.read_to_end(topic, isolation)]


def test_log_and_continue_sends_bad_records_to_the_dead_letter_topic_once(kafka_spark, kafka_topics, sqlite_engine,
                                                                          kafka_engine, runtimes):
    """on_error='LOG_AND_CONTINUE' on a topic: the output has exactly the good records; the
    dead-letter topic exactly the two bad ones (malformed JSON, a wrong type), keyed by their
    positions, with the fields of a dead-letter stream; the stream <QUERY_ID>_DLQ over it is
    read by PRINT, pull queries and DESCRIBE. The dead-letter batch run again (the runtime
    stopped after producing it, before Spark recorded its commit) adds no second copy."""
    engine = sqlite_engine
    source, sink, dlq = kafka_topics.new("orders"), kafka_topics.new("copy"), kafka_topics.new("dlq")
    engine.execute(orders(source) + "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE STREAM copy WITH (kafka_topic='{sink}', on_error='LOG_AND_CONTINUE', "
                   f"dead_letter_topic='{dlq}') AS SELECT * FROM orders PARTITION BY id")
    kafka_topics.produce(source, [good(1), ("2", MALFORMED), good(3), ("4", WRONG_TYPE), good(5)])
    runtime = runtimes.start(engine)
    out = kafka_topics.consume(sink, 3, timeout=120)
    assert [(k, json.loads(v)) for k, v, _, _ in out] == [good(1), good(3), good(5)]
    wait_until(lambda: len(engine.bad_records("CSAS_COPY_1")) == 2, 120, "two logged bad records")
    wait_until(lambda: len(kafka_topics.read_to_end(dlq)) == 2, 120, "two dead letters")
    expected = [
        (f"kafka:{source}/0@1", MALFORMED, "malformed JSON: Expecting ',' delimiter (column 25)"),
        (f"kafka:{source}/0@3", WRONG_TYPE, "value 'three' does not fit column 'qty' of type INT"),
    ]
    seen = letters(kafka_topics, dlq)
    assert [(k, v["file"], v["raw"], v["error"]) for k, v in seen] == [(p, p, raw, error) for p, raw, error in expected]
    assert {(v["query_id"], v["source"], v["line"], v["status"], v["batch_id"]) for _, v in seen} == {
        ("CSAS_COPY_1", "ORDERS", None, "LOGGED", 0)}
    assert sorted(seen[0][1]) == sorted(["query_id", "source", "file", "line", "raw", "error", "batch_id", "status",
                                         "recorded_at", "handled_by"])
    # the stream over it, as any stream on a topic
    assert dlq in engine.execute("DESCRIBE CSAS_COPY_1_DLQ")[0].message
    printed = kafka_engine.execute("PRINT CSAS_COPY_1_DLQ FROM BEGINNING")[0]
    assert [(row[1], json.loads(row[2])["raw"]) for row in printed.rows] == [(p, raw) for p, raw, _ in expected]
    pulled = kafka_engine.execute("SELECT file, raw, error, status FROM CSAS_COPY_1_DLQ")[0].rows
    assert sorted(map(tuple, pulled)) == [(p, raw, error, "LOGGED") for p, raw, error in expected]
    assert engine.state("CSAS_COPY_1") == "RUNNING"

    # the dead-letter batch run again: the runtime stops, Spark's commit of it is taken back
    checkpoint = dead_letter_checkpoint(engine.query("CSAS_COPY_1").checkpoint)
    runtimes.stop(runtime)
    assert last_committed_batch(checkpoint) == 0  # one batch read every record
    os.remove(os.path.join(checkpoint, "commits", "0"))
    runtimes.start(engine)
    wait_until(lambda: last_committed_batch(checkpoint) == 0, 120, "the dead-letter batch run again")
    assert letters(kafka_topics, dlq) == seen
    assert letters(kafka_topics, dlq, "read_uncommitted") == seen  # not even an aborted copy
    assert len(engine.bad_records("CSAS_COPY_1")) == 2

    # a crash damaged the companion's checkpoint: named beside the query's, with no RESTORE
    # (snapshots hold the query's checkpoint alone); not started, so nothing is read again
    engine.execute("PAUSE CSAS_COPY_1")
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=60)
    garble(os.path.join(checkpoint, "commits", "0"))
    engine.execute("RESUME CSAS_COPY_1")
    wait_until(lambda: engine.query("CSAS_COPY_1").observed_state == QueryState.ERROR, 60, "ERROR on the damage")
    failed = engine.query("CSAS_COPY_1")
    assert "dead-letter checkpoint" in failed.error and "'CSAS_COPY_1.dead_letters/commits/0'" in failed.error
    assert "RESTORE" not in failed.error and failed.retry_at is None
    assert letters(kafka_topics, dlq) == seen


def test_a_dead_letter_frame_is_built_again_only_when_what_it_reads_changed(kafka_spark, kafka_topics, sqlite_engine):
    """RESUME restarts the companion of a LOG_AND_CONTINUE query reading a Kafka topic on the
    frame it ran (runtime/connectors.py Frames) unless its sources, its starting offsets or its
    version changed. A query reading files has none (its dead letters are found after its
    batches)."""
    from airflow_provider_streamql.runtime.companion import dead_letter_frame
    from airflow_provider_streamql.runtime.connectors import Frames
    from airflow_provider_streamql.runtime.evolution import source_evolution
    spark, engine = kafka_spark, sqlite_engine
    engine.execute(orders(kafka_topics.new("orders")) + "CREATE STREAM o AS SELECT * FROM orders WHERE qty > 0;"
                   "CREATE STREAM f (id INT, v DOUBLE); CREATE STREAM g AS SELECT * FROM f WHERE v > 0")
    query, frames = engine.query("CSAS_O_1"), Frames()

    def frame(going_on=None, query=query, source="ORDERS"):
        with source_evolution(spark, bool(query.plan.source_names)):  # as a start builds it
            return frames.reused(dead_letter_frame, spark, query, query.plan, {source: engine.catalog.source(source)},
                                 going_on or {})

    assert frame(query=engine.query("CSAS_G_2"), source="F") is None  # files: no companion
    first = frame()
    assert first is not None and frame() is first  # a plain RESUME
    with source_evolution(spark, bool(query.plan.source_names)):
        assert frames.frame(spark, query, query.plan, {"ORDERS": engine.catalog.source("ORDERS")}, None)[0] is not first
    assert frame() is first  # the query's own frame is kept apart
    assert frame({"t": {"0": 7}}) is not first  # a new companion of a query that has read a topic
    kept = frame()
    assert kept is not first and frame() is kept  # its checkpoint made, it starts from that
    engine.execute("ALTER STREAM orders ADD COLUMN w INT")  # the source read now has another column
    before = frame()
    assert before is not kept and frame() is before
    frames.forget(query.id)  # TERMINATE: it will not run again as it was
    assert frame() is not before
    engine.execute("CREATE OR REPLACE STREAM o AS SELECT * FROM orders WHERE qty > 1")
    assert frame(query=engine.query("CSAS_O_1")) is not before  # version 2


def test_skip_bad_records_on_a_held_query_sends_the_record_to_the_dead_letter_topic(
        kafka_spark, kafka_broker, kafka_topics, sqlite_engine, runtimes):
    """on_error='PAUSE' on a topic holds the query at a malformed record; RESUME ... SKIP BAD
    RECORDS moves past exactly that record and sends it to the query's dead-letter topic
    (named after the query by default), marked SKIPPED with who skipped it."""
    engine = sqlite_engine
    source = kafka_topics.new("orders")
    # the output in files, written once per batch (Spark's Kafka sink may produce the records
    # before the bad one again each time the batch runs: at least once)
    engine.execute(orders(source) + "SET 'auto.offset.reset' = 'earliest';"
                   "CREATE STREAM copy WITH (on_error='PAUSE') AS "
                   "SELECT * FROM orders PARTITION BY id")
    dlq = "CSAS_COPY_1_DLQ"
    admin = kafka_broker.admin()
    if dlq in admin.list_topics(timeout=30).topics:  # an earlier test's query of that id left it
        admin.delete_topics([dlq])[dlq].result(30)
    kafka_topics.produce(source, [good(1), ("2", MALFORMED), good(3)])
    runtimes.start(engine)
    wait_until(lambda: engine.bad_records("CSAS_COPY_1", "PENDING"), 120, "the query held at the record")
    result = engine.execute("RESUME CSAS_COPY_1 SKIP BAD RECORDS", issuer="user:ops")[0]
    assert "1 bad record(s) skipped (sent to CSAS_COPY_1_DLQ)" in result.message
    wait_until(lambda: kafka_topics.read_to_end(dlq), 120, "the skipped record in the dead-letter topic")
    wait_until(lambda: len(engine.execute("SELECT * FROM copy")[0].rows) == 2, 120, "the good records in the output")
    assert sorted(map(tuple, engine.execute("SELECT id, item, qty FROM copy")[0].rows)) == [(1, "item1", 1),
                                                                                           (3, "item3", 3)]
    ((key, letter),) = letters(kafka_topics, dlq)
    assert (key, letter["file"], letter["raw"], letter["status"], letter["handled_by"]) == (
        f"kafka:{source}/0@1", f"kafka:{source}/0@1", MALFORMED, "SKIPPED", "user:ops")
    assert engine.catalog.source(dlq).kafka_topic == dlq


def test_a_query_stopped_under_fail_then_set_to_log_and_continue_sends_the_record_that_stopped_it(
        kafka_spark, kafka_topics, sqlite_engine, runtimes):
    """A query reading from the latest offsets stops at a malformed record under FAIL; its
    policy changed to LOG_AND_CONTINUE (in place), it goes on past the record, and the record
    is in its dead-letter topic: the companion query made then starts where the query goes
    on, not at the topic's end."""
    engine = sqlite_engine
    source = kafka_topics.new("orders")
    copy = "CREATE {how} STREAM copy WITH (on_error='{policy}') AS SELECT * FROM orders PARTITION BY id"
    engine.execute(orders(source) + copy.format(how="", policy="FAIL"))
    dlq = "CSAS_COPY_1_DLQ"
    admin = kafka_topics.broker.admin()
    if dlq in admin.list_topics(timeout=30).topics:  # an earlier test's query of that id left it
        admin.delete_topics([dlq])[dlq].result(30)
    runtimes.start(engine)
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=120)
    kafka_topics.produce(source, [good(1)])
    wait_until(lambda: len(engine.execute("SELECT * FROM copy")[0].rows) == 1, 120, "the first record in the output")
    kafka_topics.produce(source, [("2", MALFORMED), good(3)])
    wait_until(lambda: engine.bad_records("CSAS_COPY_1"), 120, "the query stopped at the record")
    engine.execute(copy.format(how="OR REPLACE", policy="LOG_AND_CONTINUE"))
    wait_until(lambda: len(engine.execute("SELECT * FROM copy")[0].rows) == 2, 120, "the query past the record")
    wait_until(lambda: kafka_topics.read_to_end(dlq), 120, "the record in the dead-letter topic")
    assert [(key, letter["raw"]) for key, letter in letters(kafka_topics, dlq)] == [(f"kafka:{source}/0@1", MALFORMED)]


def test_a_query_whose_companion_cannot_start_does_not_run(kafka_spark, kafka_topics, sqlite_engine, runtimes):
    """Under LOG_AND_CONTINUE a query reading a topic starts with its dead-letter companion or
    not at all: when Spark refuses the companion (here its name is taken in the session), the
    start fails as a whole, with the reason, and the query reads nothing meanwhile (a batch it
    read alone would pass its bad records with no one to send them). The retry starts both,
    and the bad record waiting in the topic is sent."""
    engine = sqlite_engine
    source, sink, dlq = kafka_topics.new("orders"), kafka_topics.new("copy"), kafka_topics.new("dlq")
    engine.execute(orders(source) + "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE STREAM copy WITH (kafka_topic='{sink}', dead_letter_topic='{dlq}') AS "
                   "SELECT * FROM orders PARTITION BY id")
    kafka_topics.produce(source, [good(1), ("2", MALFORMED)])
    with source_evolution(kafka_spark, False):  # as the runtime starts its queries: one setting at a time
        squatter = (kafka_spark.readStream.format("rate").load().writeStream.format("noop")
                    .queryName("CSAS_COPY_1__dead_letters").start())
    try:
        runtimes.start(engine)
        wait_until(lambda: "CSAS_COPY_1__dead_letters" in (engine.query("CSAS_COPY_1").error or ""), 120,
                   "the start refused")
        assert engine.query("CSAS_COPY_1").observed_state == QueryState.ERROR
        assert "CSAS_COPY_1" not in [q.name for q in kafka_spark.streams.active]
        assert kafka_topics.read_to_end(sink) == []
    finally:
        squatter.stop()
    assert [(k, json.loads(v)) for k, v, _, _ in kafka_topics.consume(sink, 1, timeout=120)] == [good(1)]
    wait_until(lambda: len(kafka_topics.read_to_end(dlq)) == 1, 120, "the dead letter")
    assert [(k, v["raw"]) for k, v in letters(kafka_topics, dlq)] == [(f"kafka:{source}/0@1", MALFORMED)]
    assert engine.state("CSAS_COPY_1") == "RUNNING"
