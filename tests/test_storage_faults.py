"""Faults in the storage (issue 34, docs/reliability.md): a stop at a batch boundary during an
in-place upgrade (and of a query asleep between triggers), and a checkpoint file a crash left truncated or garbled, which the runtime
names with what to do instead of starting the query on it."""

import logging
import os
import resource
import signal
import subprocess
import threading

import pytest

from airflow_provider_streamql.catalog.states import QueryState
from airflow_provider_streamql.runtime.evolution import source_evolution
from airflow_provider_streamql.runtime.spark_queries import (
    asleep_between_triggers,
    sleeps_between_triggers,
    stack_frame,
    stop_after_batch,
)
from airflow_provider_streamql.storage import topics
from airflow_provider_streamql.storage.checkpoints import INTERRUPTED_WRITE, last_committed_batch
from airflow_provider_streamql.storage.faults import Damage, damage_report, dead_letter_damage_report

from .support import CLI, insert, stream_rows, table, wait_until


def stray_files(*folders) -> list[str]:
    """What an interrupted write leaves: hidden temp folders in a sink, temp log entries."""
    return [
        os.path.join(root, n)
        for folder in folders
        for root, dirs, files in os.walk(folder)
        for n in dirs + files
        if n.startswith(".tmp-") or INTERRUPTED_WRITE.fullmatch(n)
    ]


class SlotsHeld:
    """A Spark job of the test holding every task slot of the shared session until the test
    creates a file: a job the runtime submits meanwhile (a batch's write) waits, in flight."""

    def __init__(self, spark, folder):
        self.spark, self.release = spark, os.path.join(folder, "release")
        self.slots = spark.sparkContext.defaultParallelism
        self.started = [os.path.join(folder, f"started-{i}") for i in range(self.slots)]
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        started, release = self.started, self.release

        def hold(i):  # in a Python worker: a file, not an event, crosses the process
            import os
            import time

            open(started[i], "w").close()
            deadline = time.monotonic() + 120  # never a hung suite if the test failed
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.02)

        self.spark.sparkContext.parallelize(range(self.slots), self.slots).foreach(hold)

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: all(map(os.path.exists, self.started)), 60, "every slot held")
        return self

    def __exit__(self, *exc):
        open(self.release, "w").close()
        self.thread.join(120)


def test_an_in_place_upgrade_stops_the_old_version_after_its_in_flight_batch(sqlite_engine, runtimes, spark, tmp_path):
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, v INT); CREATE STREAM big AS SELECT id, v FROM src WHERE v >= 0;")
    runtimes.start(engine)
    insert(engine, "src", [(1, 1)])
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    checkpoint, sink = engine.query("CSAS_BIG_1").checkpoint, engine.catalog.source("BIG").path
    in_flight = last_committed_batch(checkpoint) + 1

    # The next batch's write is submitted while the test's job holds every task slot, so the
    # upgrade's stop meets it in flight, inside Spark's job, every time.
    with SlotsHeld(spark, str(tmp_path)):
        insert(engine, "src", [(2, 2)])
        wait_until(lambda: any(n.startswith(".tmp-") for n in os.listdir(sink)), 60, "the batch's write begun")
        engine.execute("CREATE OR REPLACE STREAM big AS SELECT id, v FROM src WHERE v >= -1")
        engine.wait_for_state("CSAS_BIG_1", "UPGRADING", timeout=60)
    wait_until(lambda: engine.query("CSAS_BIG_1").running_version == 2, 60, "version 2 running")
    insert(engine, "src", [(3, 3)])
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)

    assert stream_rows(engine, "big") == [(1, 1), (2, 2), (3, 3)]  # each record once
    # the old version committed its batch before it stopped: the swap's snapshot holds it
    upgrade = [s for s in engine.catalog.snapshots.of("CSAS_BIG_1") if s.kind == "UPGRADE"]
    assert [s.batch_id for s in upgrade] == [in_flight]
    query = engine.query("CSAS_BIG_1")
    assert (query.observed_state, query.error) == (QueryState.RUNNING, None)
    # version 2 is ACTIVE at the runtime's next pass after its first committed batch (its
    # readiness), which may come just after the caught-up wait returns
    wait_until(
        lambda: [v["outcome"] for v in engine.catalog.versions("CSAS_BIG_1")] == ["REPLACED", "ACTIVE"],
        60,
        "version 1 REPLACED and version 2 ACTIVE",
    )
    assert stray_files(checkpoint, sink) == []


