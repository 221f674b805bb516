"""Upgrade gap and static validation latency (issue 4's performance targets).

    .venv/bin/python bench/upgrade.py [--rounds 5] [--validations 200]

* Upgrade gap: a warm runtime runs a file-to-file query fed one record every 0.1 s; the gap
  is the time from the last batch committed by version N to the first batch committed by
  N+1 after `CREATE OR REPLACE` (commit times from the checkpoint's `commits/` files).
  Compared in the same run with the usual alternative: stop the Spark application and
  submit a new one that restarts the query on its checkpoint (`streamql runtime` in a new
  process, which is what a spark-submit of the job does: a new driver, JVM and session).
* Static validation: `Engine.validate` of one CREATE OR REPLACE, median over many calls.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import Runtime, build_session

SETUP = "CREATE STREAM s (id INT, v DOUBLE); CREATE STREAM f AS SELECT id, v FROM s WHERE v > 0;"
VERSIONS = [
    "CREATE OR REPLACE STREAM f AS SELECT id, v FROM s WHERE v > -1",
    "CREATE OR REPLACE STREAM f AS SELECT id, v FROM s WHERE v > 0",
]


def commit_times(checkpoint: str) -> dict[int, float]:
    commits = os.path.join(checkpoint, "commits")
    return {int(n): os.path.getmtime(os.path.join(commits, n)) for n in os.listdir(commits) if n.isdigit()}


class Feeder(threading.Thread):
    def __init__(self, engine):
        super().__init__(daemon=True)
        self.engine, self.stopping, self.n = engine, threading.Event(), 0

    def run(self):
        while not self.stopping.wait(0.1):
            self.n += 1
            self.engine.execute(f"INSERT INTO s VALUES ({self.n}, 1.0)")


def gap_around(checkpoint: str, started_at: float) -> float:
    """Last batch committed before the new version (or driver) started -> its first commit.
    (The old version may commit its in-flight batch after the swap was asked for.)"""
    times = commit_times(checkpoint).values()
    return min(t for t in times if t > started_at) - max(t for t in times if t <= started_at)


def warm_runtime(spark, home: str) -> tuple[Engine, Runtime, threading.Thread]:
    """A runtime on its own thread of this process, running the filter of :data:`SETUP` in a
    new catalog in ``home``."""
    engine = Engine(f"sqlite:///{home}/c.db", home=home)
    engine.execute(SETUP)
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    engine.wait_for_state("CSAS_F_1", "RUNNING", timeout=120)
    return engine, runtime, thread


def in_place(spark, rounds: int) -> list[float]:
    engine, runtime, thread = warm_runtime(spark, tempfile.mkdtemp(prefix="bench-upgrade-"))
    feeder = Feeder(engine)
    feeder.start()
    checkpoint, gaps = engine.query("CSAS_F_1").checkpoint, []
    for r in range(rounds):
        time.sleep(3)
        results = engine.execute(VERSIONS[r % 2])
        engine.wait_for_results(results, timeout=60)
        time.sleep(2)
        started = engine.catalog.versions("CSAS_F_1")[-1]["started_at"]
        gaps.append(gap_around(checkpoint, started))
    feeder.stopping.set()
    runtime.stop()
    thread.join()  # its queries stopped: nothing of it runs beside what is measured next
    return gaps


def resubmit(rounds: int) -> list[float]:
    home = tempfile.mkdtemp(prefix="bench-resubmit-")
    env = {**os.environ, "STREAMQL_HOME": home, "STREAMQL_CATALOG": f"sqlite:///{home}/c.db"}
    engine = Engine(env["STREAMQL_CATALOG"], home=home)
    engine.execute(SETUP)
    cmd = [sys.executable, "-m", "airflow_provider_streamql.cli", "runtime", "--conf", "spark.ui.enabled=false"]
    start = lambda: subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = start()
    engine.wait_for_state("CSAS_F_1", "RUNNING", timeout=120)
    feeder = Feeder(engine)
    feeder.start()
    checkpoint, gaps = engine.query("CSAS_F_1").checkpoint, []
    for _ in range(rounds):
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        started = time.time()
        proc = start()
        deadline = time.time() + 120
        while max(commit_times(checkpoint).values()) <= started and time.time() < deadline:
            time.sleep(0.05)
        gaps.append(gap_around(checkpoint, started))
    feeder.stopping.set()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    return gaps


def validation(n: int) -> list[float]:
    home = tempfile.mkdtemp(prefix="bench-validate-")
    engine = Engine(f"sqlite:///{home}/c.db", home=home)
    engine.execute(SETUP)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        engine.validate(VERSIONS[i % 2])
        times.append(time.perf_counter() - t0)
    return times


def summary(values):
    values = sorted(values)
    return {
        "median": round(statistics.median(values), 4),
        "min": round(values[0], 4),
        "max": round(values[-1], 4),
        "n": len(values),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--validations", type=int, default=200)
    args = parser.parse_args()
    result = {"validate_s": summary(validation(args.validations))}
    spark = build_session("local[2]", "bench-upgrade", {"spark.ui.enabled": "false"})
    result["in_place_gap_s"] = summary(in_place(spark, args.rounds))
    spark.stop()
    result["stop_and_resubmit_gap_s"] = summary(resubmit(args.rounds))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
