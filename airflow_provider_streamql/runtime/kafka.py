"""Kafka topics through Spark's own Kafka connector (``spark-sql-kafka-0-10``).

A stream or table declared ``WITH (kafka_topic='orders')`` is read with
``readStream.format("kafka")``: the value is JSON with the declared columns, the key holds
the KEY columns (one key column: its text; several: a JSON object); an AVRO or KAFKA value
is read and written by :mod:`.kafka_formats`. A query's output on a
Kafka topic is written the same way. Connection settings (bootstrap servers, security)
come from the runtime's configuration, ``spark.streamql.kafka.<kafka setting>`` (e.g.
``--conf spark.streamql.kafka.bootstrap.servers=broker:9092``), never from SQL text; secrets
(``sasl.jaas.config``, ``ssl.*.password``, ...) from Kafka client properties the runtime
reads at start from its environment or a file (:mod:`..storage.kafka_properties`), never from
argv. The connector is put on the runtime's classpath when it first starts a query on a Kafka
topic (:mod:`.kafka_connector`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from ..catalog import SourceInfo
from ..errors import SPARK_ERROR_LIMIT, StateError, first_line
from ..language.rates import NO_LIMITS, RateLimits
from ..language.starting import Reset, Starting
from ..storage import kafka_properties
from ..storage.kafka_values import KafkaValue, ValueFormat
from . import kafka_connector, kafka_formats
from .schemas import CORRUPT, FILE, ddl_schema, spark_type

CONF_PREFIX = kafka_properties.CONF_PREFIX
log = logging.getLogger(__name__)

#: the Kafka client properties this runtime read at start (:func:`load_properties`)
_properties: dict[str, str] = {}
#: values no report of this runtime may show: its Kafka secrets, wherever they came from
_secrets: set[str] = set()


def load_properties(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Read the runtime's Kafka properties (``$STREAMQL_KAFKA_PROPERTIES``, or the file
    ``$STREAMQL_KAFKA_PROPERTIES_FILE`` names) once, at start; returns the settings' names.
    A file that cannot be read or parsed is a StateError naming it, never a value."""
    loaded = kafka_properties.load(environ)
    _properties.clear()
    _properties.update(loaded)
    _secrets.clear()
    _secrets.update(kafka_properties.secret_values(loaded))
    if loaded:
        log.info("Kafka properties read at start: %s", ", ".join(sorted(loaded)))
    return sorted(loaded)


def check_conf(spark: SparkSession) -> list[str]:
    """The Kafka secrets in the runtime's Spark configuration (which its Spark UI shows, and
    spark-submit's argv may hold): warned about by name and kept out of every report."""
    conf = _conf(spark)
    secret = {
        k: v for k, v in conf.items() if k.startswith(CONF_PREFIX) and kafka_properties.is_secret(k[len(CONF_PREFIX) :])
    }
    for key in sorted(secret):
        log.warning(
            "Kafka secret %s is in the Spark configuration, which the Spark UI shows; give it in "
            "$%s or the file $%s names instead",
            key,
            kafka_properties.PROPERTIES_ENV,
            kafka_properties.PROPERTIES_FILE_ENV,
        )
    _secrets.update(kafka_properties.secret_values({k[len(CONF_PREFIX) :]: v for k, v in secret.items()}))
    return sorted(secret)


def redact(text: str) -> str:
    """``text`` with this runtime's Kafka secrets masked."""
    return kafka_properties.mask(text, _secrets)


def error_report(error: BaseException | object) -> str:
    """The first line of a Spark error as the runtime reports it (the catalog, its log),
    Kafka secrets masked."""
    return first_line(error, SPARK_ERROR_LIMIT, mask=redact)


def settings(spark: SparkSession) -> dict[str, str]:
    """The runtime's Kafka settings (its Spark configuration, then its Kafka properties) as
    connector options."""
    return options_from(_conf(spark), _properties)


def _conf(spark: SparkSession) -> dict[str, str]:
    return {**dict(spark.sparkContext.getConf().getAll()), **spark.conf.getAll}