MICRO_BATCH = "app//org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution"
SLEEP_17 = "java.base@17.0.15/java.lang.Thread.sleep(Native Method)"


@pytest.mark.parametrize("top, asleep", [
    ([SLEEP_17, f"{MICRO_BATCH}.executeOneBatch(MicroBatchExecution.scala:798)"], True),  # Java 17, as read here
    (["java.base/java.lang.Thread.sleep0(Native Method)", "java.base/java.lang.Thread.sleep(Thread.java:509)",
      "org.apache.spark.sql.execution.streaming.MicroBatchExecution.executeOneBatch(Unknown Source)"], True),  # 21
    ([SLEEP_17, "app//org.apache.spark.util.Utils.sleep(Utils.scala:10)"], False),  # another sleep of Spark's
    ([f"{MICRO_BATCH}.executeOneBatch(MicroBatchExecution.scala:798)"], False),  # in the loop, not asleep
    (["java.base/java.lang.Object.wait(Native Method)", f"{MICRO_BATCH}.executeOneBatch(x.scala:1)"], False),
    ([SLEEP_17], False),  # no caller read
    ([], False),  # the thread has ended
])
def test_a_stream_thread_is_asleep_between_triggers_by_its_top_frames(top, asleep):
    """What a stop reads of the stream thread's stack, frame by frame as Java writes it, tells
    Spark's wait for new data from any other wait (interrupting those could cut a batch)."""
    assert sleeps_between_triggers([stack_frame(text) for text in top]) is asleep


