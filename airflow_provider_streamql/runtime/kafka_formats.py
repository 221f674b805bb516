"""AVRO, PROTOBUF and KAFKA values of a Kafka topic in Spark (JSON values: :mod:`.kafka`): the value
bytes as the declared value columns, with the reason a record cannot be read (the corrupt-record
column the bad-record guard acts on), and back.

AVRO is read and written with Spark's ``from_avro``/``to_avro`` (``spark-avro``, put on the
classpath when a query first needs it: :data:`.kafka_connector.AVRO`) and the schema the
declared columns make (:func:`..storage.avro.schema`). ``from_avro`` in PERMISSIVE mode gives
a record of nulls for bytes it cannot read; an all-null record is written as one zero byte per
field, so a record of nulls from other bytes is a bad record. PROTOBUF values go through a
Python UDF (Spark's ``from_protobuf`` is in ``spark-protobuf``, which Maven Central does not
serve): the bytes to the JSON text the JSON path parses with ``from_json``, and ``to_json`` of
the value columns to the bytes (:mod:`..storage.protobuf` both ways). KAFKA values are Kafka's
serializers' bytes, built from Spark's own functions (``hex``/``unhex``/``conv``; a DOUBLE's
bits through ``java.lang.Double``, as Kafka's DoubleSerializer takes them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

from ..catalog import SourceInfo
from ..language.types import TypeName
from ..storage import protobuf
from ..storage.kafka_values import KafkaValue, ValueFormat
from . import kafka_connector
from .schemas import ddl_schema, spark_type

#: how many bytes of a bad value its corrupt record shows (in hex)
SHOWN_BYTES = 64
#: how the reason a value cannot be read starts (its corrupt record: ``(<reason>) <hex>``)
REASONS = (
    "(no value)",
    "(no Confluent wire header with schema id ",
    "(not an Avro record of the declared columns)",
    "(not a Protobuf message of the declared columns)",
    "(not a big-endian ",
)


def reason(text: str) -> str | None:
    """Why an AVRO or KAFKA value cannot be read, from its corrupt record (None: not one)."""
    if not text.startswith(REASONS):
        return None
    said, _, shown = text[1:].partition(")")
    return said + (f"; its first bytes: {shown.strip()}" if shown.strip() else "")


def ensure(spark: SparkSession, src: SourceInfo) -> None:
    """Put Spark's Avro functions on the classpath if ``src``'s values are AVRO (and only then)."""
    if src.kafka_topic and KafkaValue.of(src).format is ValueFormat.AVRO:
        kafka_connector.ensure(spark, kafka_connector.AVRO)


def _shown(value: SparkColumn) -> SparkColumn:
    return F.hex(F.substring(value, 1, SHOWN_BYTES))


def decode(df: DataFrame, src: SourceInfo, value: SparkColumn) -> tuple[list[SparkColumn], SparkColumn]:
    """The value columns of ``value`` (a binary column of ``df``, a record's value) under their
    names, and why a record cannot be read (null when it can)."""
    kv = KafkaValue.of(src)
    if kv.format is ValueFormat.AVRO:
        ensure(df.sparkSession, src)
        return _from_avro(kv, value)
    if kv.format is ValueFormat.PROTOBUF:
        return _from_protobuf(kv, value)
    return _from_kafka(kv, value)


def _from_avro(kv: KafkaValue, value: SparkColumn) -> tuple[list[SparkColumn], SparkColumn]:
    header = kv.header
    payload = F.substring(value, len(header) + 1, 2**31 - 1) if header else value
    parsed = from_avro(payload, kv.avro_schema, {"mode": "PERMISSIVE"})
    headed = F.substring(value, 1, len(header)) == F.lit(header)
    if header:  # a value written under another schema id is not read with this schema
        parsed = F.when(headed, parsed)
    fields = [parsed.getField(c.name) for c in kv.columns]
    nulls = F.lit(True)
    for field in fields:
        nulls = nulls & field.isNull()
    corrupt = F.when(value.isNull(), F.lit("(no value)"))
    if header:
        corrupt = corrupt.when(
            ~headed,
            F.concat(F.lit(f"(no Confluent wire header with schema id {kv.schema_id}) "), _shown(value)),
        )
    corrupt = corrupt.when(
        nulls & (payload != F.lit(bytes(len(kv.columns)))),
        F.concat(F.lit("(not an Avro record of the declared columns) "), _shown(value)),
    )
    return [field.cast(spark_type(c.type)).alias(c.name) for field, c in zip(fields, kv.columns, strict=True)], corrupt


#: how Spark's to_json writes times for the PROTOBUF encoder: to the microsecond (its default
#: stops at the millisecond), so a Timestamp message keeps what Spark holds
TIME_FORMATS = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
    "ignoreNullFields": "false",
}


def _udf(function: Callable[[Any], Any], kind: str) -> Callable[[SparkColumn], SparkColumn]:
    """``function`` of one non-null value as a Python UDF returning ``kind`` (a plain one:
    measured faster here than a pandas UDF, docs/deployment.md)."""
    return F.udf(lambda v: None if v is None else function(v), kind)


def _to_json_text(kv: KafkaValue) -> Callable[[SparkColumn], SparkColumn]:
    """A UDF: a PROTOBUF value's payload -> the JSON text of its value columns, null when the
    protobuf parser refuses it."""
    columns = kv.columns

    def convert(data: bytes) -> str | None:
        row = protobuf.decode(bytes(data), columns, exact=True)
        return None if row is None else json.dumps(row, ensure_ascii=False)

    return _udf(convert, "string")


def _to_message(kv: KafkaValue) -> Callable[[SparkColumn], SparkColumn]:
    """A UDF: ``to_json`` of the value columns -> the value's bytes (the wire header first)."""
    columns, header = kv.columns, kv.header

    def convert(text: str) -> bytes:
        return header + protobuf.encode(json.loads(text, parse_float=Decimal), columns)

    return _udf(convert, "binary")


def _from_protobuf(kv: KafkaValue, value: SparkColumn) -> tuple[list[SparkColumn], SparkColumn]:
    header = kv.header
    payload = F.substring(value, len(header) + 1, 2**31 - 1) if header else value
    text = _to_json_text(kv)(payload)
    headed = F.substring(value, 1, len(header)) == F.lit(header)
    if header:  # a value written under another schema id is not read with this schema
        text = F.when(headed, text)
    parsed = F.from_json(text, ddl_schema(list(kv.columns)))
    corrupt = F.when(value.isNull(), F.lit("(no value)"))
    if header:
        corrupt = corrupt.when(
            ~headed,
            F.concat(
                F.lit(f"(no Confluent wire header with schema id {kv.schema_id} and message index 0) "), _shown(value)
            ),
        )
    corrupt = corrupt.when(
        text.isNull(), F.concat(F.lit("(not a Protobuf message of the declared columns) "), _shown(value))
    )
    return [parsed.getField(c.name).alias(c.name) for c in kv.columns], corrupt


def _signed(value: SparkColumn, bits: int) -> SparkColumn:
    """The big-endian two's complement integer of ``value``'s bytes (``bits`` of them)."""
    if bits == 64:
        return F.conv(F.hex(value), 16, -10).cast("bigint")
    unsigned = F.conv(F.hex(value), 16, 10).cast("bigint")
    return F.when(unsigned >= 2 ** (bits - 1), unsigned - 2**bits).otherwise(unsigned)


def _from_kafka(kv: KafkaValue, value: SparkColumn) -> tuple[list[SparkColumn], SparkColumn]:
    c = kv.single
    name = c.type.name
    if name is TypeName.BINARY:
        column = value
    elif name in (TypeName.STRING, TypeName.VARCHAR):
        column = value.cast("string")
    elif name is TypeName.DOUBLE:
        column = F.reflect(F.lit("java.lang.Double"), F.lit("longBitsToDouble"), _signed(value, 64)).cast("double")
    else:
        column = _signed(value, 32 if name is TypeName.INT else 64)
    corrupt = F.when(value.isNull(), F.lit("(no value)"))
    size = {TypeName.INT: 4, TypeName.BIGINT: 8, TypeName.DOUBLE: 8}.get(name)
    if size is not None:
        corrupt = corrupt.when(
            F.length(value) != size,
            F.concat(F.lit(f"(not a big-endian {name.value} of {size} bytes) "), _shown(value)),
        )
        column = F.when(F.length(value) == size, column)
    return [column.cast(spark_type(c.type)).alias(c.name)], corrupt


def encode(sink: SourceInfo) -> SparkColumn:
    """A record's value (binary) of the sink's value columns."""
    kv = KafkaValue.of(sink)
    columns = [F.col(f"`{c.name}`") for c in kv.columns]
    if kv.format is ValueFormat.AVRO:
        avro = to_avro(F.struct(*columns), kv.avro_schema)
        return F.concat(F.lit(kv.header), avro) if kv.header else avro
    if kv.format is ValueFormat.PROTOBUF:
        return _to_message(kv)(F.to_json(F.struct(*columns), TIME_FORMATS))
    column, name = columns[0], kv.single.type.name
    if name is TypeName.DOUBLE:
        column = F.reflect(F.lit("java.lang.Double"), F.lit("doubleToLongBits"), column).cast("bigint")
    if name in (TypeName.INT, TypeName.BIGINT, TypeName.DOUBLE):
        digits = F.lpad(F.hex(column.cast("bigint")), 16, "0")
        return F.unhex(F.substring(digits, 9, 8) if name is TypeName.INT else digits)
    return column.cast("binary")
