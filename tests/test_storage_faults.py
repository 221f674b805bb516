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


def test_an_in_place_upgrade_stops_the_old_version_after_its_in_flight_batch(sqlite_engine, runtimes, monkeypatch):
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, v INT); CREATE STREAM big AS SELECT id, v FROM src WHERE v >= 0;")
    runtime = runtimes.start(engine)
    insert(engine, "src", [(1, 1)])
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    checkpoint = engine.query("CSAS_BIG_1").checkpoint
    in_flight = last_committed_batch(checkpoint) + 1

    # The next batch waits at its commit (its output written, not yet renamed into place)
    # until the upgrade has begun to stop it: the stop meets a batch in flight every time.
    entered, release = threading.Event(), threading.Event()
    fence = runtime.leases.check

    def held_fence(query_id, epoch):
        if not release.is_set():
            entered.set()
            release.wait(120)
        fence(query_id, epoch)

    monkeypatch.setattr(runtime.leases, "check", held_fence)
    insert(engine, "src", [(2, 2)])
    assert entered.wait(60), "the batch never reached its commit"
    engine.execute("CREATE OR REPLACE STREAM big AS SELECT id, v FROM src WHERE v >= -1")
    engine.wait_for_state("CSAS_BIG_1", "UPGRADING", timeout=60)
    release.set()
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
    assert stray_files(checkpoint, engine.catalog.source("BIG").path) == []
