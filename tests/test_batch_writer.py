"""A stream output's batch is written in parallel, one file per task, exactly once: a batch
re-run after a restart (whole or half renamed), or by the next version of the query, adds
nothing, and a rolled-back version's files all go. Real Spark writes on real files."""

import json
import os

import pytest
from pyspark.sql import functions as F

from airflow_provider_streamql.catalog.model import SourceInfo
from airflow_provider_streamql.language.statements import Column
from airflow_provider_streamql.runtime.batch_writer import BatchWriter
from airflow_provider_streamql.runtime.rollout import discard_output
from airflow_provider_streamql.storage.topics import is_data_name


@pytest.fixture
def sink(tmp_path):
    columns = [Column.of("ID", "BIGINT")]
    return SourceInfo("OUT", "STREAM", columns, {"batch_files": True}, "JSON", str(tmp_path / "out"))


def rows(path):
    """Every ID in the visible data files of ``path``."""
    ids = []
    for name in sorted(os.listdir(path)):
        if is_data_name(name):
            with open(os.path.join(path, name)) as f:
                ids += [json.loads(line)["ID"] for line in f if line.strip()]
    return sorted(ids)


def batch(spark, n=100, tasks=4):
    return spark.range(n).withColumnRenamed("id", "ID").repartition(tasks)


def write(sink, version, df, batch_id, fence=lambda: None):
    os.makedirs(sink.path, exist_ok=True)
    BatchWriter(sink, f"CSAS_OUT_1-v{version:04d}", fence, as_directory=False)(df, batch_id)


def test_a_batch_is_one_file_per_task(spark, sink):
    write(sink, 1, batch(spark), 0)
    names = {n for n in os.listdir(sink.path) if is_data_name(n)}
    first = "CSAS_OUT_1-v0001-b000000000000"
    assert names == {f"{first}.json", *[f"{first}-p{i:05d}.json" for i in range(1, 4)]}
    assert rows(sink.path) == list(range(100))
    assert not [n for n in os.listdir(sink.path) if n.startswith(".tmp-")]


@pytest.mark.parametrize(
    "before_rerun",
    [
        lambda path: None,  # re-run after the rename, before the checkpoint commit
        lambda path: os.remove(os.path.join(path, "CSAS_OUT_1-v0001-b000000000000.json")),  # crash mid-rename
    ],
    ids=["whole", "half-renamed"],
)
def test_a_rerun_batch_adds_nothing(spark, sink, before_rerun):
    write(sink, 1, batch(spark), 0)
    before_rerun(sink.path)
    write(sink, 1, batch(spark), 0)
    write(sink, 2, batch(spark), 0)  # the next version re-runs the batch the swap interrupted
    assert rows(sink.path) == list(range(100))


def test_a_fenced_writer_commits_nothing(spark, sink):
    def lost():
        raise RuntimeError("lost the lease")

    with pytest.raises(Exception, match="lost the lease"):
        write(sink, 1, batch(spark), 0, fence=lost)
    assert rows(sink.path) == []


def test_the_holder_commits_what_it_wrote_whatever_a_fenced_off_writer_of_the_batch_does(spark, sink):
    """A frozen lease holder thaws and writes the same batch while the runtime that took the
    query over is between its write and its rename: the holder commits its own files, no
    file of the fenced-off writer, and no staging folder is left."""
    os.makedirs(sink.path, exist_ok=True)

    def lost():
        raise RuntimeError("lost the lease")

    def stale_writer_meanwhile():
        stale = BatchWriter(sink, "CSAS_OUT_1-v0001", lost, as_directory=False)
        with pytest.raises(RuntimeError, match="lost the lease"):
            stale(batch(spark).withColumn("ID", F.col("ID") + 1000), 0)

    BatchWriter(sink, "CSAS_OUT_1-v0001", stale_writer_meanwhile, as_directory=False)(batch(spark), 0)
    assert rows(sink.path) == list(range(100))
    assert not [n for n in os.listdir(sink.path) if n.startswith(".tmp-")]


@pytest.mark.parametrize("committed_before", [False, True], ids=["written now", "re-run after its commit"])
def test_what_earlier_attempts_at_a_batch_staged_goes_once_it_has_committed(spark, sink, committed_before):
    os.makedirs(sink.path, exist_ok=True)
    if committed_before:
        write(sink, 1, batch(spark), 0)
    for left in (".tmp-CSAS_OUT_1-v0001-b000000000000-000000000000", ".tmp-CSAS_OUT_1-v0001-b000000000000"):
        os.makedirs(os.path.join(sink.path, left))  # a crash's: this release's name, and the one before it
        with open(os.path.join(sink.path, left, "part-00000.json"), "w") as f:
            f.write('{"ID": 7}\n')
    write(sink, 1, batch(spark), 0)
    assert rows(sink.path) == list(range(100))
    assert not [n for n in os.listdir(sink.path) if n.startswith(".tmp-")]


def test_a_rolled_back_version_leaves_no_file(spark, sink):
    write(sink, 1, batch(spark), 0)
    write(sink, 2, batch(spark, 40, 3), 1)
    discard_output(sink.path, "CSAS_OUT_1", 2)
    assert rows(sink.path) == list(range(100))
