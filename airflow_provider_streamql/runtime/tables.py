"""Queries over TABLE sources on the Spark side: a changelog in, a changelog out.

A table's changelog is read as a stream: Spark's file source over the table's directory
(``recursiveFileLookup``) picks up each entry's files once they are renamed into place, with
the file each row came from, so it knows which rows are tombstones and which change is the
latest. Each micro-batch becomes :class:`Changes` (rows to upsert, keys to delete), written by
the query's ``BatchWriter`` (:mod:`.batch_writer`) as one changelog entry per batch id:
exactly once, restart-safe and fenced by the query's lease like every table writer.

- ``changes`` (filters and projections, ``plan.table_query``): the latest change of each key
  in the batch goes through the SELECT on its own; a key the SELECT drops (a tombstone, or a
  row that no longer passes the WHERE) is deleted from the output. Cost: the batch.
- ``recompute`` (aggregations, table-table joins): the batch only says that a table changed;
  the SELECT runs over the snapshots of its tables (:func:`read_table_snapshot`) and is
  compared with the output's snapshot by key: changed rows are upserted, keys no longer
  there are deleted. Cost: reading every input table and the output at each micro-batch.

A TABLE over a Kafka topic (a compacted one, as ksqlDB's) is its changelog too: the record
key is the PRIMARY KEY, a later offset of the key's partition is a later change, a null value
(a tombstone) deletes the key. A record whose value is not a JSON object of the table's
columns is left out (its key keeps its last value), as a file table's unreadable row is.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..catalog import QueryInfo, SourceInfo
from ..language.rates import NO_LIMITS, RateLimits
from ..language.starting import Starting
from ..language.streaming import StreamingPlan
from ..storage.layout import Part
from ..storage.topics import FORMATS, TOMBSTONE_NAME, changelog_files
from . import kafka
from .schemas import CORRUPT, FILE, ddl_schema, reader_options, spark_type

#: columns the changelog stream adds to a table's rows (dropped before the SELECT sees them):
#: the file, where in it the split read starts, whether it is a tombstone file
ENTRY, BLOCK, DELETED = "__streamql_file", "__streamql_block", "__streamql_deleted"
RANK, ROW = "__streamql_rank", "__streamql_row"


class Changes(NamedTuple):
    """What one micro-batch of a query over tables writes: ``rows`` to upsert (the output's
    columns) and the keys to delete (``deleted``: the output's key columns)."""

    rows: DataFrame
    deleted: DataFrame


def _keyed(df: DataFrame, keys: list[str]) -> DataFrame:
    """A row without its key is no row of a table (as in ksqlDB)."""
    for key in keys:
        df = df.where(F.col(f"`{key}`").isNotNull())
    return df


def _latest(df: DataFrame, keys: list[str]) -> DataFrame:
    """The latest change per key: entry names sort oldest first, so the greatest path wins;
    within a file the last row does, as in a pull query: the split that starts last, then the
    last row of it (a task reads its split in file order, numbering rows as it goes). ``df``
    is a batch DataFrame straight from the file scan (filters aside)."""
    df = df.withColumn(ROW, F.monotonically_increasing_id())
    latest = Window.partitionBy(*[F.col(f"`{k}`") for k in keys]).orderBy(
        F.col(ENTRY).desc(), F.col(BLOCK).desc(), F.col(ROW).desc()
    )
    return df.withColumn(RANK, F.row_number().over(latest)).where(F.col(RANK) == 1).drop(RANK, ROW, BLOCK)


def read_table_snapshot(spark: SparkSession, src: SourceInfo) -> DataFrame:
    """A TABLE as it is now: the latest changelog row per key, unless that is a tombstone (a
    batch DataFrame over the files there now, so every action on it sees the same rows)."""
    if src.kafka_topic:  # the whole topic, as it is now
        changes = _topic_changes(kafka.records_now(spark, src), src)
        return _latest(_keyed(changes, src.key_columns), src.key_columns).where(~F.col(DELETED)).drop(ENTRY, DELETED)
    files = changelog_files(src.path)
    if not files:
        return spark.createDataFrame([], ddl_schema(src.columns))
    df = (
        spark.read.format(FORMATS[src.format][0])
        .schema(ddl_schema(src.columns))
        .options(**reader_options(src))
        .load(files)
        .withColumn(ENTRY, F.col("_metadata.file_path"))
        .withColumn(BLOCK, F.col("_metadata.file_block_start"))
        .withColumn(DELETED, F.col("_metadata.file_name").rlike(TOMBSTONE_NAME))
    )
    latest = _latest(_keyed(df, src.key_columns), src.key_columns)
    return latest.where(~F.col(DELETED)).drop(ENTRY, DELETED)


def _topic_changes(records: DataFrame, src: SourceInfo) -> DataFrame:
    """Kafka records of a TABLE's topic as its changelog rows: ordered by partition
    (:data:`ENTRY`) and offset (:data:`BLOCK`), a null value a tombstone (:data:`DELETED`);
    a value that cannot be read is left out."""
    where = F.concat(F.col("topic"), F.lit("/"), F.lpad(F.col("partition").cast("string"), 10, "0"))
    rows = kafka.decode(
        records, src, keep=[where.alias(ENTRY), F.col("offset").alias(BLOCK), F.col("value").isNull().alias(DELETED)]
    )
    return rows.where(F.col(DELETED) | F.col(CORRUPT).isNull()).drop(CORRUPT, FILE)


def changelog_stream(
    spark: SparkSession, src: SourceInfo, starting: Starting | str = "earliest", rates: RateLimits = NO_LIMITS
) -> DataFrame:
    """A streaming DataFrame of every change of a TABLE: each row of each data file of its
    changelog as the file's entry is renamed into place, with the file (:data:`ENTRY`) and
    whether it is a tombstone (:data:`DELETED`); a Kafka topic's records from ``starting``
    on a new checkpoint (:func:`_topic_changes`)."""
    if src.kafka_topic:
        return _topic_changes(kafka.records(spark, src, starting, rates=rates), src)
    os.makedirs(Part(src.path).folder, exist_ok=True)  # a folder replaced by a link is refused
    df = (
        spark.readStream.format(FORMATS[src.format][0])
        .schema(ddl_schema(src.columns))
        .options(**reader_options(src))
        .option("recursiveFileLookup", "true")  # a query's entries are directories
        .options(**rates.reader_options(kafka=False))
        .load(src.path)
    )
    return df.select(
        "*",
        F.col("_metadata.file_path").alias(ENTRY),
        F.col("_metadata.file_block_start").alias(BLOCK),
        F.col("_metadata.file_name").rlike(TOMBSTONE_NAME).alias(DELETED),
    )


def table_query_frame(
    spark: SparkSession, query: QueryInfo, plan: StreamingPlan, sources: dict[str, SourceInfo], sink: SourceInfo
):
    """The changelog stream(s) a query over tables reads, and the function that turns each
    micro-batch into its :class:`Changes`."""
    starting = Starting.of(query.settings)  # a Kafka table, on a new checkpoint
    rates = RateLimits.of(query.settings)
    streams = [changelog_stream(spark, sources[name], starting, rates) for name in query.sources]
    if plan.table_query == "changes":
        return streams[0], ChangedKeys(plan, sources[query.sources[0]], sink)
    # only the fact that a table changed matters: union the changelogs' file names
    trigger = streams[0].select(ENTRY)
    for other in streams[1:]:
        trigger = trigger.unionByName(other.select(ENTRY))
    return trigger, Recompute(plan, {name: sources[name] for name in query.sources}, sink)


class ChangedKeys:
    """A filter or projection of one table: each key changed in the batch, its latest change
    through the SELECT; the keys the SELECT drops are deleted."""

    def __init__(self, plan: StreamingPlan, src: SourceInfo, sink: SourceInfo):
        self.plan, self.src, self.sink = plan, src, sink

    def __call__(self, batch: DataFrame) -> Changes:
        spark = batch.sparkSession
        latest = _latest(_keyed(batch, self.src.key_columns), self.src.key_columns)
        live = latest.where(~F.col(DELETED)).drop(ENTRY, DELETED)
        live.createOrReplaceTempView(self.plan.views[self.src.name])
        rows = spark.sql(self.plan.spark_sql)
        keys = self.plan.table_keys
        changed = latest.select(*[F.col(f"`{k}`").alias(out) for k, out in keys.items()])
        kept = rows.select(*[F.col(f"`{out}`") for out in keys.values()])
        return Changes(rows, changed.join(kept, list(keys.values()), "left_anti"))


class HavingChanges:
    """An aggregation over a stream with HAVING (``plan.having_column``): of the groups a
    micro-batch changed, those passing HAVING are upserted and those failing it deleted. A
    deleted key the table never held is a no-op for every reader."""

    def __init__(self, column: str, keys: list[str]):
        self.column, self.keys = column, keys

    def __call__(self, batch: DataFrame) -> Changes:
        batch = batch.persist()  # two writes of one aggregation's output: compute it once
        passed = F.col(f"`{self.column}`")
        return Changes(
            batch.where(passed).drop(self.column), batch.where(~passed).select(*[F.col(f"`{k}`") for k in self.keys])
        )


class Recompute:
    """An aggregation or a join of tables: the SELECT over the tables as they are now,
    compared with the output as it is now."""

    def __init__(self, plan: StreamingPlan, tables: dict[str, SourceInfo], sink: SourceInfo):
        self.plan, self.tables, self.sink = plan, tables, sink

    def __call__(self, batch: DataFrame) -> Changes:
        spark = batch.sparkSession
        for name, src in self.tables.items():
            read_table_snapshot(spark, src).createOrReplaceTempView(self.plan.views[name])
        columns = [F.col(f"`{c.name}`").cast(spark_type(c.type)).alias(c.name) for c in self.sink.columns]
        keys = self.sink.key_columns
        new = _keyed(spark.sql(self.plan.spark_sql).select(*columns), keys)  # a NULL group is dropped, as in ksqlDB
        old = read_table_snapshot(spark, self.sink).select(*columns)
        changed = new.exceptAll(old)  # rows that are new or differ in some column
        gone = old.select(*keys).join(new.select(*keys), keys, "left_anti")
        return Changes(changed, gone)
