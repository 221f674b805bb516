"""VALUE_FORMAT='PROTOBUF' on Kafka topics (issue 31): which statements are refused and why;
for a value of every type, the bytes INSERT VALUES makes (storage/protobuf.py) are the wire
bytes written out by hand here (nested well-known types serialized by the protobuf package's
own generated classes), Spark's decoder and encoder (runtime/kafka_formats.py, Python UDFs)
read and write the same bytes, proto3's defaults for what is not written; bad values caught by
the bad-record policies; and a pipeline through a runtime and the real broker (Confluent's wire
header with the message index, INSERT VALUES, PRINT, a pull query, a JSON copy)."""
from __future__ import annotations

import json
import struct

import pytest
from google.protobuf import timestamp_pb2
from google.type import date_pb2
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

# statement -> fragment of the error; nothing is written
REFUSED = [
    ("CREATE STREAM s (id INT) WITH (value_format='PROTOBUF')",
     "value_format 'PROTOBUF' is read and written on Kafka topics"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', value_format='PROTOBUF_NOSR')",
     "value_format='PROTOBUF' without value_schema_id reads and writes the same bytes"),
    ("CREATE STREAM s (m MAP<INT, STRING>) WITH (kafka_topic='t', value_format='PROTOBUF')",
     "column 'm' of type MAP<INT, STRING>: ksqlDB's Protobuf maps have STRING keys"),
    ("CREATE STREAM s (a ARRAY<ARRAY<INT>>) WITH (kafka_topic='t', value_format='PROTOBUF')",
     "Protobuf has no repeated field or map value that is itself an ARRAY or a MAP"),
    ("CREATE STREAM s (a INT) WITH (kafka_topic='t', value_format='PROTOBUF', value_avro_schema_full_name='x.Y')",
     "value_avro_schema_full_name is for value_format='AVRO', not PROTOBUF"),
    ("CREATE STREAM s (a INT) WITH (kafka_topic='t', value_format='KAFKA', value_schema_id=3)",
     "value_schema_id is for value_format='AVRO' or 'PROTOBUF', not KAFKA"),
]


@pytest.mark.parametrize("sql, fragment", REFUSED)
def test_protobuf_refusals_say_why(sqlite_engine, sql, fragment):
    with pytest.raises(ValidationError) as error:
        sqlite_engine.execute(sql)
    assert fragment in error.value.message
    assert sqlite_engine.catalog.snapshot(sqlite_engine.catalog.engine.connect()).sources == {}


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int32/int64 is its 64-bit two's complement
    out = b""
    while n > 0x7F:
        out += bytes(((n & 0x7F) | 0x80,))
        n >>= 7
    return out + bytes((n,))


def field(number: int, wire: int, payload: bytes) -> bytes:
    """One field on the wire: its tag, then its payload (length-delimited: the length first)."""
    return varint(number << 3 | wire) + (varint(len(payload)) if wire == 2 else b"") + payload


def v(wire: int, payload: bytes) -> bytes:
    """Field 1 (the column V)."""
    return field(1, wire, payload)


