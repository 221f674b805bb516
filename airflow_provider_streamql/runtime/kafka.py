"""Kafka topics through Spark's own Kafka connector (``spark-sql-kafka-0-10``).

A stream or table declared ``WITH (kafka_topic='orders')`` is read with
``readStream.format("kafka")``: the value is JSON with the declared columns, the key holds
the KEY columns (one key column: its text; several: a JSON object). A query's output on a
Kafka topic is written the same way. Connection settings (bootstrap servers, security)
come from the runtime's configuration, ``spark.streamql.kafka.<kafka setting>`` (e.g.
``--conf spark.streamql.kafka.bootstrap.servers=broker:9092``), never from SQL text. The
connector must be on the runtime's classpath (``--packages``, see :data:`PACKAGE`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from ..catalog import SourceInfo
from ..errors import StateError
from .schemas import CORRUPT, FILE, ddl_schema, spark_type

CONF_PREFIX = "spark.streamql.kafka."
PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13"


def settings(spark: SparkSession) -> dict[str, str]:
    """The runtime's Kafka settings (its Spark configuration) as connector options."""
    return options_from({**dict(spark.sparkContext.getConf().getAll()), **spark.conf.getAll})


def options_from(conf: dict[str, str]) -> dict[str, str]:
    """``spark.streamql.kafka.<setting>`` -> ``kafka.<setting>`` (what the connector takes)."""
    return {
        f"kafka.{key[len(CONF_PREFIX) :]}": value for key, value in sorted(conf.items()) if key.startswith(CONF_PREFIX)
    }


def require_settings(options: dict[str, str]) -> dict[str, str]:
    if "kafka.bootstrap.servers" not in options:
        raise StateError(
            f"this runtime has no Kafka bootstrap servers: start it with --conf "
            f"{CONF_PREFIX}bootstrap.servers=HOST:9092 (and any security settings "
            f"as {CONF_PREFIX}<kafka setting>)"
        )
    return options


@dataclass
class ConnectorSpec:
    """What a DataStreamReader or Writer is given: format and options."""

    format: str
    options: dict[str, str] = field(default_factory=dict)


def reader_spec(src: SourceInfo, options: dict[str, str], starting: str) -> ConnectorSpec:
    """How to read ``src``'s topic: from ``starting`` (``earliest``/``latest``) on a new
    checkpoint (an existing one resumes from its offsets), failing on lost data."""
    return ConnectorSpec(
        "kafka",
        {
            **require_settings(options),
            "subscribe": src.kafka_topic,
            "startingOffsets": starting,
            "failOnDataLoss": "true",
        },
    )


def writer_spec(sink: SourceInfo, options: dict[str, str]) -> ConnectorSpec:
    return ConnectorSpec("kafka", {**require_settings(options), "topic": sink.kafka_topic})


def _value_columns(src: SourceInfo):
    return [c for c in src.columns if not c.key]


def decode(df: DataFrame, src: SourceInfo) -> DataFrame:
    """Kafka records (key, value, topic, partition, offset) as the declared columns, with the
    corrupt-record column and the record's position for the bad-record guard."""
    keys = [c for c in src.columns if c.key]
    value_schema = ddl_schema(_value_columns(src), corrupt=True)
    value = F.from_json(
        F.col("value").cast("string"), value_schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    )
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
    decoded = df.select(*key_columns, value.alias("__sq_value"), position.alias(FILE))
    # a value that is not JSON at all leaves the struct null: its text is the corrupt record
    corrupt = F.coalesce(
        F.col(f"__sq_value.{CORRUPT}"), F.when(F.col("__sq_value").isNull(), F.lit("(not a JSON object)"))
    )
    return decoded.select(
        *[F.col(f"`{c.name}`") if c.key else F.col(f"__sq_value.`{c.name}`").alias(c.name) for c in src.columns],
        corrupt.alias(CORRUPT),
        F.col(FILE),
    )


def encode(df: DataFrame, sink: SourceInfo, *, deleted: DataFrame | None = None) -> DataFrame:
    """The declared columns as Kafka records: key from the KEY columns, value as JSON; then
    the keys a table ``deleted`` as tombstones (the key and a null value, as in ksqlDB)."""
    value = F.to_json(F.struct(*[F.col(f"`{c.name}`") for c in _value_columns(sink)]))
    records = df.select(_key(sink).alias("key"), value.alias("value"))
    if deleted is None:
        return records
    return records.unionByName(deleted.select(_key(sink).alias("key"), F.lit(None).cast("string").alias("value")))


def _key(sink: SourceInfo) -> SparkColumn:
    """A record's key: the one KEY column as text, several as a JSON object, none null."""
    keys = [c for c in sink.columns if c.key]
    if len(keys) == 1:
        return F.col(f"`{keys[0].name}`").cast("string")
    if keys:
        return F.to_json(F.struct(*[F.col(f"`{k.name}`") for k in keys]))
    return F.lit(None).cast("string")


def read(spark: SparkSession, src: SourceInfo, starting: str, name: str | None = None) -> DataFrame:
    """A decoded streaming DataFrame over ``src``'s topic (``name``: its source name in the
    checkpoint, for Spark's source evolution)."""
    spec = reader_spec(src, settings(spark), starting)
    reader = spark.readStream.format(spec.format).options(**spec.options)
    try:
        df = (reader.name(name) if name else reader).load()
    except AnalysisException as e:
        raise missing_connector(e) from None
    return decode(df, src)


def missing_connector(error: Exception) -> Exception:
    if "kafka" in str(error).lower() and ("DATA_SOURCE_NOT_FOUND" in str(error) or "Failed to find" in str(error)):
        return StateError(
            f"the Kafka connector is not on this runtime's classpath: submit it with "
            f"--packages {PACKAGE}:<Spark version> (SubmitRuntimeOperator(packages=...))"
        )
    return error