def test_a_stop_wakes_a_query_asleep_between_triggers(spark, tmp_path, caplog):
    """An idle query sleeps Spark's polling delay between its looks for new data: a stop at a
    batch boundary ends that sleep instead of waiting it out (before, an idle query's PAUSE
    took up to the runtime's 250 ms, and PAUSE ALL of 40 as many times over as the workers
    allowed), and the query ends cleanly."""
    key = "spark.sql.streaming.pollingDelay"
    previous, src = spark.conf.get(key), tmp_path / "in"
    src.mkdir()
    spark.conf.set(key, "10min")  # read by a query as it starts
    try:
        with source_evolution(spark, False):  # an unnamed source, as a runtime's other queries leave it
            query = (spark.readStream.schema("id INT").json(str(src)).writeStream.format("noop")
                     .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    finally:
        spark.conf.set(key, previous)
    try:
        thread = query._jsq.streamingQuery().queryExecutionThread()
        wait_until(lambda: asleep_between_triggers(thread), 60, "the query asleep between triggers")
        stopping = threading.Thread(target=stop_after_batch, args=(query,), daemon=True)
        stopping.start()
        stopping.join(60)
        assert not stopping.is_alive(), "the stop waited out the polling delay"
        assert not query.isActive and query.exception() is None
        # it ended at the boundary, not by the interrupting stop a failed look falls back to
        warned = [r.getMessage() for r in caplog.records if r.name == "streamql.runtime" and r.levelno >= logging.WARNING]
        assert warned == []
    finally:
        query.stop()


def truncate(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def garble(path: str) -> None:
    with open(path, "wb") as f:
        f.write(b"\x00\xffnot what Spark wrote\n" * 3)


def remove(path: str) -> None:
    os.remove(path)


def newest(folder: str, suffix: str = "") -> str:
    names = [n for n in os.listdir(folder) if n.endswith(suffix) and n.removesuffix(suffix).isdigit()]
    return os.path.join(folder, max(names, key=lambda n: int(n.removesuffix(suffix))))


#: (the file a crash damaged, how): one line per kind of file Spark reads at a start (a
#: Kafka query's dead-letter companion: tests/test_kafka_dead_letters.py)
DAMAGED = [
    (lambda c: newest(os.path.join(c, "offsets")), truncate),
    (lambda c: newest(os.path.join(c, "offsets")), garble),
    (lambda c: newest(os.path.join(c, "offsets")), remove),
    (lambda c: newest(os.path.join(c, "commits")), truncate),
    (lambda c: newest(os.path.join(c, "state", "0", "0"), ".delta"), truncate),
    (lambda c: newest(os.path.join(c, "state", "0", "1"), ".delta"), garble),
    (lambda c: os.path.join(c, "metadata"), truncate),
]

PIPELINE = "CREATE STREAM src (id INT, v INT); CREATE TABLE totals AS SELECT id % 2 AS k, COUNT(*) AS n FROM src GROUP BY id % 2;"
QUERY = "CTAS_TOTALS_1"


def test_a_damaged_checkpoint_file_is_named_with_its_remedy_and_nothing_is_read_again(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    insert(engine, "src", [(1, 1), (2, 2)])
    engine.wait_caught_up(QUERY, timeout=60)
    engine.execute(f"SNAPSHOT {QUERY}")
    insert(engine, "src", [(3, 3)])
    engine.wait_caught_up(QUERY, timeout=60)
    engine.execute(f"PAUSE {QUERY}")
    engine.wait_for_state(QUERY, "PAUSED", timeout=60)
    checkpoint = engine.query(QUERY).checkpoint
    committed, before = last_committed_batch(checkpoint), table(engine, "totals")
    assert before == {0: (1,), 1: (2,)}

    for where, damage in DAMAGED:
        path = where(checkpoint)
        with open(path, "rb") as f:
            whole = f.read()
        damage(path)
        engine.execute(f"RESUME {QUERY}")
        wait_until(lambda: engine.query(QUERY).observed_state == QueryState.ERROR, 60, f"ERROR on {path}")
        failed = engine.query(QUERY)
        named = os.path.relpath(path, checkpoint)
        assert QUERY in failed.error and repr(named) in failed.error, failed.error
        assert f"RESTORE {QUERY} TO SNAPSHOT 1" in failed.error, failed.error
        assert failed.retry_at is None  # not retried: a retry would meet the same file
        # not started on it: nothing read again, nothing committed
        assert (last_committed_batch(checkpoint), table(engine, "totals")) == (committed, before)
        engine.execute(f"PAUSE {QUERY}")
        engine.wait_for_state(QUERY, "PAUSED", timeout=60)
        with open(path, "wb") as f:  # put back, as from a backup
            f.write(whole)

    # the remedy it names: the snapshot, then the later batch read again, each record once
    garble(DAMAGED[0][0](checkpoint))
    engine.execute(f"RESTORE {QUERY} TO SNAPSHOT 1")
    engine.execute(f"RESUME {QUERY}")
    engine.wait_for_state(QUERY, "RUNNING", timeout=60)
    engine.wait_caught_up(QUERY, timeout=60)
    assert table(engine, "totals") == before


def test_without_a_snapshot_the_remedy_is_a_backup_or_a_rebuild():
    report = damage_report(
        "CSAS_X_1", Damage("/h/checkpoints/CSAS_X_1/commits/7", "truncated"), "/h/checkpoints/CSAS_X_1", None
    )
    assert (
        "query CSAS_X_1" in report and "'commits/7'" in report and "no snapshot" in report and "RESTORE" not in report
    )


def test_a_damaged_dead_letter_checkpoint_is_named_beside_the_query_s_with_no_restore():
    report = dead_letter_damage_report(
        "CSAS_X_1",
        Damage("/h/checkpoints/CSAS_X_1.dead_letters/offsets/3", "truncated"),
        "/h/checkpoints/CSAS_X_1",
    )
    assert "query CSAS_X_1" in report and "'CSAS_X_1.dead_letters/offsets/3'" in report and "RESTORE" not in report


#: the largest file the runtime of the full-disk test may write (RLIMIT_FSIZE): above its
#: log and catalog, below one batch's output of BIG_BATCH records
FILE_LIMIT = 2 << 20
BIG_BATCH = 40_000


def raise_file_limit(pid: int) -> None:
    """Space freed: the file size limit lifted for a process and all of its descendants
    (the runtime's Python and its Spark JVM)."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    family, grown = {pid}, True
    while grown:
        more = {p for p, parent in parents.items() if parent in family} - family
        family, grown = family | more, bool(more)
    for member in family:
        resource.prlimit(member, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


@pytest.mark.slow
def test_a_full_disk_fails_the_batch_naming_it_and_resume_loses_nothing(sqlite_engine, env, tmp_path):
    """A file system that fills up, as a user can make one: writes past FILE_LIMIT bytes
    fail with EFBIG ("File too large"), as a full disk fails them with ENOSPC."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, pad STRING); CREATE STREAM copy AS SELECT id, pad FROM src;")
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, resource.RLIM_INFINITY))
    with open(tmp_path / "runtime.log", "w") as log:
        proc = subprocess.Popen(
            CLI + ["runtime", "--master", "local[1]", "--interval", "0.2", "--conf", "spark.ui.enabled=false"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=limit,
        )  # fmt: skip
    try:
        engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=120)
        src = engine.catalog.source("SRC")
        rows = [{"id": i, "pad": "x" * 60} for i in range(BIG_BATCH)]
        topics.append(src.path, src.format, src.columns, rows)
        wait_until(lambda: "no room" in (engine.query("CSAS_COPY_1").error or ""), 120, "the full disk reported")
        error = engine.query("CSAS_COPY_1").error
        assert "query CSAS_COPY_1" in error and "File too large" in error and "free space" in error, error
        assert "RESUME CSAS_COPY_1" in error and engine.catalog.source("COPY").path in error, error

        raise_file_limit(proc.pid)
        engine.execute("PAUSE CSAS_COPY_1")
        engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=60)
        engine.execute("RESUME CSAS_COPY_1")
        engine.wait_caught_up("CSAS_COPY_1", timeout=120, through_retries=True)
        counted = engine.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM copy")[0].rows
        assert [tuple(r) for r in counted] == [(BIG_BATCH, BIG_BATCH)]  # nothing lost, nothing twice
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)


