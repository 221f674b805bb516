"""DESCRIBE <source> EXTENDED and SHOW QUERIES EXTENDED with ksqlDB's fields, on real
runtimes: the local runtime statistics move as records flow, a bad record under FAIL shows up
as the query's error and a failed message, and a paused Kafka query's consumer lag counts the
records produced while it was paused; the CLI prints them as ksqlDB's CLI does, or as JSON."""
from __future__ import annotations

import json
import re

import pytest

from airflow_provider_streamql.cli import main
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StreamQLError

from .support import wait_until
from .test_bad_records import MALFORMED, PAYMENTS, good, produce, start


def described(engine, name: str):
    return engine.execute(f"DESCRIBE {name} EXTENDED")[0]


def shown(engine, query_id: str):
    result = engine.execute("SHOW QUERIES EXTENDED")[0]
    return result, next(d for d in result.description if d.id == query_id)


def cli(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_statistics_move_with_the_records_and_a_failed_record_is_an_error(sqlite_engine, home, runtimes, capsys):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='FAIL') AS SELECT * FROM payments;")
    before = described(engine, "payments")
    assert before.description.statistics.total_messages == 0
    assert before.description.statistics.last_message is None
    start(engine, runtimes, "CSAS_COPY_1")
    produce(engine, "payments", [good(i) for i in range(1, 4)], "part-0.json")
    wait_until(lambda: described(engine, "payments").description.statistics.total_messages == 3, 90,
               "three records counted")

    source = described(engine, "payments")
    stats = source.description.statistics
    assert (stats.failed_messages, stats.last_failed) == (0, None) and stats.last_message is not None
    lines = source.message.splitlines()
    for line in ("Name                 : PAYMENTS", "Type                 : STREAM",
                 "Timestamp field      : Not set - using <ROWTIME>", "Value format         : JSON",
                 "Queries that read from this STREAM", "Local runtime statistics"):
        assert line in lines, source.message
    assert any(line.startswith("CSAS_COPY_1 (RUNNING) : CREATE STREAM copy") for line in lines)
    assert " id     | INT              (key)" in lines  # ksqlDB's Field | Type table
    assert "consumer-total-messages:         3" in source.message
    _, query = shown(engine, "CSAS_COPY_1")
    assert (query.status, query.statistics.total_messages, query.errors) == ("RUNNING", 3, ())
    assert query.overridden_properties == {"on_error": "FAIL"}
    assert query.sources == ("PAYMENTS",) and query.sinks == ("COPY",)

    produce(engine, "payments", [good(4), MALFORMED], "part-1.json")
    engine.wait_for_state("CSAS_COPY_1", "ERROR", timeout=90)
    result, query = shown(engine, "CSAS_COPY_1")
    assert query.statistics.failed_messages == 1 and query.statistics.last_failed is not None
    (user,) = [e for e in query.errors if e.type == "USER"]
    assert user.message.startswith("FAILED at ") and "malformed JSON" in user.message
    assert "Error Type           : USER" in result.message and "Host Query Status    : {" in result.message
    assert described(engine, "payments").description.statistics.failed_messages == 1

    # the CLI: ksqlDB's layout as text, the typed fields as JSON
    where = ["--home", home, "--catalog", engine.catalog.url]
    text = cli(capsys, "exec", *where, "DESCRIBE payments EXTENDED")
    assert "consumer-failed-messages:         1" in text and "Statement            : CREATE STREAM" in text
    assert "| column" not in text  # the fields' table is ksqlDB's, inside the layout
    (out,) = json.loads(cli(capsys, "exec", *where, "--json", "SHOW QUERIES EXTENDED"))
    (copy,) = out["description"]
    assert (copy["id"], copy["status"], copy["statistics"]["total_messages"]) == ("CSAS_COPY_1", "ERROR", 3)
    assert "USER" in [e["type"] for e in copy["errors"]]


