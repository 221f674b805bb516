"""The file connector on the Spark side: read a topic as a stream or a table snapshot, start a
query, and build its writer.

STREAM outputs created before several writers were possible go through Spark's file sink
(exactly-once via its ``_spark_metadata`` log); newer ones (``SourceInfo.batch_files``),
TABLE outputs, INSERT INTO ... SELECT and stream-table joins go through the foreachBatch
writer of :mod:`.batch_writer`, idempotent per batch id.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from ..catalog import QueryInfo, SourceInfo
from ..language.pseudocolumns import EVENT_TIME
from ..language.rates import NO_LIMITS, RateLimits
from ..language.starting import Starting
from ..language.streaming import StreamingPlan
from ..storage.layout import Part
from ..storage.topics import FORMATS
from . import kafka, kafka_connector, kafka_exactly_once, kafka_formats
from .badrecords import RecordGuard
from .batch_writer import BatchWriter
from .evolution import source_evolution
from .expectations import ExpectationCheck
from .schemas import (
    CHECKED_FORMATS,
    CORRUPT,
    FILE,
    ddl_schema,
    event_time,
    format_options,
    parse_options,
    read_whole_records,
    reader_options,
)
from .tables import HavingChanges, read_table_snapshot, table_query_frame


def source_stream(
    spark: SparkSession,
    src: SourceInfo,
    *,
    checked: bool,
    fail_fast: bool = False,
    starting: kafka.Start = "earliest",
    name: str | None = None,
    rates: RateLimits = NO_LIMITS,
) -> DataFrame:
    """A streaming DataFrame over a topic: a directory of files (only committed files if a
    query writes it) or a Kafka topic (read from ``starting`` on a new checkpoint), each
    micro-batch taking at most what the query's ``rates`` allow.
    ``checked``: with the corrupt-record and position columns that tell bad records apart;
    with ``fail_fast`` too, a file's bad record fails the read instead (Kafka records are
    always told apart). ``name``: the source's name in the checkpoint (Spark's source
    evolution, see :mod:`.evolution`); None: known by its position."""
    if src.kafka_topic:
        df = kafka.read(spark, src, starting, name, rates)
        return df if checked else df.drop(CORRUPT, FILE)
    ready_folders([src])
    reader = spark.readStream.format(FORMATS[src.format][0])
    if name:
        reader = reader.name(name)
    reader = reader.schema(ddl_schema(src.columns, corrupt=checked and not fail_fast and src.format in CHECKED_FORMATS))
    options = parse_options(src, fail_fast=fail_fast) if checked else {}
    df = reader.options(**reader_options(src), **options, **rates.reader_options(kafka=False)).load(src.path)
    if isinstance(starting, Starting) and starting.timestamp_ms is not None:
        # a file topic's records start at its first file committed (renamed into place, its
        # modification time) at or after the time; later files are later, so the filter
        # changes nothing once the query has passed it
        since = F.timestamp_millis(F.lit(starting.timestamp_ms))
        df = df.where(F.col("_metadata.file_modification_time") >= since)
    return df


def ready_folders(sources: Iterable[SourceInfo]) -> None:
    """Each file topic's folder checked (a folder replaced by a link is refused) and made if
    missing. A start runs it for every source it reads: a frame taken from :class:`Frames` is
    not built again, so its reads were checked when it was built, not since."""
    for src in sources:
        if not src.kafka_topic:
            os.makedirs(Part(src.path).folder, exist_ok=True)


def read_stream(
    spark: SparkSession,
    src: SourceInfo,
    watermark: list | None = None,
    record_guard: RecordGuard | None = None,
    starting: kafka.Start = "earliest",
    name: str | None = None,
    rates: RateLimits = NO_LIMITS,
) -> DataFrame:
    """A streaming DataFrame over a topic with the query's error policy applied to its bad
    records (``record_guard``) and its watermark on the event-time column."""
    checked = record_guard is not None
    fail_fast = record_guard is not None and record_guard.fails_fast
    df = source_stream(spark, src, checked=checked, fail_fast=fail_fast, starting=starting, name=name, rates=rates)
    if record_guard is not None:
        df = record_guard.apply(df, src)
    if src.text_time is not None:  # ksqlDB's VARCHAR event time: parsed once, the column stays text
        df = df.withColumn(EVENT_TIME, event_time(src))
    if watermark:
        column, seconds = watermark
        df = df.withWatermark(column, f"{int(round(seconds * 1000))} milliseconds")
    return df


def streaming_frame(
    spark: SparkSession,
    query: QueryInfo,
    plan: StreamingPlan,
    sources: dict[str, SourceInfo],
    record_guard: RecordGuard | None = None,
) -> tuple[DataFrame, Callable | None]:
    """The query's streaming DataFrame, and for stream-table joins the function that turns
    each micro-batch into the join with the tables as they are then (else None)."""
    starting = Starting.of(query.settings)  # Kafka, on a new checkpoint
    rates = RateLimits.of(query.settings)
    streams = {
        n: read_stream(
            spark, sources[n], plan.watermarks.get(n), record_guard, starting, plan.source_names.get(n), rates
        )
        for n in query.sources
        if n not in plan.static_tables
    }
    if plan.static_tables:
        ((stream_name, stream_df),) = streams.items()
        return stream_df, _JoinAsOfBatch(plan, stream_name, {t: sources[t] for t in plan.static_tables})
    for name, df in streams.items():
        df.createOrReplaceTempView(plan.views[name])  # per-query view names never collide
    return spark.sql(plan.spark_sql), None


class Frames:
    """The streaming DataFrames a runtime built, the latest ones per query. A query restarting
    on its checkpoint (RESUME, a retry) runs the plan it ran before, so its frame, and its
    dead-letter companion's, is built once per version, settings, error policy, skipped records
    and sources: building them is most of a start's calls into the JVM (a RESUME ALL of 40
    queries made 165 per query for the query's frame; the companion's was half of a start's
    time under LOG_AND_CONTINUE)."""

    def __init__(self) -> None:
        self._built: dict[tuple[str, str], tuple[str, object]] = {}

    def reused(
        self,
        build: Callable,
        spark: SparkSession,
        query: QueryInfo,
        plan: StreamingPlan,
        sources: dict[str, SourceInfo],
        depends: object,
    ):
        """``build(spark, query, plan, sources, depends)`` as built before for ``query``, unless
        what it was built from changed (version, settings, plan, the sources read, ``depends``)."""
        slot = (query.id, build.__name__)
        key = repr((query.version, query.settings, plan, depends, [sources[n] for n in query.sources]))
        built = self._built.get(slot)
        if built is None or built[0] != key:
            built = (key, build(spark, query, plan, sources, depends))
            self._built[slot] = built
        return built[1]

    def forget(self, query_id: str) -> None:
        """Let go of a query's frames (it was terminated, or runs elsewhere now)."""
        # list() copies the keys at once: other workers may be adding frames meanwhile
        for slot in [slot for slot in list(self._built) if slot[0] == query_id]:
            self._built.pop(slot, None)

    def frame(
        self,
        spark: SparkSession,
        query: QueryInfo,
        plan: StreamingPlan,
        sources: dict[str, SourceInfo],
        record_guard: RecordGuard | None,
    ) -> tuple[DataFrame, Callable | None]:
        """:func:`streaming_frame` of ``query``, built again only when what it depends on changed."""
        return self.reused(streaming_frame, spark, query, plan, sources, record_guard)


