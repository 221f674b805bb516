"""Kafka topics, up to what can run without a broker: the statements, the connector
options a runtime gives Spark, decoding Kafka records into declared columns (with the bad
record guard) and encoding output, on real Spark DataFrames shaped like the connector's;
and the clear error a runtime without the connector gives. The compose stack covers the
rest (docs/deployment.md)."""
from __future__ import annotations

import json

import pytest

from airflow_provider_streamql.errors import StateError, ValidationError
from airflow_provider_streamql.runtime import kafka
from airflow_provider_streamql.runtime.badrecords import RecordGuard
from airflow_provider_streamql.runtime.tables import HavingChanges

ORDERS = "CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='orders');"


def test_kafka_streams_and_queries_are_declared(sqlite_engine):
    engine = sqlite_engine
    engine.execute(ORDERS + "CREATE STREAM big WITH (kafka_topic='big-orders') AS SELECT * FROM orders WHERE qty > 10;"
                   "CREATE TABLE per_item AS SELECT item, SUM(qty) AS qty FROM orders GROUP BY item;"
                   "SET 'auto.offset.reset' = 'earliest'; CREATE STREAM copy AS SELECT * FROM orders;")
    orders = engine.catalog.source("ORDERS")
    assert (orders.path, orders.properties) == ("kafka:orders", {"kafka_topic": "orders"})
    big = engine.query("CSAS_BIG_1")
    assert big.shape.to_json()["sink"] == {"path": "kafka:big-orders", "format": "JSON", "writer": "kafka sink"}
    assert engine.query("CSAS_COPY_3").settings["auto.offset.reset"] == "earliest"
    # a Kafka sink may change its topic in place
    result = engine.execute("CREATE OR REPLACE STREAM big WITH (kafka_topic='large-orders') AS "
                            "SELECT * FROM orders WHERE qty > 10")[0]
    assert [f["code"] for f in result.report["findings"]] == ["KAFKA_TOPIC_CHANGED"]
    assert engine.catalog.source("BIG").properties["kafka_topic"] == "large-orders"


# statement -> fragment of the error; nothing is written
BAD = [
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', path='p')", "either kafka_topic or path"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', value_format='CSV')", "value_format must be JSON"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='a,b')", "must name one Kafka topic"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', bootstrap_servers='h:9092')",
     "Kafka connection settings come from the runtime's configuration"),
    ("INSERT INTO orders VALUES (1, 'tea', 2)", "produce to it with a Kafka producer"),
    ("SELECT * FROM orders", "pull queries read file topics; ORDERS (Kafka topic 'orders')"),
    ("DROP STREAM orders DELETE TOPIC", "does not delete the Kafka topic 'orders'"),
    ("CREATE STREAM f (id INT); SET 'auto.offset.reset' = 'latest'; CREATE STREAM g AS SELECT * FROM f",
     "'latest' is not supported for file topics (F)"),
]


