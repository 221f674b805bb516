"""The file connector on the Spark side: read a topic as a stream, write a query's output.

STREAM outputs go through Spark's file sink (exactly-once via its ``_spark_metadata``
log). TABLE outputs and INSERT INTO ... SELECT go through foreachBatch writers that are
idempotent per batch id: each batch is written to a hidden directory and renamed into
place, and a batch that already has its entry (re-run after a crash) is skipped.
"""
from __future__ import annotations

import os
import shutil
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from ..catalog import QueryInfo, SourceInfo
from ..topics import FORMATS, is_data_name

# format -> extra reader/writer options
FORMAT_OPTIONS = {"JSON": {}, "CSV": {"header": "true"}, "PARQUET": {}}


def ddl_schema(src: SourceInfo) -> str:
    return ", ".join(f"`{c.name}` {c.type}" for c in src.columns)


def read_stream(spark: SparkSession, src: SourceInfo) -> DataFrame:
    """A streaming DataFrame over a file topic (only committed files if a query writes it)."""
    os.makedirs(src.path, exist_ok=True)
    reader = spark.readStream.format(FORMATS[src.format][0]).schema(ddl_schema(src))
    return reader.options(**FORMAT_OPTIONS[src.format]).load(src.path)


def sink_writer(df: DataFrame, query: QueryInfo, sink: SourceInfo,
                before_commit: Callable[[], None]) -> DataStreamWriter:
    """The configured writeStream for a query's sink (not yet started)."""
    writer = df.writeStream.queryName(query.id).option("checkpointLocation", query.checkpoint)
    if query.kind == "CSAS":
        os.makedirs(sink.path, exist_ok=True)
        return (writer.format(FORMATS[sink.format][0]).options(**FORMAT_OPTIONS[sink.format])
                .option("path", sink.path).outputMode("append"))
    if query.kind == "CTAS":
        return writer.outputMode("update").foreachBatch(
            BatchWriter(sink, f"v{query.version:04d}", before_commit, as_directory=True))
    return writer.outputMode("append").foreachBatch(
        BatchWriter(sink, f"{query.id}-v{query.version:04d}", before_commit, as_directory=False))


class BatchWriter:
    """foreachBatch function writing each batch once, atomically, under a name made of
    ``prefix`` and the batch id.

    ``as_directory``: the batch becomes a changelog entry directory (tables); otherwise its
    single data file is moved into the stream directory (INSERT INTO ... SELECT).
    ``before_commit`` runs just before the rename; it raises if this runtime lost the
    query's lease, so a fenced-off runtime never commits.
    """

    def __init__(self, sink: SourceInfo, prefix: str, before_commit: Callable[[], None], *,
                 as_directory: bool):
        self.sink, self.prefix, self.before_commit = sink, prefix, before_commit
        self.as_directory = as_directory

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        name = f"{self.prefix}-b{batch_id:012d}"
        suffix = FORMATS[self.sink.format][1]
        final = os.path.join(self.sink.path, name if self.as_directory else name + suffix)
        if os.path.exists(final):
            return  # committed before a restart; the re-run batch has the same input
        tmp = os.path.join(self.sink.path, f".tmp-{name}")
        shutil.rmtree(tmp, ignore_errors=True)
        (df.coalesce(1).write.format(FORMATS[self.sink.format][0])
         .options(**FORMAT_OPTIONS[self.sink.format]).mode("overwrite").save(tmp))
        self.before_commit()
        if self.as_directory:
            os.rename(tmp, final)
            return
        parts = [n for n in os.listdir(tmp) if is_data_name(n)]
        if parts:
            os.rename(os.path.join(tmp, parts[0]), final)
        shutil.rmtree(tmp, ignore_errors=True)