def start_query(
    spark: SparkSession,
    query: QueryInfo,
    plan: StreamingPlan,
    sources: dict[str, SourceInfo],
    sink: SourceInfo,
    before_commit: Callable[[], None],
    record_guard: RecordGuard | None,
    frames: Frames,
    check: ExpectationCheck | None = None,
) -> StreamingQuery:
    """Start a query's streaming plan (built by ``frames``, or taken from them), with source
    evolution on if the plan names its streams; ``check``: its expectation, applied by the
    batch writer."""
    read_whole_records(spark)
    if sink.kafka_topic:  # its sources load the connector as they are read; a sink before its first batch
        kafka_connector.ensure(spark)
        kafka_formats.ensure(spark, sink)
    transactions = kafka_exactly_once.for_query(query, sink)  # None: at least once, or a file output
    with source_evolution(spark, bool(plan.source_names)):
        if plan.table_query:  # a changelog in, a changelog out (runtime/tables.py)
            changes, compute = table_query_frame(spark, query, plan, sources, sink)
            writer = changes.writeStream.foreachBatch(
                BatchWriter(
                    sink,
                    f"v{query.version:04d}",
                    before_commit,
                    as_directory=True,
                    compute=compute,
                    transactions=transactions,
                    check=check,
                )
            )
            return writer.queryName(query.id).option("checkpointLocation", query.checkpoint).start()
        df, compute = frames.frame(spark, query, plan, sources, record_guard)
        if compute is not None:
            name = f"{query.id}-v{query.version:04d}"
            writer = df.writeStream.foreachBatch(
                BatchWriter(
                    sink,
                    name,
                    before_commit,
                    as_directory=False,
                    compute=compute,
                    transactions=transactions,
                    check=check,
                )
            )
            return writer.queryName(query.id).option("checkpointLocation", query.checkpoint).start()
        return sink_writer(df, query, plan, sink, before_commit, check).start()