def test_the_record_of_sent_dead_letters_replaces_a_link_at_its_name_and_names_a_damaged_one(tmp_path):
    """``<checkpoint>/dead_letters_sent`` (runtime/file_dead_letters.py): a link planted at its
    name is replaced, never written through or removed through; a damaged one is named."""
    from airflow_provider_streamql.storage.checkpoints import dead_letters_sent, record_dead_letters_sent
    checkpoint = tmp_path / "CSAS_X_1"
    (checkpoint / "commits").mkdir(parents=True)
    commit = checkpoint / "commits" / "5"
    commit.write_text("v1\n{}\n")
    (checkpoint / "dead_letters_sent").symlink_to(commit)
    record_dead_letters_sent(str(checkpoint), 7)
    assert commit.read_text() == "v1\n{}\n" and not (checkpoint / "dead_letters_sent").is_symlink()
    assert dead_letters_sent(str(checkpoint)) == 7
    (checkpoint / "dead_letters_sent").unlink()
    (checkpoint / "dead_letters_sent").symlink_to(commit)
    record_dead_letters_sent(str(checkpoint), None)
    assert commit.read_text() == "v1\n{}\n" and not os.path.lexists(checkpoint / "dead_letters_sent")
    assert dead_letters_sent(str(checkpoint)) is None
    (checkpoint / "dead_letters_sent").write_text("\x00garbled")
    with pytest.raises(ValueError, match="dead_letters_sent' holds .*not the number of a batch"):
        dead_letters_sent(str(checkpoint))
