"""Where a one-record micro-batch's time goes (issue 33): a filter and a GROUP BY table in one
runtime (in this process, `local[1]`), fed one record a round; each round waits until both
have committed it. Prints the round's latency and, per streaming query (before 2026-11-28 each
query's dead-letter companion was one of its own), the median of Spark's ``durationMs`` phases.

    PYTHONPATH=$PWD .venv/bin/python bench/batch_cost.py [--rounds 12] [--count-chmod]

``--count-chmod`` puts a ``chmod`` that logs each run first on the driver's PATH and prints
how many Hadoop started a round (run apart: the logging slows each one down).
``STREAMQL_LOCAL_FS=off`` runs the driver on Hadoop's own local file system
(runtime/local_fs.py).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import tempfile
import threading
import time

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.conditions import CaughtUp
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import Runtime, build_session
from airflow_provider_streamql.storage import topics
from bench.chmod_log import ChmodLog

QUERIES = ("CSAS_F_1", "CTAS_T_2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--count-chmod", action="store_true", help="count the chmod processes a round starts")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="streamql-batch-cost-")
    chmod_log = ChmodLog(root)
    if args.count_chmod:  # the driver's JVM, started below, takes this PATH
        os.environ["PATH"] = chmod_log.path(os.environ["PATH"])
    url = f"sqlite:///{root}/catalog.db"
    engine = Engine(url, home=os.path.join(root, "home"), issuer="bench")
    engine.execute(
        "CREATE STREAM ev (id INT KEY, user STRING, x INT);"
        "CREATE STREAM f AS SELECT * FROM ev WHERE x > 0;"
        "CREATE TABLE t AS SELECT user, COUNT(*) AS n, SUM(x) AS s FROM ev GROUP BY user;"
    )
    spark = build_session("local[1]", "batch-cost", {"spark.ui.enabled": "false"})
    runtime = Runtime(Catalog(url), "default", spark, interval=0.2, lease_ttl=8.0)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    for query in QUERIES:
        engine.wait_for_state(query, "RUNNING", timeout=120)
    src = engine.catalog.source("EV")
    phases: dict[str, dict[str, list[int]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    latencies = []
    chmods = []
    for i in range(args.rounds):
        counted = chmod_log.count()
        began = time.time()
        topics.append(src.path, src.format, src.columns, [{"id": i, "user": f"u{i % 3}", "x": 1}])
        while not all(CaughtUp(q, as_of=began + 0.001).check(engine).done for q in QUERIES):
            time.sleep(0.02)
        latencies.append(time.time() - began)
        chmods.append(chmod_log.count() - counted)
        for query in spark.streams.active:
            progress = query.lastProgress
            if progress and progress["numInputRows"]:
                for phase, ms in progress["durationMs"].items():
                    phases[query.name][phase].append(ms)
    median, low, high = statistics.median(latencies), min(latencies), max(latencies)
    print(f"round latency: median {median:.3f} s (min {low:.3f}, max {high:.3f})")
    if args.count_chmod:
        print(f"chmod processes a round: median {statistics.median(chmods)} (min {min(chmods)}, max {max(chmods)})")
    for name, by_phase in sorted(phases.items()):
        print(name, {p: int(statistics.median(ms)) for p, ms in sorted(by_phase.items())})
    runtime.stop()
    thread.join(60)
    engine.close()
    spark.stop()


if __name__ == "__main__":
    main()
