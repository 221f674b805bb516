"""The idempotent batch writer: a foreachBatch function that writes each micro-batch of a
query's output once, atomically, under a name made of the query's version and the batch id.

A batch is written into a hidden directory and renamed into place; a batch that already has
its entry (re-run after a crash, or by the next version of the same query after a swap) is
skipped. A TABLE's batch becomes one changelog entry directory (with a tombstone file for the
keys it deletes); a STREAM's becomes data files in the stream's folder, the one named after
the batch last. The rename is fenced: ``before_commit`` raises if the runtime lost the
query's lease. :func:`~.connectors.sink_writer` hands it to Spark.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import shutil
import uuid
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..catalog import SourceInfo
from ..storage.layout import Part
from ..storage.topics import FORMATS, TOMBSTONES, is_data_name
from . import kafka
from .expectations import ExpectationCheck
from .kafka_exactly_once import TransactionalSink
from .schemas import format_options, spark_type
from .tables import Changes

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
    commits. ``transactions``: a Kafka output written exactly once (each batch in a Kafka
    transaction); without it, Spark's Kafka sink writes it at least once. ``check``: the
    query's expectation, applied to the rows of each batch before any of it is written.
    """

    def __init__(
        self,
        sink: SourceInfo,
        prefix: str,
        before_commit: Callable[[], None],
        *,
        as_directory: bool,
        compute: Callable[[DataFrame], DataFrame | Changes] | None = None,
        transactions: TransactionalSink | None = None,
        check: ExpectationCheck | None = None,
    ):
        self.sink, self.prefix, self.before_commit = sink, prefix, before_commit
        self.as_directory, self.compute, self.transactions = as_directory, compute, transactions
        self.check = check

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._write(df, batch_id)
        finally:
            if df.is_cached:  # ``compute`` cached it
                df.unpersist()
            if self.check is not None:
                self.check.release()

    def _write(self, df: DataFrame, batch_id: int) -> None:
        if self.sink.kafka_topic:  # a topic: at least once per batch, or exactly once in a transaction
            out = self._checked(self.compute(df) if self.compute is not None else df, batch_id)
            if isinstance(out, Changes):
                records = kafka.encode(out.rows, self.sink, deleted=out.deleted)
            else:
                records = kafka.encode(out, self.sink)
            if self.transactions is not None:
                self.transactions.write(records, batch_id, self.before_commit)
                return
            spec = kafka.writer_spec(self.sink, kafka.settings(records.sparkSession))
            self.before_commit()
            records.write.format(spec.format).options(**spec.options).save()
            return
        name = f"{self.prefix}-b{batch_id:012d}"
        suffix = FORMATS[self.sink.format][1]
        final = os.path.join(self.sink.path, name if self.as_directory else name + suffix)
        # this attempt's own staging folder: a runtime fenced off while it wrote the same batch
        # (a frozen lease holder that thawed) stages its files elsewhere, never among ours
        tmp = os.path.join(self.sink.path, f".tmp-{name}-{uuid.uuid4().hex[:12]}")
        sink = Part(self.sink.path)  # the sink's folder, and the names written in it, lead nowhere else
        # one listing of the sink's folder for what is there already: another version's file of
        # this batch, earlier attempts' staging
        names = os.listdir(self.sink.path) if os.path.isdir(self.sink.path) else []
        for path in (final, tmp, tmp + TOMBSTONES, *_staging_of(self.sink.path, name, names)):
            sink.resolve(path)
        if not (os.path.exists(final) or self._written_by_another_version(batch_id, suffix, names)):
            try:
                self._stage_and_rename(df, batch_id, name, suffix, final, tmp)
            finally:
                for path in (tmp, tmp + TOMBSTONES):
                    shutil.rmtree(path, ignore_errors=True)
        # (else committed before a restart: the re-run batch has the same input)
        # Committed: what other attempts at this batch staged (a crash's, a fenced-off writer's)
        # goes; rmtree never follows a link, and one found before the write refused it.
        for left in _staging_of(self.sink.path, name, os.listdir(self.sink.path)):  # anew: one staged meanwhile too
            shutil.rmtree(left, ignore_errors=True)

    def _stage_and_rename(self, df: DataFrame, batch_id: int, name: str, suffix: str, final: str, tmp: str) -> None:
        """Write the batch into ``tmp``, then (the lease still held) rename it into place."""
        deleted: DataFrame | None = None
        out = self._checked(self.compute(df) if self.compute is not None else df, batch_id)
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

    def _checked(self, out: DataFrame | Changes, batch_id: int) -> DataFrame | Changes:
        """The batch's output with its expectation applied (the rows written; deletions pass)."""
        if self.check is None:
            return out
        if isinstance(out, Changes):
            return Changes(self.check(out.rows, batch_id), out.deleted)
        return self.check(out, batch_id)

    def _save(self, df: DataFrame, directory: str, *, one_file: bool = True) -> None:
        """``df`` in the sink's format in a fresh hidden ``directory``: as one data file, or
        (``one_file=False``) one per partition, written in parallel."""
        shutil.rmtree(directory, ignore_errors=True)
        df = df.coalesce(1) if one_file else df
        writer = df.write.format(FORMATS[self.sink.format][0]).options(**format_options(self.sink))
        writer.options(**QUICK_COMMIT).mode("overwrite").save(directory)

    def _written_by_another_version(self, batch_id: int, suffix: str, names: list[str]) -> bool:
        """A stream's batch file from an earlier version of the same query (its prefix is
        ``<query>-v<version>``): a swap that stopped it between the rename and the checkpoint
        commit; the new version re-runs that batch, which was written once already (as
        Spark's file sink skips a batch its log has). A rolled-back version's files are gone
        before the old version re-runs (runtime/rollout.py discard_output)."""
        if self.as_directory:
            return False
        query = self.prefix.rpartition("-v")[0]
        pattern = f"{glob.escape(query)}-v[0-9][0-9][0-9][0-9]-b{batch_id:012d}{glob.escape(suffix)}"
        return bool(fnmatch.filter(names, pattern))

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


def _staging_of(folder: str, name: str, names: list[str]) -> list[str]:
    """The staging folders of other attempts at batch ``name`` among ``names`` (the listing
    of ``folder``), their tombstone folders included, as this release names them
    (``.tmp-<name>-<random>``) and as earlier ones did (``.tmp-<name>``)."""
    legacy = f".tmp-{name}"
    return [
        os.path.join(folder, n)
        for n in sorted(names)
        if n.startswith(legacy + "-") or n in (legacy, legacy + TOMBSTONES)
    ]


def _data_files(directory: str) -> list[str]:
    """The non-empty data files Spark wrote into ``directory``, in name order."""
    return sorted(n for n in os.listdir(directory) if is_data_name(n) and os.path.getsize(os.path.join(directory, n)))
