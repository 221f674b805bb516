"""The file connector on the Spark side: read a topic as a stream or a table snapshot, and
build a query's writer.

STREAM outputs created before several writers were possible go through Spark's file sink
(exactly-once via its ``_spark_metadata`` log); newer ones (``SourceInfo.batch_files``),
TABLE outputs, INSERT INTO ... SELECT and stream-table joins go through foreachBatch
writers that are idempotent per batch id: each batch is written to a hidden directory and
renamed into place, and a batch that already has its entry (re-run after a crash) is skipped.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from ..catalog import QueryInfo, SourceInfo
from ..language.streaming import StreamingPlan
from ..storage.layout import Part, dead_letter_checkpoint
from ..storage.topics import FORMATS, TOMBSTONES, is_data_name
from . import kafka
from .badrecords import RecordGuard, dead_letters, read_whole_records
from .evolution import source_evolution
from .schemas import (
    CHECKED_FORMATS,
    CORRUPT,
    FILE,
    checked,
    ddl_schema,
    format_options,
    parse_options,
    reader_options,
    spark_type,
)
from .tables import Changes, HavingChanges, read_table_snapshot, table_query_frame


def source_stream(
    spark: SparkSession,
    src: SourceInfo,
    *,
    checked: bool,
    fail_fast: bool = False,
    starting: str = "earliest",
    name: str | None = None,
) -> DataFrame:
    """A streaming DataFrame over a topic: a directory of files (only committed files if a
    query writes it) or a Kafka topic (read from ``starting`` on a new checkpoint).
    ``checked``: with the corrupt-record and position columns that tell bad records apart;
    with ``fail_fast`` too, a file's bad record fails the read instead (Kafka records are
    always told apart). ``name``: the source's name in the checkpoint (Spark's source
    evolution, see :mod:`.evolution`); None: known by its position."""
    if src.kafka_topic:
        df = kafka.read(spark, src, starting, name)
        return df if checked else df.drop(CORRUPT, FILE)
    os.makedirs(Part(src.path).folder, exist_ok=True)  # a folder replaced by a link is refused
    reader = spark.readStream.format(FORMATS[src.format][0])
    if name:
        reader = reader.name(name)
    reader = reader.schema(ddl_schema(src.columns, corrupt=checked and not fail_fast and src.format in CHECKED_FORMATS))
    options = parse_options(src, fail_fast=fail_fast) if checked else {}
    return reader.options(**reader_options(src), **options).load(src.path)


def read_stream(
    spark: SparkSession,
    src: SourceInfo,
    watermark: list | None = None,
    record_guard: RecordGuard | None = None,
    starting: str = "earliest",
    name: str | None = None,
) -> DataFrame:
    """A streaming DataFrame over a topic with the query's error policy applied to its bad
    records (``record_guard``) and its watermark on the event-time column."""
    checked = record_guard is not None
    fail_fast = record_guard is not None and record_guard.fails_fast
    df = source_stream(spark, src, checked=checked, fail_fast=fail_fast, starting=starting, name=name)
    if record_guard is not None:
        df = record_guard.apply(df, src)
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
    starting = query.settings.get("auto.offset.reset", "latest")  # Kafka, on a new checkpoint
    streams = {
        n: read_stream(spark, sources[n], plan.watermarks.get(n), record_guard, starting, plan.source_names.get(n))
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
    """The streaming DataFrames a runtime built, the latest one per query. A query restarting
    on its checkpoint (RESUME, a retry) runs the plan it ran before, so its frame is built once
    per version, settings, error policy, skipped records and sources: building one is most of
    a start's calls into the JVM (a RESUME ALL of 40 queries made 165 per query)."""

    def __init__(self) -> None:
        self._built: dict[str, tuple[str, tuple[DataFrame, Callable | None]]] = {}

    def frame(
        self,
        spark: SparkSession,
        query: QueryInfo,
        plan: StreamingPlan,
        sources: dict[str, SourceInfo],
        record_guard: RecordGuard | None,
    ) -> tuple[DataFrame, Callable | None]:
        """:func:`streaming_frame` of ``query``, built again only when what it depends on changed."""
        key = repr((query.version, query.settings, plan, record_guard, [sources[n] for n in query.sources]))
        built = self._built.get(query.id)
        if built is None or built[0] != key:
            built = (key, streaming_frame(spark, query, plan, sources, record_guard))
            self._built[query.id] = built
        return built[1]