MOMENT = timestamp_pb2.Timestamp(seconds=1704164645, nanos=678000000).SerializeToString()
DAY = date_pb2.Date(year=2024, month=2, day=29).SerializeToString()
# Confluent's Decimal of -9.50: value (unscaled -950 big-endian), precision 3, scale 2
DECIMAL = field(1, 2, (-950).to_bytes(2, "big", signed=True)) + field(2, 0, b"\x03") + field(3, 0, b"\x02")
# a column's type, a value as INSERT VALUES stores it, the bytes, what reading them gives
CASES = [
    ("BOOLEAN", True, v(0, b"\x01"), True),
    ("INT", -5, v(0, varint(-5)), -5),
    ("TINYINT", 7, v(0, b"\x07"), 7),
    ("SMALLINT", -300, v(0, varint(-300)), -300),
    ("BIGINT", 2**40, v(0, varint(2**40)), 2**40),
    ("FLOAT", 1.5, v(5, struct.pack("<f", 1.5)), 1.5),
    ("DOUBLE", 9.25, v(1, struct.pack("<d", 9.25)), 9.25),
    ("STRING", "héllo \x01", v(2, "héllo \x01".encode()), "héllo \x01"),
    ("BYTES", "AAE=", v(2, b"\x00\x01"), "AAE="),
    ("DECIMAL(10, 2)", -9.5, v(2, DECIMAL), -9.5),
    ("DATE", "2024-02-29", v(2, DAY), "2024-02-29"),
    ("TIMESTAMP", "2024-01-02T03:04:05.678Z", v(2, MOMENT), "2024-01-02T03:04:05.678Z"),
    ("ARRAY<INT>", [1, 2, 300], v(2, b"\x01\x02" + varint(300)), [1, 2, 300]),  # packed, as proto3 writes
    ("ARRAY<STRING>", ["a", None], v(2, b"a") + v(2, b""), ["a", ""]),  # a null element: its default
    ("MAP<STRING, DOUBLE>", {"a": 1.5}, v(2, field(1, 2, b"a") + field(2, 1, struct.pack("<d", 1.5))), {"a": 1.5}),
    ("STRUCT<A: INT, B: STRING>", {"A": 1, "B": None}, v(2, field(1, 0, b"\x01")), {"A": 1, "B": ""}),
    ("STRUCT<A: INT>", {"A": None}, v(2, b""), {"A": 0}),  # present, with nothing in it
    # proto3: nothing written for a NULL scalar, container or 0; it reads as the default
    ("STRING", None, b"", ""),
    ("INT", 0, b"", 0),
    ("ARRAY<INT>", None, b"", []),
    ("MAP<STRING, INT>", None, b"", {}),
    # a message keeps its presence: a NULL STRUCT, TIMESTAMP, DATE or DECIMAL stays NULL
    ("STRUCT<A: INT>", None, b"", None),
    ("TIMESTAMP", None, b"", None),
    ("DECIMAL(4, 1)", None, b"", None),
]
IDS = [f"{t} {value!r}" for t, value, _, _ in CASES]
#: Confluent's wire header of schema id 42 and the first message's index
HEADER = b"\x00" + (42).to_bytes(4, "big") + b"\x00"


def _source(sql_type: str, props: dict | None = None) -> SourceInfo:
    """A stream on a Kafka topic with one key and one value column V of ``sql_type``."""
    columns = [Column("id", parse_type("INT"), key=True), Column("V", parse_type(sql_type))]
    return SourceInfo("S", "STREAM", columns, {"kafka_topic": "t", **(props or {})}, "PROTOBUF", "kafka:t")


@pytest.mark.parametrize("sql_type, value, expected, read", CASES, ids=IDS)
def test_insert_values_writes_the_wire_bytes(sql_type, value, expected, read):
    """The value INSERT VALUES produces is the protobuf wire bytes of the value in field 1, and
    PRINT and pull queries read it back (proto3's default where nothing was written)."""
    src = _source(sql_type)
    key, made = kafka_records.encode({"id": 1, "V": value}, src.columns, KafkaValue.of(src))
    assert (key, made) == (b"1", expected)
    assert kafka_records.decode(KafkaRecord(0, 0, 0, key, made), src.columns, KafkaValue.of(src)) == {
        "id": "1", "V": read}
    headed = _source(sql_type, {"value_schema_id": 42})
    assert KafkaValue.of(headed).encode({"V": value}) == HEADER + expected


