"""VALUE_FORMAT='AVRO' and 'KAFKA' on Kafka topics (issue 31): which statements are refused
and why; for a value of every type, the bytes INSERT VALUES makes (storage/kafka_values.py)
are fastavro's or Kafka's serializers' (struct packing), and the bytes Spark's encoder makes
(runtime/kafka_formats.py, from_avro/to_avro from spark-avro 4.2.0 on pyspark 4.3.0) are the
same, each decoded back by the other; bad values caught by the bad-record policies; and a
pipeline through a runtime and the real broker (Confluent's wire header, INSERT VALUES, PRINT,
a poison pill held)."""
from __future__ import annotations

import datetime
import decimal
import io
import json
import pathlib
import struct

import fastavro
import pytest
from pyspark.sql import functions as F

from airflow_provider_streamql.catalog import SourceInfo
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ValidationError
from airflow_provider_streamql.language.statements import Column
from airflow_provider_streamql.language.types import parse_type
from airflow_provider_streamql.runtime import kafka
from airflow_provider_streamql.runtime.badrecords import RecordGuard
from airflow_provider_streamql.storage import kafka_records
from airflow_provider_streamql.storage.kafka_records import KafkaRecord
from airflow_provider_streamql.storage.kafka_values import KafkaValue

from .test_kafka import read_topic

UTC = datetime.UTC

# statement -> fragment of the error; nothing is written
REFUSED = [
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', value_format='JSON_SR')", "streamql reads no schema registry"),
    ("CREATE STREAM s (id INT) WITH (value_format='AVRO')", "value_format 'AVRO' is read and written on Kafka topics"),
    ("CREATE STREAM s (id INT) WITH (value_format='KAFKA')", "value_format 'KAFKA' is read and written on Kafka topics"),
    ("CREATE STREAM s (id INT KEY, a INT, b INT) WITH (kafka_topic='t', value_format='KAFKA')",
     "a KAFKA value is one column of type INT, BIGINT, DOUBLE, STRING, BINARY (as Kafka's serializers write it); "
     "the value columns here: a INT, b INT"),
    ("CREATE STREAM s (a BOOLEAN) WITH (kafka_topic='t', value_format='KAFKA')", "the value columns here: a BOOLEAN"),
    ("CREATE STREAM s (a INT) WITH (kafka_topic='t', value_schema_id=1)", "value_schema_id is for value_format='AVRO' or 'PROTOBUF'"),
    ("CREATE STREAM s (a INT) WITH (kafka_topic='t', value_format='AVRO', value_schema_id=0)",
     "must be a whole number above 0"),
    ("CREATE STREAM s (a INT) WITH (kafka_topic='t', value_format='AVRO', value_avro_schema_full_name='a.1b')",
     "must be an Avro full name"),
    ("CREATE STREAM s (m MAP<INT, STRING>) WITH (kafka_topic='t', value_format='AVRO')",
     "an Avro map's keys are strings"),
    ("CREATE STREAM s (a INT) WITH (kafka_topic='t', value_format='AVRO', value_schema_full_name='x.Y')",
     "streamql reads no schema registry"),
]


@pytest.mark.parametrize("sql, fragment", REFUSED)
def test_formats_refused_say_why(sqlite_engine, sql, fragment):
    with pytest.raises(ValidationError) as error:
        sqlite_engine.execute(sql)
    assert fragment in error.value.message
    assert sqlite_engine.catalog.snapshot(sqlite_engine.catalog.engine.connect()).sources == {}


