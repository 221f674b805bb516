"""The dead-letter companion of a query reading Kafka topics under LOG_AND_CONTINUE: a
streaming query of its own (checkpoint ``<checkpoint>.dead_letters``) that reads the same topics
and hands each batch's bad records to the dead-letter writer. A query's file reads have none:
their dead letters are found after their batch (:mod:`.file_dead_letters`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..catalog import QueryInfo, SourceInfo
from ..language.rates import RateLimits
from ..language.starting import Starting
from ..language.streaming import StreamingPlan
from ..storage.checkpoints import kafka_positions, last_planned_batch
from ..storage.layout import dead_letter_checkpoint
from . import kafka
from .badrecords import dead_letters
from .connectors import Frames, source_stream
from .evolution import source_evolution
from .schemas import checked


def start_dead_letter_query(
    spark: SparkSession,
    query: QueryInfo,
    plan: StreamingPlan,
    sources: dict[str, SourceInfo],
    on_batch: Callable[[DataFrame, int], None],
    frames: Frames,
    going_on: dict[str, dict[str, int]],
) -> StreamingQuery | None:
    """For policy LOG_AND_CONTINUE: a companion query reading the query's Kafka topics, with a
    checkpoint of its own, that hands each batch of bad records to ``on_batch`` (its frame
    built by ``frames``, or taken from them; None: the query reads no checked Kafka topic, see
    :func:`companion_reads`). Made for a query that has read before (its policy changed to
    LOG_AND_CONTINUE), it starts each Kafka topic at ``going_on`` (:func:`dead_letter_offsets`),
    so the record that stopped the query is not passed by."""
    checkpoint = dead_letter_checkpoint(query.checkpoint)
    with source_evolution(spark, bool(plan.source_names)):
        df = frames.reused(dead_letter_frame, spark, query, plan, sources, going_on)
        if df is None:
            return None
        return (
            df.writeStream.queryName(f"{query.id}__dead_letters")
            .foreachBatch(on_batch)
            .option("checkpointLocation", checkpoint)
            .start()
        )


def dead_letter_offsets(query: QueryInfo) -> dict[str, dict[str, int]]:
    """Where a new companion of ``query`` starts each Kafka topic: where the query goes on
    (read before the query starts, which may commit the batch that stopped it). Empty when the
    companion's checkpoint says where it goes on: it planned a batch, or recorded where its
    topics start (a start Spark refused leaves a checkpoint with neither)."""
    companion = dead_letter_checkpoint(query.checkpoint)
    if os.path.isdir(companion) and (last_planned_batch(companion) >= 0 or kafka_positions(companion)):
        return {}
    return kafka_positions(query.checkpoint)


def checked_streams(query: QueryInfo, plan: StreamingPlan, sources: dict[str, SourceInfo]) -> list[str]:
    """The sources ``query`` streams whose records are checked (a changelog, a static table's
    snapshot and a PARQUET topic are not): those whose bad records have dead letters."""
    if plan.table_query:  # changelogs: no dead letters
        return []
    return [n for n in query.sources if n not in plan.static_tables and checked(sources[n])]


def companion_reads(query: QueryInfo, plan: StreamingPlan, sources: dict[str, SourceInfo]) -> list[str]:
    """The checked streams whose dead letters a companion query sends: all of them when one is
    a Kafka topic (a query reading files and topics keeps the companion it had, whose
    checkpoint may know its streams by position only), none for files alone (theirs are found
    after their batch, :mod:`.file_dead_letters`)."""
    read = checked_streams(query, plan, sources)
    return read if has_companion([sources[n] for n in read]) else []


def has_companion(checked: list[SourceInfo]) -> bool:
    """Whether a query whose checked streams are ``checked`` has a companion query under
    LOG_AND_CONTINUE: when one of them is a Kafka topic (:func:`companion_reads`)."""
    return any(src.kafka_topic for src in checked)


def dead_letter_frame(
    spark: SparkSession,
    query: QueryInfo,
    plan: StreamingPlan,
    sources: dict[str, SourceInfo],
    going_on: dict[str, dict[str, int]],
) -> DataFrame | None:
    """The bad records of the query's checked Kafka topics, read as the query reads them, its
    streams named as the query's are (so the companion follows a version that adds or drops
    one); a Kafka topic in ``going_on`` starts at the offsets given there. None: the query
    reads no checked Kafka topic."""
    starting, rates = Starting.of(query.settings), RateLimits.of(query.settings)

    def start(src: SourceInfo) -> kafka.Start:
        topic = src.kafka_topic
        return kafka.Offsets(topic, going_on[topic]) if topic in going_on else starting

    read = companion_reads(query, plan, sources)
    if not read:
        return None
    frames = [
        dead_letters(
            source_stream(
                spark, sources[n], checked=True, starting=start(sources[n]), name=plan.source_names.get(n), rates=rates
            ),
            sources[n],
        )
        for n in read
    ]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df