@pytest.mark.spark
def test_spark_reads_and_writes_the_same_bytes(spark):
    """Spark's decoder (a Python UDF to JSON, then from_json) reads each case's bytes into the
    declared column, and its encoder (to_json, then a Python UDF) writes them back, exactly."""
    for (sql_type, _value, expected, read), case in zip(CASES, IDS, strict=True):
        for props, header in (({}, b""), ({"value_schema_id": 42}, HEADER)):
            src = _source(sql_type, props)
            records = spark.createDataFrame([(b"1", bytearray(header + expected), "t", 0, 0)],
                                            "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
            decoded = kafka.decode(records, src)
            (row,) = decoded.select(F.to_json(F.struct("V"), {"ignoreNullFields": "false"}).alias("v"),
                                    "_corrupt_record").collect()
            assert (json.loads(row.v).get("V"), row._corrupt_record) == (read, None), case
            (written,) = kafka.encode(decoded, src).collect()
            assert (written.key, bytes(written.value)) == ("1", header + expected), case


@pytest.mark.spark
def test_spark_keeps_microseconds_and_decimal_digits(spark):
    """What Spark holds survives the Python UDFs: a TIMESTAMP's microseconds and every digit
    of a DECIMAL(38, 10) (the JSON in between carries them as text)."""
    src = SourceInfo("S", "STREAM", [Column("T", parse_type("TIMESTAMP")), Column("N", parse_type("DECIMAL(38, 10)"))],
                     {"kafka_topic": "t"}, "PROTOBUF", "kafka:t")
    df = spark.sql("SELECT TIMESTAMP'2024-01-02 03:04:05.123456' AS T, "
                   "CAST('1234567890123456789012345678.0123456789' AS DECIMAL(38, 10)) AS N")
    (written,) = kafka.encode(df, src).collect()
    records = spark.createDataFrame([(None, written.value, "t", 0, 0)],
                                    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
    (row,) = kafka.decode(records, src).select(F.col("T").cast("string"), F.col("N").cast("string")).collect()
    assert tuple(row) == ("2024-01-02 03:04:05.123456", "1234567890123456789012345678.0123456789")


# (declared value type, its properties, value bytes, what the bad record says)
BAD_VALUES = [
    ("STRING", {}, b"\x0a\x05ab", "(not a Protobuf message of the declared columns) 0A056162"),  # truncated
    ("STRING", {}, b"\x0a\x01\xff", "(not a Protobuf message of the declared columns) 0A01FF"),  # not UTF-8
    ("INT", {}, b"\x02\xff", "(not a Protobuf message of the declared columns) 02FF"),  # field number 0
    ("BIGINT", {"value_schema_id": 42}, b"\x08\x07",
     "(no Confluent wire header with schema id 42 and message index 0) 0807"),
    ("BIGINT", {"value_schema_id": 42}, b"\x00\x00\x00\x00\x2b\x00\x08\x07",
     "(no Confluent wire header with schema id 42 and message index 0) 000000002B000807"),
    ("INT", {}, None, "(no value)"),
]


@pytest.mark.spark
def test_bad_values_are_bad_records(spark):
    """Bytes the protobuf parser refuses: Spark's decoder gives the reason (the bad record the
    guard acts on), and PRINT's and pull queries' decoder leaves them out too."""
    for sql_type, props, data, reason in BAD_VALUES:
        src = _source(sql_type, props)
        records = spark.createDataFrame([(b"1", data, "t", 0, 5)],
                                        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
        (row,) = kafka.decode(records, src).collect()
        assert (row["V"], row["_corrupt_record"], row["__sq_file"]) == (None, reason, "kafka:t/0@5"), reason
        assert kafka_records.decode(KafkaRecord(0, 5, 0, b"1", data), src.columns, KafkaValue.of(src)) is None


def test_the_proto_schema_is_ksqldbs():
    """The .proto text the declared columns make, as ksqlDB's query-validation tests print it
    (what a registry would be given for the schema id)."""
    primitives = SourceInfo("S", "STREAM", [Column(n, parse_type(t)) for n, t in (
        ("I", "INT"), ("L", "BIGINT"), ("D", "DOUBLE"), ("B", "BOOLEAN"), ("S", "STRING"))],
        {"kafka_topic": "t"}, "PROTOBUF", "kafka:t")
    assert KafkaValue.of(primitives).proto_schema == (
        'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  int32 I = 1;\n  int64 L = 2;\n  double D = 3;\n'
        '  bool B = 4;\n  string S = 5;\n}\n')
    nested = SourceInfo("S", "STREAM", [Column("C1", parse_type("STRUCT<F1: INT>"))], {"kafka_topic": "t"},
                        "PROTOBUF", "kafka:t")
    assert KafkaValue.of(nested).proto_schema == (
        'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  ConnectDefault2 C1 = 1;\n\n'
        '  message ConnectDefault2 {\n    int32 F1 = 1;\n  }\n}\n')


@pytest.mark.parametrize("policy", ["FAIL", "LOG_AND_CONTINUE"])
def test_an_undecodable_protobuf_record_under_the_policies(kafka_spark, kafka_topics, sqlite_engine, policy):
    """FAIL stops at the bad record, naming its topic, partition and offset and why;
    LOG_AND_CONTINUE reads past it."""
    spark, topic = kafka_spark, kafka_topics.new("orders")
    sqlite_engine.execute(f"CREATE STREAM orders (id INT KEY, V BIGINT) WITH (kafka_topic='{topic}', "
                          "value_format='PROTOBUF')")
    src = sqlite_engine.catalog.source("ORDERS")
    kafka_topics.produce(topic, [("1", b"\x08\x07"), ("2", b"\x08"), ("3", b"\x08\x08")])
    if policy == "LOG_AND_CONTINUE":
        assert read_topic(spark, src, RecordGuard("CSAS_X_1", policy)) == [(1, 7), (3, 8)]
        return
    with pytest.raises(Exception, match=f"STREAMQL_BAD_RECORD CSAS_X_1 cannot read a record of ORDERS in "
                                        rf"kafka:{topic}/0@1: \(not a Protobuf message of the declared columns\) 08"):
        read_topic(spark, src, RecordGuard("CSAS_X_1", policy))


def test_a_pipeline_on_protobuf_topics(kafka_spark, kafka_topics, sqlite_url, home, kafka_broker, runtimes):
    """Through a runtime and the broker: a stream on PROTOBUF records in Confluent's wire
    format (bytes made by hand, and INSERT VALUES'), a query writing plain PROTOBUF and one
    writing JSON; what a consumer reads there; PRINT and a pull query decode the source."""
    engine = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_broker.bootstrap)
    source, copies, texts = kafka_topics.new("orders"), kafka_topics.new("copies"), kafka_topics.new("texts")
    engine.execute(
        f"CREATE STREAM orders (id INT KEY, item STRING, cost DOUBLE, at TIMESTAMP) WITH (kafka_topic='{source}', "
        "value_format='PROTOBUF', value_schema_id=42);"
        "SET 'auto.offset.reset' = 'earliest';"
        f"CREATE STREAM copies WITH (kafka_topic='{copies}', value_format='PROTOBUF') AS "
        "SELECT id, item, cost, at FROM orders WHERE cost > 1 PARTITION BY id;"
        f"CREATE STREAM texts WITH (kafka_topic='{texts}') AS SELECT id, item, cost, at FROM orders PARTITION BY id;")
    tea = field(1, 2, b"tea") + field(2, 1, struct.pack("<d", 2.5)) + field(3, 2, MOMENT)
    kafka_topics.produce(source, [("1", HEADER + tea)])
    engine.execute("INSERT INTO orders (id, item, cost, at) VALUES (2, 'mug', 0.5, '2024-01-02T03:04:05.678Z')")
    runtimes.start(engine)
    assert [(k, v) for k, v, _, _ in kafka_topics.consume(copies, 1, timeout=120, raw=True)] == [(b"1", tea)]
    assert [json.loads(v) for _, v, _, _ in kafka_topics.consume(texts, 2, timeout=120)] == [
        {"item": "tea", "cost": 2.5, "at": "2024-01-02T03:04:05.678Z"},
        {"item": "mug", "cost": 0.5, "at": "2024-01-02T03:04:05.678Z"}]
    printed = engine.execute("PRINT orders FROM BEGINNING")[0].rows
    assert [json.loads(r[2]) for r in printed] == [
        {"item": "tea", "cost": 2.5, "at": "2024-01-02T03:04:05.678Z"},
        {"item": "mug", "cost": 0.5, "at": "2024-01-02T03:04:05.678Z"}]
    pulled = engine.execute("SELECT id, item, cost FROM orders")[0].rows
    assert sorted(map(tuple, pulled)) == [(1, "tea", 2.5), (2, "mug", 0.5)]
    engine.close()