def start_query(
    spark: SparkSession,
    query: QueryInfo,
    plan: StreamingPlan,
    sources: dict[str, SourceInfo],
    sink: SourceInfo,
    before_commit: Callable[[], None],
    record_guard: RecordGuard | None,
    frames: Frames,
) -> StreamingQuery:
    """Start a query's streaming plan (built by ``frames``, or taken from them), with source
    evolution on if the plan names its streams."""
    read_whole_records(spark)
    with source_evolution(spark, bool(plan.source_names)):
        if plan.table_query:  # a changelog in, a changelog out (runtime/tables.py)
            changes, compute = table_query_frame(spark, query, plan, sources, sink)
            writer = changes.writeStream.foreachBatch(
                BatchWriter(sink, f"v{query.version:04d}", before_commit, as_directory=True, compute=compute)
            )
            return writer.queryName(query.id).option("checkpointLocation", query.checkpoint).start()
        df, compute = frames.frame(spark, query, plan, sources, record_guard)
        if compute is not None:
            name = f"{query.id}-v{query.version:04d}"
            writer = df.writeStream.foreachBatch(
                BatchWriter(sink, name, before_commit, as_directory=False, compute=compute)
            )
            return writer.queryName(query.id).option("checkpointLocation", query.checkpoint).start()
        return sink_writer(df, query, plan, sink, before_commit).start()


def start_dead_letter_query(
    spark: SparkSession,
    query: QueryInfo,
    plan: StreamingPlan,
    sources: dict[str, SourceInfo],
    on_batch: Callable[[DataFrame, int], None],
) -> StreamingQuery | None:
    """For policy LOG_AND_CONTINUE: a companion query reading the query's streams, with a
    checkpoint of its own, that hands each batch of bad records to ``on_batch``. Its streams
    are named as the query's are, so it follows a version that adds or drops one."""
    starting = query.settings.get("auto.offset.reset", "latest")
    read = [
        n
        for n in query.sources
        if n not in plan.static_tables and checked(sources[n]) and not plan.table_query  # changelogs: no dead letters
    ]
    if not read:
        return None
    with source_evolution(spark, bool(plan.source_names)):
        frames = [
            dead_letters(
                source_stream(spark, sources[n], checked=True, starting=starting, name=plan.source_names.get(n)),
                sources[n],
            )
            for n in read
        ]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        return (
            df.writeStream.queryName(f"{query.id}__dead_letters")
            .foreachBatch(on_batch)
            .option("checkpointLocation", dead_letter_checkpoint(query.checkpoint))
            .start()
        )


