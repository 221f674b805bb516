"""Dry run of a new version: Spark's own say on an upgrade, without touching the live query.

The new version runs on a *copy* of the live checkpoint, over the input available now, with
a sink that computes every batch and writes nothing. If Spark refuses the checkpoint (state
schema, sources, output mode), the error is returned.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from ..catalog import QueryInfo, SourceInfo
from ..storage.checkpoints import processed_files
from ..storage.layout import Part
from ..storage.snapshots import give_new_identity
from . import kafka
from .connectors import streaming_frame
from .evolution import source_evolution


@dataclass
class DryRun:
    """What Spark did with the new version: ``error`` is None when it ran."""

    error: str | None
    batches: int
    input_rows: int  # as Spark counts them (after filters pushed into the reader)
    new_files: int = 0  # input files the run consumed beyond what the checkpoint had


def dry_run(
    spark: SparkSession,
    query: QueryInfo,
    sources: dict[str, SourceInfo],
    *,
    checkpoint: str | None = None,
    timeout: float = 120.0,
) -> DryRun:
    """Run ``query`` (a version not yet applied) on a copy of ``checkpoint`` (default: the
    query's own) until the available input is processed."""
    work = tempfile.mkdtemp(prefix="streamql-dryrun-")
    try:
        copy = os.path.join(work, "checkpoint")
        source = checkpoint or query.checkpoint
        if os.path.isdir(source):
            shutil.copytree(source, copy, ignore=Part(source).guard)  # no link out of it is read
            give_new_identity(copy)  # else its start would stop the live query in this session
        return run_to_end(spark, replace(query, checkpoint=copy), sources, timeout=timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_to_end(
    spark: SparkSession, query: QueryInfo, sources: dict[str, SourceInfo], *, timeout: float = 120.0
) -> DryRun:
    """Run ``query`` on its checkpoint over the available input with a sink that writes
    nothing (each batch is still computed, so stateful operators load their state)."""
    plan = query.plan
    try:
        with source_evolution(spark, bool(plan.source_names)):
            df, compute = streaming_frame(spark, query, plan, sources)

            def discard(batch, _batch_id):
                (compute(batch) if compute else batch).count()

            mode = plan.output_mode if query.kind == "CTAS" else "append"
            stream = (
                df.writeStream.foreachBatch(discard)
                .outputMode(mode)
                .option("checkpointLocation", query.checkpoint)
                .trigger(availableNow=True)
                .start()
            )
        before = processed_files(query.checkpoint)
        stream.awaitTermination(timeout)
        error = stream.exception()
        progress = stream.recentProgress
        return DryRun(
            None if error is None else kafka.error_report(error),
            len(progress),
            sum(p["numInputRows"] for p in progress),
            len(processed_files(query.checkpoint) - before),
        )
    except Exception as e:  # refused while planning, before any batch
        return DryRun(kafka.error_report(e), 0, 0)