# a column's type, a value as INSERT VALUES stores it (and a JSON value reads it back), the
# same value as fastavro takes it
AVRO = [
    ("BOOLEAN", True, True),
    ("INT", -5, -5),
    ("TINYINT", 7, 7),
    ("SMALLINT", -300, -300),
    ("BIGINT", 2**40, 2**40),
    ("FLOAT", 1.5, 1.5),
    ("DOUBLE", 9.25, 9.25),
    ("STRING", "héllo \x01", "héllo \x01"),
    ("DECIMAL(10, 2)", -9.5, decimal.Decimal("-9.50")),
    ("DATE", "2024-02-29", datetime.date(2024, 2, 29)),
    ("TIMESTAMP", "2024-01-02T03:04:05.678Z", datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
    ("ARRAY<INT>", [1, None, 3], [1, None, 3]),
    ("MAP<STRING, DOUBLE>", {"a": 1.5}, {"a": 1.5}),
    ("STRUCT<A: INT, B: STRING>", {"A": 1, "B": None}, {"A": 1, "B": None}),
    ("STRING", None, None),
]
# a KAFKA value's type, the value, the bytes Kafka's serializer makes of it
KAFKA = [
    ("INT", -5, struct.pack(">i", -5)),
    ("INT", 2**31 - 1, struct.pack(">i", 2**31 - 1)),
    ("BIGINT", -(2**40), struct.pack(">q", -(2**40))),
    ("DOUBLE", -9.25, struct.pack(">d", -9.25)),
    ("DOUBLE", 1e300, struct.pack(">d", 1e300)),
    ("STRING", "héllo", "héllo".encode()),
]
#: Confluent's wire header of schema id 42
HEADER = b"\x00" + (42).to_bytes(4, "big")


def _source(sql_type: str, props: dict | None = None, fmt: str = "AVRO") -> SourceInfo:
    """A stream on a Kafka topic with one key and one value column V of ``sql_type``."""
    columns = [Column("id", parse_type("INT"), key=True), Column("V", parse_type(sql_type))]
    return SourceInfo("S", "STREAM", columns, {"kafka_topic": "t", **(props or {})}, fmt, "kafka:t")


def _avro_bytes(sql_type: str, value) -> bytes:
    """fastavro's bytes of ``value`` in column V's record."""
    schema = json.loads(KafkaValue.of(_source(sql_type)).avro_schema)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"V": value})
    return out.getvalue()


ID42 = {"value_schema_id": 42}
# the cases as (declared value type, format, its properties, stored value, the bytes it is)
CASES = [
    *[(t, "AVRO", {}, v, _avro_bytes(t, a)) for t, v, a in AVRO],
    ("BIGINT", "AVRO", ID42, 7, HEADER + _avro_bytes("BIGINT", 7)),
    *[(t, "KAFKA", {}, v, b) for t, v, b in KAFKA],
]
IDS = [f"{fmt}{' id 42' if props else ''} {t} {v!r}" for t, fmt, props, v, _ in CASES]


@pytest.mark.parametrize("sql_type, fmt, props, value, expected", CASES, ids=IDS)
def test_insert_values_writes_the_bytes_of_the_format(sql_type, fmt, props, value, expected):
    """The value INSERT VALUES produces is fastavro's (Confluent's header first with a schema
    id) or Kafka's serializer's, and PRINT and pull queries decode it back."""
    src = _source(sql_type, props, fmt)
    key, made = kafka_records.encode({"id": 1, "V": value}, src.columns, KafkaValue.of(src))
    assert (key, made) == (b"1", expected)
    back = kafka_records.decode(KafkaRecord(0, 0, 0, key, made), src.columns, KafkaValue.of(src))
    assert back == {"id": "1", "V": value}