def options_from(conf: Mapping[str, str], properties: Mapping[str, str] | None = None) -> dict[str, str]:
    """``spark.streamql.kafka.<setting>`` -> ``kafka.<setting>`` (what the connector takes);
    a setting of ``properties`` (Kafka client properties) wins over the configuration's."""
    options = {f"kafka.{key[len(CONF_PREFIX) :]}": value for key, value in conf.items() if key.startswith(CONF_PREFIX)}
    options.update({f"kafka.{key}": value for key, value in (properties or {}).items()})
    return dict(sorted(options.items()))


def require_settings(options: dict[str, str]) -> dict[str, str]:
    if "kafka.bootstrap.servers" not in options:
        raise StateError(
            f"this runtime has no Kafka bootstrap servers: start it with --conf "
            f"{CONF_PREFIX}bootstrap.servers=HOST:9092 (and any security settings "
            f"as {CONF_PREFIX}<kafka setting>, secrets in ${kafka_properties.PROPERTIES_ENV} "
            f"or the file ${kafka_properties.PROPERTIES_FILE_ENV} names)"
        )
    return options


@dataclass
class ConnectorSpec:
    """What a DataStreamReader or Writer is given: format and options."""

    format: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Offsets:
    """A start at given offsets of one topic: partition -> the offset read first (what
    another query's checkpoint says it reads next)."""

    topic: str
    partitions: Mapping[str, int]


#: where a Kafka source starts on a new checkpoint
Start = Starting | Offsets | str


def reader_spec(src: SourceInfo, options: dict[str, str], starting: Start) -> ConnectorSpec:
    """How to read ``src``'s topic: from ``starting`` (a :class:`Starting`, :class:`Offsets`,
    or ``earliest``/``latest``) on a new checkpoint (an existing one resumes from its
    offsets), failing on lost data."""
    return ConnectorSpec(
        "kafka",
        {
            **require_settings(options),
            "subscribe": _topic(src),
            **_starting_options(Starting(Reset(starting)) if isinstance(starting, str) else starting),
            "failOnDataLoss": "true",
        },
    )


def _starting_options(starting: Starting | Offsets) -> dict[str, str]:
    if isinstance(starting, Offsets):
        return {"startingOffsets": json.dumps({starting.topic: dict(starting.partitions)})}
    if starting.timestamp_ms is None:
        return {"startingOffsets": starting.reset.value}
    # Kafka's offsets for a time, per partition; a partition with no record at or after it
    # starts at its end (Spark's default strategy would fail the query there)
    return {"startingTimestamp": str(starting.timestamp_ms), "startingOffsetsByTimestampStrategy": "latest"}


def writer_spec(sink: SourceInfo, options: dict[str, str]) -> ConnectorSpec:
    return ConnectorSpec("kafka", {**require_settings(options), "topic": _topic(sink)})


def _topic(src: SourceInfo) -> str:
    if not src.kafka_topic:
        raise StateError(f"{src.name} is not on a Kafka topic")
    return src.kafka_topic


def _value_columns(src: SourceInfo):
    return [c for c in src.columns if not c.key]


def decode(df: DataFrame, src: SourceInfo, keep: Sequence[SparkColumn] = ()) -> DataFrame:
    """Kafka records (key, value, topic, partition, offset) as the declared columns, with the
    corrupt-record column and the record's position for the bad-record guard (and ``keep``,
    columns of the records, after them)."""
    keys = [c for c in src.columns if c.key]
    value_schema = ddl_schema(_value_columns(src), corrupt=True)
    value = F.from_json(
        F.col("value").cast("string"), value_schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    )
    # a value that is not JSON at all leaves the struct null: its text is the corrupt record
    unread = F.when(F.col("__sq_value").isNull(), F.lit("(not a JSON object)"))
    if KafkaValue.of(src).format is not ValueFormat.JSON:  # AVRO, KAFKA: the reason is in the struct
        fields, why = kafka_formats.decode(df, src, F.col("value"))
        value, unread = F.struct(*fields, why.alias(CORRUPT)), F.lit(None).cast("string")
    if len(keys) == 1:
        key_columns = [F.col("key").cast("string").cast(spark_type(keys[0].type)).alias(keys[0].name)]
    else:
        parsed = F.from_json(F.col("key").cast("string"), ddl_schema(keys))
        key_columns = [parsed.getField(k.name).alias(k.name) for k in keys]
    position = F.concat(
        F.lit("kafka:"),
        F.col("topic"),
        F.lit("/"),
        F.col("partition").cast("string"),
        F.lit("@"),
        F.col("offset").cast("string"),
    )
    decoded = df.select(*key_columns, value.alias("__sq_value"), position.alias(FILE), *keep)
    kept = decoded.columns[len(key_columns) + 2 :]
    corrupt = F.coalesce(F.col(f"__sq_value.{CORRUPT}"), unread)
    return decoded.select(
        *[F.col(f"`{c.name}`") if c.key else F.col(f"__sq_value.`{c.name}`").alias(c.name) for c in src.columns],
        corrupt.alias(CORRUPT),
        F.col(FILE),
        *kept,
    )