def sink_writer(
    df: DataFrame, query: QueryInfo, plan: StreamingPlan, sink: SourceInfo, before_commit: Callable[[], None]
) -> DataStreamWriter:
    """The configured writeStream for a query's sink (not yet started)."""
    if sink.kafka_topic and query.kind == "CSAS":
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
    if query.kind == "CSAS":
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
            BatchWriter(sink, f"v{query.version:04d}", before_commit, as_directory=True, compute=having)
        )
    # INSERT queries and new CSAS outputs: whole renamed files named by query, version and batch
    return writer.outputMode("append").foreachBatch(
        BatchWriter(sink, f"{query.id}-v{query.version:04d}", before_commit, as_directory=False)
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


#: Hadoop committer settings for a batch's write into its own hidden directory, which is
#: renamed into place afterwards (the atomic step): task output moved once, not twice, and
#: no ``_SUCCESS`` marker. Each file or directory Hadoop's local file system creates costs a
#: ``chmod`` process without Hadoop's native library.
QUICK_COMMIT = {
    "mapreduce.fileoutputcommitter.algorithm.version": "2",
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}


class BatchWriter:
    """foreachBatch function writing each batch once, atomically, under a name made of
    ``prefix`` and the batch id.

    ``as_directory``: the batch becomes a changelog entry directory (tables); otherwise its
    data files (one per task) are moved into the stream directory, the one named after the
    batch last. ``compute`` turns the micro-batch
    into the rows to write (stream-table joins). ``before_commit`` runs just before the
    rename; it raises if this runtime lost the query's lease, so a fenced-off runtime never
    commits.
    """

    def __init__(
        self,
        sink: SourceInfo,
        prefix: str,
        before_commit: Callable[[], None],
        *,
        as_directory: bool,
        compute: Callable[[DataFrame], DataFrame | Changes] | None = None,
    ):
        self.sink, self.prefix, self.before_commit = sink, prefix, before_commit
        self.as_directory, self.compute = as_directory, compute

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._write(df, batch_id)
        finally:
            if df.is_cached:  # ``compute`` cached it
                df.unpersist()

    def _write(self, df: DataFrame, batch_id: int) -> None:
        if self.sink.kafka_topic:  # a changelog topic: at least once per batch
            out = self.compute(df) if self.compute is not None else df
            if isinstance(out, Changes):
                records = kafka.encode(out.rows, self.sink, deleted=out.deleted)
            else:
                records = kafka.encode(out, self.sink)
            spec = kafka.writer_spec(self.sink, kafka.settings(records.sparkSession))
            self.before_commit()
            records.write.format(spec.format).options(**spec.options).save()
            return
        name = f"{self.prefix}-b{batch_id:012d}"
        suffix = FORMATS[self.sink.format][1]
        final = os.path.join(self.sink.path, name if self.as_directory else name + suffix)
        tmp = os.path.join(self.sink.path, f".tmp-{name}")
        sink = Part(self.sink.path)  # the sink's folder, and the names written in it, lead nowhere else
        for path in (final, tmp, tmp + TOMBSTONES):
            sink.resolve(path)
        if os.path.exists(final) or self._written_by_another_version(batch_id, suffix):
            return  # committed before a restart; the re-run batch has the same input
        deleted: DataFrame | None = None
        out = self.compute(df) if self.compute is not None else df
        if isinstance(out, Changes):  # a query over tables: upserts and deleted keys
            deleted = out.deleted
            out = out.rows
        self._save(out, tmp, one_file=self.as_directory)
        if deleted is not None:
            self._write_tombstones(deleted, tmp)
        self.before_commit()
        if self.as_directory:
            os.rename(tmp, final)
            return
        # A stream's batch is written in parallel, one file per task. The first file is
        # renamed last under the batch's own name: its presence says the batch is complete.
        # (A crash before that re-runs the batch, whose files get the same names again.)
        files = _data_files(tmp)
        for i, part in enumerate(files[1:], start=1):
            os.rename(os.path.join(tmp, part), os.path.join(self.sink.path, f"{name}-p{i:05d}{suffix}"))
        if files:
            os.rename(os.path.join(tmp, files[0]), final)
        shutil.rmtree(tmp, ignore_errors=True)

    def _save(self, df: DataFrame, directory: str, *, one_file: bool = True) -> None:
        """``df`` in the sink's format in a fresh hidden ``directory``: as one data file, or
        (``one_file=False``) one per partition, written in parallel."""
        shutil.rmtree(directory, ignore_errors=True)
        df = df.coalesce(1) if one_file else df
        writer = df.write.format(FORMATS[self.sink.format][0]).options(**format_options(self.sink))
        writer.options(**QUICK_COMMIT).mode("overwrite").save(directory)

    def _written_by_another_version(self, batch_id: int, suffix: str) -> bool:
        """A stream's batch file from an earlier version of the same query (its prefix is
        ``<query>-v<version>``): a swap that stopped it between the rename and the checkpoint
        commit; the new version re-runs that batch, which was written once already (as
        Spark's file sink skips a batch its log has). A rolled-back version's files are gone
        before the old version re-runs (runtime/rollout.py discard_output)."""
        if self.as_directory:
            return False
        query = self.prefix.rpartition("-v")[0]
        pattern = f"{glob.escape(query)}-v[0-9][0-9][0-9][0-9]-b{batch_id:012d}{glob.escape(suffix)}"
        return bool(glob.glob(os.path.join(glob.escape(self.sink.path), pattern)))

    def _write_tombstones(self, keys: DataFrame, entry: str) -> None:
        """``keys`` as the tombstone file of the (hidden, not yet renamed) entry directory
        ``entry`` (see ``storage.topics.TOMBSTONES``): the sink's columns, non-key ones NULL."""
        key_columns = set(self.sink.key_columns)
        rows = keys.select(
            *[
                F.col(f"`{c.name}`") if c.name in key_columns else F.lit(None).cast(spark_type(c.type)).alias(c.name)
                for c in self.sink.columns
            ]
        )
        staging = entry + TOMBSTONES
        self._save(rows, staging)
        parts = _data_files(staging)
        if parts:
            name = "deleted" + TOMBSTONES + FORMATS[self.sink.format][1]
            os.rename(os.path.join(staging, parts[0]), os.path.join(entry, name))
        shutil.rmtree(staging, ignore_errors=True)


def _data_files(directory: str) -> list[str]:
    """The non-empty data files Spark wrote into ``directory``, in name order."""
    return sorted(n for n in os.listdir(directory) if is_data_name(n) and os.path.getsize(os.path.join(directory, n)))