def sink_writer(
    df: DataFrame,
    query: QueryInfo,
    plan: StreamingPlan,
    sink: SourceInfo,
    before_commit: Callable[[], None],
    check: ExpectationCheck | None = None,
) -> DataStreamWriter:
    """The configured writeStream for a query's sink (not yet started); with an expectation
    (``check``) every output goes through the batch writer, which applies it."""
    transactions = kafka_exactly_once.for_query(query, sink)  # None: at least once, or a file output
    if sink.kafka_topic and query.kind == "CSAS" and transactions is None and check is None:
        spec = kafka.writer_spec(sink, kafka.settings(df.sparkSession))
        return (
            kafka.encode(df, sink)
            .writeStream.queryName(query.id)
            .outputMode("append")
            .option("checkpointLocation", query.checkpoint)
            .format(spec.format)
            .options(**spec.options)
        )
    writer = df.writeStream.queryName(query.id).option("checkpointLocation", query.checkpoint)
    if query.kind == "CSAS" and not sink.kafka_topic:
        os.makedirs(Part(sink.path).folder, exist_ok=True)  # a folder replaced by a link is refused
        if not sink.batch_files:  # an output from before several writers: Spark's file sink, as ever
            return (
                writer.format(FORMATS[sink.format][0])
                .options(**format_options(sink))
                .option("path", sink.path)
                .outputMode("append")
            )
    if query.kind == "CTAS":
        having = HavingChanges(plan.having_column, sink.key_columns) if plan.having_column else None
        return writer.outputMode(plan.output_mode).foreachBatch(
            BatchWriter(
                sink,
                f"v{query.version:04d}",
                before_commit,
                as_directory=True,
                compute=having,
                transactions=transactions,
                check=check,
            )
        )
    # INSERT queries and new CSAS outputs: whole renamed files named by query, version and batch
    return writer.outputMode("append").foreachBatch(
        BatchWriter(
            sink,
            f"{query.id}-v{query.version:04d}",
            before_commit,
            as_directory=False,
            transactions=transactions,
            check=check,
        )
    )


class _JoinAsOfBatch:
    """Turns one micro-batch of the stream into the join with the tables as they are now."""

    def __init__(self, plan: StreamingPlan, stream: str, tables: dict[str, SourceInfo]):
        self.plan, self.stream, self.tables = plan, stream, tables

    def __call__(self, batch: DataFrame) -> DataFrame:
        spark = batch.sparkSession
        batch.createOrReplaceTempView(self.plan.views[self.stream])
        for name, src in self.tables.items():
            read_table_snapshot(spark, src).createOrReplaceTempView(self.plan.views[name])
        return spark.sql(self.plan.spark_sql)