@pytest.mark.parametrize("sql, fragment", BAD)
def test_bad_kafka_statements(sqlite_engine, sql, fragment):
    sqlite_engine.execute(ORDERS)
    with pytest.raises(ValidationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        sqlite_engine.execute(sql)
    assert [s.name for s in sqlite_engine.catalog.snapshot(sqlite_engine.catalog.engine.connect()).sources.values()] == ["ORDERS"]


CONF = {"spark.streamql.kafka.bootstrap.servers": "broker:9092",
        "spark.streamql.kafka.security.protocol": "SASL_SSL",
        "spark.streamql.kafka.sasl.mechanism": "PLAIN", "spark.sql.shuffle.partitions": "4"}


def test_connector_options_come_from_the_runtime_configuration(sqlite_engine):
    sqlite_engine.execute(ORDERS + "CREATE STREAM big WITH (kafka_topic='big') AS SELECT * FROM orders")
    options = kafka.options_from(CONF)
    assert options == {"kafka.bootstrap.servers": "broker:9092", "kafka.sasl.mechanism": "PLAIN",
                       "kafka.security.protocol": "SASL_SSL"}
    reader = kafka.reader_spec(sqlite_engine.catalog.source("ORDERS"), options, "latest")
    assert (reader.format, reader.options) == ("kafka", {**options, "subscribe": "orders",
                                                         "startingOffsets": "latest", "failOnDataLoss": "true"})
    writer = kafka.writer_spec(sqlite_engine.catalog.source("BIG"), options)
    assert writer.options == {**options, "topic": "big"}
    with pytest.raises(StateError, match="no Kafka bootstrap servers: start it with --conf "
                                         "spark.streamql.kafka.bootstrap.servers=HOST:9092"):
        kafka.reader_spec(sqlite_engine.catalog.source("ORDERS"), {}, "latest")


def kafka_rows(spark, records):
    """A DataFrame shaped like the Kafka connector's (key and value bytes, position)."""
    rows = [(None if k is None else k.encode(), v.encode(), "orders", 0, offset)
            for offset, (k, v) in enumerate(records)]
    return spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")


RECORDS = [("1", '{"item": "tea", "qty": 2}'), ("2", '{"item": "mug", "qty": "many"}'),
           ("3", "not json"), (None, '{"item": "pot", "qty": 1}'), ("5", '{"item": "cup", "qty": 4}')]


@pytest.mark.spark
def test_kafka_records_decode_into_declared_columns_and_bad_ones_are_caught(spark, sqlite_engine):
    sqlite_engine.execute(ORDERS)
    src = sqlite_engine.catalog.source("ORDERS")
    decoded = kafka.decode(kafka_rows(spark, RECORDS), src)
    rows = [tuple(r) for r in decoded.collect()]
    assert rows == [
        (1, "tea", 2, None, "kafka:orders/0@0"),
        (2, "mug", None, '{"item": "mug", "qty": "many"}', "kafka:orders/0@1"),
        (3, None, None, "not json", "kafka:orders/0@2"),
        (None, "pot", 1, None, "kafka:orders/0@3"),
        (5, "cup", 4, None, "kafka:orders/0@4"),
    ]
    kept = RecordGuard("CSAS_X_1", "LOG_AND_CONTINUE").apply(kafka.decode(kafka_rows(spark, RECORDS), src), src)
    # a stream record without its KEY is a valid record (as in ksqlDB); only a table needs its key
    assert [tuple(r) for r in kept.collect()] == [(1, "tea", 2), (None, "pot", 1), (5, "cup", 4)]
    held = RecordGuard("CSAS_X_1", "PAUSE").apply(kafka.decode(kafka_rows(spark, RECORDS), src), src)
    # the first bad record a task meets (partitions run in parallel): offset 1 or 2
    with pytest.raises(Exception, match="STREAMQL_BAD_RECORD CSAS_X_1 cannot read a record of ORDERS in "
                                        "kafka:orders/0@[12]"):
        held.collect()


@pytest.mark.spark
def test_output_encodes_keys_and_json_values(spark, sqlite_engine):
    sqlite_engine.execute(ORDERS + "CREATE TABLE per_item WITH (kafka_topic='per-item') AS "
                                   "SELECT item, SUM(qty) AS qty FROM orders GROUP BY item")
    orders, per_item = sqlite_engine.catalog.source("ORDERS"), sqlite_engine.catalog.source("PER_ITEM")
    out = kafka.encode(spark.createDataFrame([(1, "tea", 2)], "id INT, item STRING, qty INT"), orders)
    assert [tuple(r) for r in out.collect()] == [("1", '{"item":"tea","qty":2}')]
    out = kafka.encode(spark.createDataFrame([("tea", 7)], "item STRING, qty BIGINT"), per_item)
    assert [tuple(r) for r in out.collect()] == [("tea", '{"qty":7}')]
    assert json.loads(out.collect()[0]["value"]) == {"qty": 7}


@pytest.mark.spark
def test_a_runtime_without_the_connector_says_what_to_add(spark, sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(ORDERS + "CREATE STREAM copy AS SELECT * FROM orders")
    spark.conf.set("spark.streamql.kafka.bootstrap.servers", "127.0.0.1:9")
    try:
        runtimes.start(engine)
        engine.wait_for_state("CSAS_COPY_1", "ERROR", timeout=90)
    finally:
        spark.conf.unset("spark.streamql.kafka.bootstrap.servers")
    assert engine.query("CSAS_COPY_1").error.startswith(
        "the Kafka connector is not on this runtime's classpath: submit it with --packages "
        "org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark version>")


@pytest.mark.spark
def test_a_group_failing_having_becomes_a_tombstone(spark, sqlite_engine):
    """A Kafka table's changelog as ksqlDB writes it: a group an update makes fail HAVING is
    its key with a null value."""
    sqlite_engine.execute(ORDERS + "CREATE TABLE big WITH (kafka_topic='big') AS "
                                   "SELECT item, SUM(qty) AS qty FROM orders GROUP BY item HAVING SUM(qty) > 5")
    big = sqlite_engine.catalog.source("BIG")
    column = sqlite_engine.catalog.query("CTAS_BIG_1").plan.having_column
    batch = spark.createDataFrame([("tea", 7, True), ("pot", 2, False)], f"item STRING, qty BIGINT, {column} BOOLEAN")
    changes = HavingChanges(column, big.key_columns)(batch)
    out = kafka.encode(changes.rows, big, deleted=changes.deleted)
    assert sorted(tuple(r) for r in out.collect()) == [("pot", None), ("tea", '{"qty":7}')]