def encode(df: DataFrame, sink: SourceInfo, *, deleted: DataFrame | None = None) -> DataFrame:
    """The declared columns as Kafka records: key from the KEY columns, value as JSON; then
    the keys a table ``deleted`` as tombstones (the key and a null value, as in ksqlDB)."""
    # a null column is written as null, as ksqlDB's JSON does (Spark would leave it out)
    value = F.to_json(F.struct(*[F.col(f"`{c.name}`") for c in _value_columns(sink)]), {"ignoreNullFields": "false"})
    tombstone = F.lit(None).cast("string")
    if KafkaValue.of(sink).format is not ValueFormat.JSON:  # AVRO, KAFKA: bytes
        value, tombstone = kafka_formats.encode(sink), F.lit(None).cast("binary")
    records = df.select(_key(sink).alias("key"), value.alias("value"))
    if deleted is None:
        return records
    return records.unionByName(deleted.select(_key(sink).alias("key"), tombstone.alias("value")))


def _key(sink: SourceInfo) -> SparkColumn:
    """A record's key: the one KEY column as text, several as a JSON object, none null."""
    keys = [c for c in sink.columns if c.key]
    if len(keys) == 1:
        return F.col(f"`{keys[0].name}`").cast("string")
    if keys:
        return F.to_json(F.struct(*[F.col(f"`{k.name}`") for k in keys]))
    return F.lit(None).cast("string")


def read(
    spark: SparkSession,
    src: SourceInfo,
    starting: Start,
    name: str | None = None,
    rates: RateLimits = NO_LIMITS,
) -> DataFrame:
    """A decoded streaming DataFrame over ``src``'s topic (``name``: its source name in the
    checkpoint, for Spark's source evolution; ``rates``: the query's rate limits)."""
    return decode(records(spark, src, starting, name, rates), src)


def records(
    spark: SparkSession,
    src: SourceInfo,
    starting: Start,
    name: str | None = None,
    rates: RateLimits = NO_LIMITS,
) -> DataFrame:
    """The records of ``src``'s topic as the connector streams them (not decoded)."""
    spec = reader_spec(src, settings(spark), starting)
    kafka_connector.ensure(spark)
    reader = spark.readStream.format(spec.format).options(**spec.options, **rates.reader_options(kafka=True))
    try:
        return (reader.name(name) if name else reader).load()
    except AnalysisException as e:
        raise missing_connector(e) from None


def records_now(spark: SparkSession, src: SourceInfo) -> DataFrame:
    """Every record ``src``'s topic holds now, from its start to its end offsets when read
    (a batch DataFrame, not decoded): what a TABLE over a topic is made of."""
    spec = reader_spec(src, settings(spark), "earliest")
    kafka_connector.ensure(spark)
    try:
        return spark.read.format(spec.format).options(**spec.options, endingOffsets="latest").load()
    except AnalysisException as e:
        raise missing_connector(e) from None


def missing_connector(error: Exception) -> Exception:
    if "kafka" in str(error).lower() and ("DATA_SOURCE_NOT_FOUND" in str(error) or "Failed to find" in str(error)):
        return kafka_connector.missing("Spark finds no 'kafka' data source")
    return error
