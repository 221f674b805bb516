"""Faults in the storage (issue 34, docs/reliability.md): a stop at a batch boundary during an
in-place upgrade."""

import os
import threading

from airflow_provider_streamql.catalog.states import QueryState
from airflow_provider_streamql.storage.checkpoints import INTERRUPTED_WRITE, last_committed_batch

from .support import insert, stream_rows, wait_until


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
    assert [v["outcome"] for v in engine.catalog.versions("CSAS_BIG_1")] == ["REPLACED", "ACTIVE"]
    assert stray_files(checkpoint, sink) == []
