"""Dry run of a new version: Spark's own say on an upgrade, without touching the live query.

The new version runs on a *copy* of the live checkpoint, over the input available now, with
a sink that computes every batch and writes nothing. If Spark refuses the checkpoint (state
schema, sources, output mode), the error is returned. :func:`check_on_spark` is the engine's
dry run: it runs one on a session it is given or makes, and adds Spark's say to the
validator's report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from ..catalog import QueryInfo, SourceInfo
from ..storage.checkpoints import processed_files
from ..storage.layout import Part
from ..storage.snapshots import give_new_identity
from ..upgrades import Code, Finding, Report, UpgradeKind, Verdict
from . import kafka
from .connectors import streaming_frame
from .evolution import source_evolution
from .session import build_session


@dataclass
class DryRun:
    """What Spark did with the new version: ``error`` is None when it ran."""

    error: str | None
    batches: int
    input_rows: int  # as Spark counts them (after filters pushed into the reader)
    new_files: int = 0  # input files the run consumed beyond what the checkpoint had


def check_on_spark(
    report: Report,
    query: QueryInfo,
    sources: dict[str, SourceInfo],
    *,
    spark: SparkSession | None = None,
    master: str = "local[*]",
) -> None:
    """Run the new version ``query`` (see :func:`dry_run`) on ``spark`` (None: see
    :func:`dry_run_session`) and record what Spark did in ``report.spark``; a Spark refusal
    turns an IN_PLACE verdict into REJECTED (finding SPARK_REFUSED)."""
    if spark is None:
        with dry_run_session(master) as session:
            outcome = dry_run(session, query, sources)
    else:
        outcome = dry_run(spark, query, sources)
    report.spark = {
        "ran": outcome.error is None,
        "error": outcome.error,
        "batches": outcome.batches,
        "input_rows": outcome.input_rows,
        "new_input_files": outcome.new_files,
    }
    if outcome.error is not None and report.verdict == "IN_PLACE":
        report.add(
            Finding(
                Code.SPARK_REFUSED,
                "query",
                UpgradeKind.UNSUPPORTED,
                Verdict.REJECTED,
                f"Spark refused the new version on a copy of the checkpoint: {outcome.error}",
            )
        )


@contextmanager
def dry_run_session(master: str) -> Iterator[SparkSession]:
    """The session a dry run runs on when it is given none: the process's own when Spark
    already runs here (shared, never stopped), else a new one on ``master``, stopped after."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        yield SparkSession.builder.getOrCreate()
        return
    spark = build_session(master, "streamql-dry-run", {"spark.ui.enabled": "false"})
    try:
        yield spark
    finally:
        spark.stop()


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
        stream.awaitTermination(int(timeout))
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