@pytest.mark.spark
def test_spark_writes_and_reads_the_same_bytes(spark):
    """Spark's decoder reads each case's bytes into the declared column (its JSON as
    INSERT VALUES stores the value), and its encoder writes those bytes back, exactly."""
    from airflow_provider_streamql.runtime import kafka_connector
    kafka_connector.ensure(spark, kafka_connector.AVRO)
    for (sql_type, fmt, props, value, expected), case in zip(CASES, IDS, strict=True):
        src = _source(sql_type, props, fmt)
        records = spark.createDataFrame([(b"1", bytearray(expected), "t", 0, 0)],
                                        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
        decoded = kafka.decode(records, src)
        (row,) = decoded.select(F.to_json(F.struct("V"), {"ignoreNullFields": "false"}).alias("v"), "_corrupt_record").collect()
        assert (json.loads(row.v).get("V"), row._corrupt_record) == (value, None), case
        (written,) = kafka.encode(decoded, src).collect()
        assert (written.key, bytes(written.value)) == ("1", expected), case


# (declared value type, format, its properties, value bytes, what the bad record says)
BAD_VALUES = [
    ("INT", "AVRO", {}, b"\x02\xff", "(not an Avro record of the declared columns) 02FF"),
    ("STRING", "AVRO", {}, b"\x04", "(not an Avro record of the declared columns) 04"),
    ("BIGINT", "AVRO", ID42, _avro_bytes("BIGINT", 7), "(no Confluent wire header with schema id 42) 020E"),
    ("BIGINT", "AVRO", ID42, b"\x00\x00\x00\x00\x2b" + _avro_bytes("BIGINT", 7),
     "(no Confluent wire header with schema id 42) 000000002B020E"),
    ("INT", "KAFKA", {}, b"\x00\x01", "(not a big-endian INT of 4 bytes) 0001"),
    ("DOUBLE", "KAFKA", {}, b"\x00" * 9, "(not a big-endian DOUBLE of 8 bytes) 000000000000000000"),
    ("INT", "AVRO", {}, None, "(no value)"),
]


@pytest.mark.spark
def test_bad_values_are_bad_records(spark):
    """Bytes that are no value of the format: Spark's decoder gives the reason (the bad record
    the guard acts on), and PRINT's and pull queries' decoder leaves them out too."""
    for sql_type, fmt, props, data, reason in BAD_VALUES:
        src = _source(sql_type, props, fmt)
        records = spark.createDataFrame([(b"1", data, "t", 0, 5)],
                                        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
        (row,) = kafka.decode(records, src).collect()
        assert (row["V"], row["_corrupt_record"], row["__sq_file"]) == (None, reason, "kafka:t/0@5"), reason
        assert kafka_records.decode(KafkaRecord(0, 5, 0, b"1", data), src.columns, KafkaValue.of(src)) is None


def test_the_avro_schema_is_ksqldbs():
    """The schema the declared columns make (what a registry would be given for the id)."""
    src = _source("STRUCT<A: INT, B: ARRAY<DECIMAL(4, 1)>>")
    assert json.loads(KafkaValue.of(src).avro_schema) == {
        "type": "record", "name": "KsqlDataSourceSchema", "namespace": "io.confluent.ksql.avro_schemas",
        "fields": [{"name": "V", "default": None, "type": ["null", {
            "type": "record", "name": "KsqlDataSourceSchema_V", "fields": [
                {"name": "A", "type": ["null", "int"], "default": None},
                {"name": "B", "default": None, "type": ["null", {"type": "array", "items": [
                    "null", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1}]}]}]}]}]}
    named = _source("INT", {"value_avro_schema_full_name": "shop.Order"})
    assert json.loads(KafkaValue.of(named).avro_schema)["name"] == "Order"
    assert json.loads(KafkaValue.of(named).avro_schema)["namespace"] == "shop"


@pytest.mark.parametrize("policy", ["PAUSE", "FAIL"])
def test_an_undecodable_avro_record_stops_a_query_at_its_position(kafka_spark, kafka_topics, sqlite_engine, policy):
    """The bad-record policies on an AVRO topic: PAUSE and FAIL stop at the bad record, naming
    its topic, partition and offset; LOG_AND_CONTINUE reads past it."""
    spark, topic = kafka_spark, kafka_topics.new("orders")
    sqlite_engine.execute(f"CREATE STREAM orders (id INT KEY, V BIGINT) WITH (kafka_topic='{topic}', "
                          "value_format='AVRO')")
    src = sqlite_engine.catalog.source("ORDERS")
    kafka_topics.produce(topic, [("1", b"\x02\x0e"), ("2", b"\x02\xff"), ("3", b"\x02\x10")])
    assert read_topic(spark, src, RecordGuard("CSAS_X_1", "LOG_AND_CONTINUE")) == [(1, 7), (3, 8)]
    with pytest.raises(Exception, match=f"STREAMQL_BAD_RECORD CSAS_X_1 cannot read a record of ORDERS in "
                                        rf"kafka:{topic}/0@1: \(not an Avro record of the declared columns\) 02FF"):
        read_topic(spark, src, RecordGuard("CSAS_X_1", policy))


def test_a_pipeline_on_avro_and_kafka_topics(kafka_spark, kafka_topics, sqlite_url, home, kafka_broker, runtimes):
    """Through a runtime and the broker: a stream on AVRO records in Confluent's wire format
    (fastavro's, and INSERT VALUES'), queries writing plain AVRO and a KAFKA DOUBLE; what a
    consumer reads there is fastavro's and Kafka's serializer's bytes; PRINT decodes both; a
    poison pill holds the PAUSE query at its position until it is skipped."""
    engine = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_broker.bootstrap)
    source, copies, costs = kafka_topics.new("orders"), kafka_topics.new("copies"), kafka_topics.new("costs")
    engine.execute(
        f"CREATE STREAM orders (id INT KEY, item STRING, cost DOUBLE, at TIMESTAMP) WITH (kafka_topic='{source}', "
        "value_format='AVRO', value_schema_id=42, value_avro_schema_full_name='shop.Order');"
        "SET 'auto.offset.reset' = 'earliest';"
        f"CREATE STREAM copies WITH (kafka_topic='{copies}', value_format='AVRO') AS "
        "SELECT id, item, cost, at FROM orders WHERE cost > 1 PARTITION BY id;"
        f"CREATE STREAM costs WITH (kafka_topic='{costs}', value_format='KAFKA', on_error='PAUSE') AS "
        "SELECT id, cost FROM orders PARTITION BY id;")
    schema = fastavro.parse_schema(json.loads(KafkaValue.of(engine.catalog.source("ORDERS")).avro_schema))

    def avro(record: dict, header: bytes = b"") -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, record)
        return header + out.getvalue()

    at = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    kafka_topics.produce(source, [("1", avro({"item": "tea", "cost": 2.5, "at": at}, HEADER))])
    engine.execute("INSERT INTO orders (id, item, cost, at) VALUES (2, 'mug', 0.5, '2024-01-02T03:04:05.678Z')")
    runtimes.start(engine)
    copy_schema = fastavro.parse_schema(json.loads(KafkaValue.of(engine.catalog.source("COPIES")).avro_schema))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, copy_schema, {"item": "tea", "cost": 2.5, "at": at})
    assert [(k, v) for k, v, _, _ in kafka_topics.consume(copies, 1, timeout=120, raw=True)] == [
        (b"1", out.getvalue())]
    assert [(k, v) for k, v, _, _ in kafka_topics.consume(costs, 2, timeout=120, raw=True)] == [
        (b"1", struct.pack(">d", 2.5)), (b"2", struct.pack(">d", 0.5))]
    printed = engine.execute("PRINT orders FROM BEGINNING")[0].rows
    assert [json.loads(r[2]) for r in printed] == [
        {"item": "tea", "cost": 2.5, "at": "2024-01-02T03:04:05.678Z"},
        {"item": "mug", "cost": 0.5, "at": "2024-01-02T03:04:05.678Z"}]
    assert [r[2] for r in engine.execute("PRINT costs FROM BEGINNING")[0].rows] == ["2.5", "0.5"]

    # a record without the wire header is a bad record: the PAUSE query holds at it
    kafka_topics.produce(source, [("3", avro({"item": "pot", "cost": 3.0, "at": at}))])
    engine.wait_for_state("CSAS_COSTS_2", "PAUSED", timeout=120)
    assert f"first at kafka:{source}/0@2: no Confluent wire header with schema id 42; its first bytes: 02" in (
        engine.query("CSAS_COSTS_2").error)
    (held,) = engine.bad_records("CSAS_COSTS_2")
    assert held.position == f"kafka:{source}/0@2"
    assert held.raw.startswith("(no Confluent wire header with schema id 42) 02")
    kafka_topics.produce(source, [("4", avro({"item": "cup", "cost": 4.0, "at": at}, HEADER))])
    engine.execute("RESUME CSAS_COSTS_2 SKIP BAD RECORDS")
    out = kafka_topics.consume(costs, 3, timeout=120, raw=True)
    assert [(k, v) for k, v, _, _ in out][2:] == [(b"4", struct.pack(">d", 4.0))]
    engine.close()


def test_the_avro_jar_comes_from_its_own_folder(tmp_path):
    """Spark's Avro functions: the folder $STREAMQL_AVRO_JARS names (scripts/kafka/formats.pom.xml
    pins the package named), and what a runtime without it says."""
    from airflow_provider_streamql.errors import StateError
    from airflow_provider_streamql.runtime import kafka_connector
    with pytest.raises(StateError) as error:
        kafka_connector.jars({}, kafka_connector.AVRO)
    assert error.value.message == (
        "spark-avro (Spark's Avro functions) is not on this runtime's classpath ($STREAMQL_AVRO_JARS is not set): "
        "set $STREAMQL_AVRO_JARS to a folder holding its jars (scripts/setup fills .kafka/formats), or submit the "
        "runtime with --packages org.apache.spark:spark-avro_2.13:4.2.0 (SubmitRuntimeOperator(packages=...))")
    pom = (pathlib.Path(__file__).resolve().parent.parent / "scripts" / "kafka" / "formats.pom.xml").read_text()
    group, artifact, version = kafka_connector.AVRO.package.split(":")
    assert f"<artifactId>{artifact}</artifactId>" in pom
    assert f"<spark.formats.version>{version}</spark.formats.version>" in pom
