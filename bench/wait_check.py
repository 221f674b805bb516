"""What one look of a wait on N queries costs (``QueriesInState``, as ``Engine.wait``,
``streamql exec ... --wait``, the Airflow sensors and the deferred triggers poll it): the
interpreter's time per look, right after a PAUSE ALL, while every query still runs.

A SQLite catalog in a temporary folder, one source and N queries of a live runtime (a
heartbeat and a lease each, observed RUNNING, one batch committed), then PAUSE ALL; each size
is looked at ``--rounds`` times, and the median and spread are printed. No Spark: this is
the reading side of a wait, which shares the interpreter (and the cores) with a runtime when
the wait runs in its process (``bench/scale.py`` waits so) and polls every 20 ms there.

    PYTHONPATH=$PWD .venv/bin/python bench/wait_check.py [--sizes 1,10,40,100] [--rounds 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from airflow_provider_streamql.catalog import Progress, QueryState
from airflow_provider_streamql.conditions import QueriesInState
from airflow_provider_streamql.engine import Engine

RUNTIME = "rt-bench"


def paused_all(n: int) -> tuple[Engine, list[str]]:
    """An engine whose N queries run on a live runtime, just asked to PAUSE ALL."""
    home = tempfile.mkdtemp(prefix=f"bench-wait-{n}-")
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    script = "".join(f"CREATE STREAM o{i} AS SELECT * FROM src WHERE id % {n} = {i};" for i in range(n))
    ids = [r.query_id for r in engine.execute("CREATE STREAM src (id INT, v DOUBLE);" + script) if r.query_id]
    catalog = engine.catalog
    catalog.runtimes.heartbeat(RUNTIME, "default", "bench", 1)
    for q in ids:
        epoch = catalog.leases.acquire(q, RUNTIME, 600.0)
        catalog.observed.set(q, QueryState.RUNNING, runtime_id=RUNTIME, epoch=epoch)
        catalog.observed.record_progress(Progress(q, 0, 1, 1, 1.0, [], time.time()))
    engine.execute("PAUSE ALL")
    return engine, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,10,40,100")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print("| N queries | one look (median) | spread (min-max of the middle 90 %) |")
    print("|---|---|---|")
    for n in [int(s) for s in args.sizes.split(",")]:
        engine, ids = paused_all(n)
        wait = QueriesInState(ids, ["PAUSED"])
        assert not wait.check(engine).done  # every query is still waiting: each is looked at
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            wait.check(engine)
            times.append(time.perf_counter() - start)
        times.sort()
        cut = len(times) // 20
        middle = times[cut : len(times) - cut] or times
        print(f"| {n} | {statistics.median(times) * 1000:.2f} ms | {middle[0] * 1000:.2f}-{middle[-1] * 1000:.2f} ms |")
        engine.catalog.close()


if __name__ == "__main__":
    main()