def test_a_paused_kafka_query_shows_its_consumer_lag(kafka_spark, kafka_topics, kafka_broker, sqlite_url, home,
                                                     runtimes):
    """The positions of the query's last committed batch (its checkpoint) against the topic's
    end offsets: records produced while it is paused are its lag, partition by partition."""
    engine = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_broker.bootstrap)
    source, sink = kafka_topics.new("orders", partitions=2), kafka_topics.new("out")
    engine.execute(f"CREATE STREAM orders (id INT KEY, item STRING) WITH (kafka_topic='{source}');"
                   "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE STREAM out WITH (kafka_topic='{sink}') AS SELECT * FROM orders")
    query_id = engine.catalog.source("OUT").writer_query
    kafka_topics.produce(source, [(str(i), {"item": f"i{i}"}) for i in range(4)])
    runtimes.start(engine)
    kafka_topics.consume(sink, 4, timeout=120)
    # the sink has the records once the batch wrote them, its checkpoint once it committed them:
    # a PAUSE in between stops the batch before its commit (it is run again on RESUME)
    wait_until(lambda: described(engine, "orders").description.consumer_offsets[0].offsets, timeout=60)
    engine.execute(f"PAUSE {query_id}")
    engine.wait_for_state(query_id, "PAUSED", timeout=60)
    kafka_topics.produce(source, [(str(i), {"item": f"i{i}"}) for i in range(4, 9)])

    result = described(engine, "orders")
    d = result.description
    (group,) = d.consumer_offsets
    assert (d.partitions, d.key_format, group.group_id, group.kafka_topic) == (2, "JSON", query_id, source)
    assert [o.partition for o in group.offsets] == [0, 1]
    assert sum(o.lag for o in group.offsets) == 5
    assert sum(o.end_offset for o in group.offsets) == 9
    assert d.statistics.total_messages == 4
    assert f"Kafka topic          : {source} (partitions: 2)" in result.message
    assert f"Consumer Group       : {query_id}" in result.message
    assert f"Max lag              : {group.max_lag}" in result.message
    assert " Partition | Start Offset | End Offset | Offset | Lag" in result.message
    # `streamql queries` and the page: the same lag, in records (a Kafka topic has no files),
    # and no rate for a query that is not running
    row = next(r for r in engine.queries() if r["query_id"] == query_id)
    assert (row["state"], row["lag_files"], row["lag_records"], row["rows_per_sec"]) == ("PAUSED", None, 5, None)
    engine.close()


def test_a_kafka_source_described_without_kafka_says_why_it_shows_no_positions(sqlite_engine):
    engine = sqlite_engine
    engine.execute("CREATE STREAM k (id STRING KEY, v INT) WITH (kafka_topic='k');"
                   "CREATE STREAM k2 WITH (kafka_topic='k2') AS SELECT * FROM k")
    result = described(engine, "k")
    (group,) = result.description.consumer_offsets
    assert (group.group_id, group.offsets) == ("CSAS_K2_1", ())
    assert "this engine has no Kafka bootstrap servers" in group.note
    assert "Consumer Group       : CSAS_K2_1" in result.message
    assert (result.description.key_format, result.description.partitions) == ("KAFKA", None)
    assert "Kafka topic          : k" in result.message.splitlines()


# a name handed to Engine.describe_source -> the error it gets (never SQL text to parse)
NAMES = [
    ("x; DROP STREAM s", "is not a plain SQL name"),
    ("nope", "unknown stream or table 'nope'"),
    ("CSAS_T_1", "unknown stream or table 'CSAS_T_1'"),  # a query: DESCRIBE ... EXTENDED of a source only
]


@pytest.mark.parametrize("name, error", NAMES)
def test_describe_source_takes_only_a_source_name(sqlite_engine, name, error):
    sqlite_engine.execute("CREATE STREAM s (id INT KEY, v STRING); CREATE STREAM t AS SELECT * FROM s")
    with pytest.raises(StreamQLError, match=re.escape(error)):
        sqlite_engine.describe_source(name)


def test_the_engine_gives_the_typed_descriptions(sqlite_engine):
    """What a DAG reads through the engine: the declared source's statement rendered from the
    catalog, its fields, the query's plan and overridden properties."""
    engine = sqlite_engine
    engine.execute("CREATE TABLE users (id STRING PRIMARY KEY, name STRING) WITH (partitions=2);"
                   "SET 'auto.offset.reset' = 'earliest';"
                   "CREATE TABLE names AS SELECT id, UCASE(name) AS name FROM users")
    users = engine.describe_source("users")
    assert users.statement == "CREATE TABLE `USERS` (`id` STRING PRIMARY KEY, `name` STRING) WITH (PARTITIONS=2);"
    assert [(f.name, f.type, f.key) for f in users.fields] == [("id", "STRING", "primary key"), ("name", "STRING", "")]
    assert [q.id for q in users.read_queries] == ["CTAS_NAMES_1"] and users.write_queries == ()
    (query,) = engine.describe_queries()
    assert (query.id, query.status, query.runtime, query.sources, query.sinks) == (
        "CTAS_NAMES_1", "PENDING", None, ("USERS",), ("NAMES",))
    assert query.overridden_properties == {"auto.offset.reset": "earliest"}
    assert query.execution_plan.splitlines()[0].startswith(" > [ SINK ] | NAMES (file topic)")
    assert query.to_dict()["statistics"]["total_messages"] == 0
