"""The SparkSession a runtime drives."""

from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession

from . import class_archive, local_fs

# Defaults sized for one machine; any can be overridden with --conf.
DEFAULT_CONF = {
    # Stateful queries fix their shuffle partitions in the checkpoint; 200 makes every
    # micro-batch of a small aggregation schedule 200 tasks.
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # An idle query looks for new input this often (Spark's default, 10 ms, makes every
    # idle query of a runtime list its source 100 times a second). While input keeps
    # coming, batches follow each other without this wait.
    "spark.sql.streaming.pollingDelay": "250ms",
    # Checkpoint logs (offsets, commits, sources) through the FileSystem API: streamql's
    # checkpoints are local (or mounted) paths, where its rename is atomic, and Spark's
    # default FileContext manager makes Hadoop start a `readlink` or `chmod` process for
    # most checkpoint writes when Hadoop's native library is absent (as with pip's
    # pyspark): about 30 processes per micro-batch, the largest fixed cost of a batch.
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
    # Event times and window bounds in output files are UTC, whatever the host's zone.
    "spark.sql.session.timeZone": "UTC",
}


def starts_jvm() -> bool:
    """Whether the next session's JVM starts in this process with the class path and Java
    options its settings give: not when pyspark started one before (it keeps it after a
    session stops), nor under spark-submit (which started it), nor when
    ``PYSPARK_SUBMIT_ARGS`` gives a driver class path (which replaces the settings')."""
    return (
        SparkContext._gateway is None
        and "PYSPARK_GATEWAY_PORT" not in os.environ
        and "--driver-class-path" not in os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    )


def build_session(
    master: str | None = "local[*]", app_name: str = "streamql", conf: dict[str, str] | None = None
) -> SparkSession:
    """A session on ``master``; ``None`` or ``''`` keeps the master (and application
    name) spark-submit was given. A session whose JVM this call starts (a master given)
    writes local files without a process per file on a local master (:mod:`.local_fs`) and
    maps the driver's classes from the class archive when there is one (:mod:`.class_archive`)."""
    builder = SparkSession.builder
    settings = {**DEFAULT_CONF, **(conf or {})}
    if master:
        builder = builder.master(master).appName(app_name)
        if starts_jvm():
            settings = local_fs.spark_options({**local_fs.spark_defaults(), **settings}, master, local_fs.usable_jar())
            archive = class_archive.archive_path(class_path=settings.get(local_fs.CLASS_PATH, ""))
            settings = class_archive.java_options(settings, archive)
        # Python UDFs (PROTOBUF values) run in Python workers this process starts: this
        # interpreter, which has streamql's packages, not whatever `python3` is on PATH
        # (PySpark reads only the variable)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
