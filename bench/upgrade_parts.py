"""Where an in-place upgrade's gap goes (issue 33): each part of the swap timed in a warm
runtime, and Spark's own floor beside it.

    PYTHONPATH=$PWD .venv/bin/python bench/upgrade_parts.py [--rounds 8] [--records 15]

* Upgrade: as ``bench/upgrade.py`` (one record every 0.1 s, ``CREATE OR REPLACE`` alternating
  two filters); per round, the gap, and the runtime's parts of the swap timed where they run
  (stopping the old version after its batch, the checkpoint's snapshot, starting the new
  version, the whole reconcile), relative to the old version's last commit, and the new
  version's first batch as Spark reports it (its trigger's start, ``durationMs``).
* Spark's floor: a one-record micro-batch of the same filter, hand-written in PySpark (Spark's
  file sink) and run by streamql (its batch writer), ``--records`` records one at a time 0.6 s
  apart; medians of Spark's ``durationMs`` phases.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import time

from timeline import Timeline
from upgrade import VERSIONS, Feeder, commit_times, warm_runtime

from airflow_provider_streamql.runtime import build_session, reconcile, rollout, spark_queries
from airflow_provider_streamql.runtime.evolution import source_evolution

#: (owner, attribute) of each part of a swap that is timed
PARTS = {
    "reconcile": (reconcile.Reconciler, "reconcile"),
    "stop": (spark_queries, "stop_after_batch"),
    "snapshot": (rollout, "take_snapshot"),
    "start": (spark_queries.SparkQueries, "start"),
}
PHASES = ("triggerExecution", "addBatch", "queryPlanning", "latestOffset", "getBatch", "walCommit", "commitOffsets")


def progress_time(progress: dict) -> float:
    return datetime.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def upgrades(spark, rounds: int, timeline: Timeline) -> list[dict]:
    engine, runtime, thread = warm_runtime(spark, tempfile.mkdtemp(prefix="bench-upgrade-parts-"))
    feeder = Feeder(engine)
    feeder.start()
    checkpoint, found = engine.query("CSAS_F_1").checkpoint, []
    for r in range(rounds):
        time.sleep(3)
        timeline.events.clear()
        asked = time.time()
        engine.wait_for_results(engine.execute(VERSIONS[r % 2]), timeout=60)
        time.sleep(2)
        started = engine.catalog.versions("CSAS_F_1")[-1]["started_at"]
        commits = commit_times(checkpoint).values()
        last, first = max(t for t in commits if t <= started), min(t for t in commits if t > started)
        stream = next(q for q in spark.streams.active if q.name == "CSAS_F_1")
        batch = next(p for p in stream.recentProgress if p["numInputRows"] > 0)  # the new version's first
        found.append(
            {
                "gap_s": round(first - last, 3),
                "asked_at": round(asked - last, 3),
                "parts": timeline.first_after(asked, last),
                "first_batch_triggered_at": round(progress_time(batch) - last, 3),
                "first_batch_ms": {k: batch["durationMs"].get(k, 0) for k in PHASES},
            }
        )
    feeder.stopping.set()
    runtime.stop()
    thread.join()
    return found


def write_record(folder: str, i: int) -> None:
    aside = os.path.join(folder, f".r{i}.json")
    with open(aside, "w") as f:
        f.write(json.dumps({"id": i, "v": 1.0}) + "\n")
    os.rename(aside, os.path.join(folder, f"r{i}.json"))


def medians(progress: list[dict]) -> dict[str, float]:
    batches = [p for p in progress if p["numInputRows"] > 0][2:]  # the first two warm the plan
    phases = {k: statistics.median(p["durationMs"].get(k, 0) for p in batches) for k in PHASES}
    return {"batches": len(batches), **phases}


def one_record_batches(spark, records: int) -> dict:
    base = tempfile.mkdtemp(prefix="bench-one-record-")
    source = os.path.join(base, "in")
    os.makedirs(source)
    with source_evolution(spark, False):  # a runtime's start leaves the session's setting as its query needed
        hand = (
            spark.readStream.schema("id INT, v DOUBLE")
            .json(source)
            .where("v > 0")
            .writeStream.format("json")
            .option("path", os.path.join(base, "out"))
            .option("checkpointLocation", os.path.join(base, "checkpoint"))
            .start()
        )
    for i in range(records):
        write_record(source, i)
        time.sleep(0.6)
    hand.stop()
    engine, runtime, thread = warm_runtime(spark, base)
    for i in range(records):
        engine.execute(f"INSERT INTO s VALUES ({i}, 1.0)")
        time.sleep(0.6)
    ours = next(q for q in spark.streams.active if q.name == "CSAS_F_1").recentProgress
    runtime.stop()
    thread.join()
    return {"hand_written_ms": medians(hand.recentProgress), "streamql_ms": medians(ours)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--records", type=int, default=15)
    args = parser.parse_args()
    timeline = Timeline(PARTS)
    spark = build_session("local[2]", "bench-upgrade-parts", {"spark.ui.enabled": "false"})
    result = {
        "upgrades": upgrades(spark, args.rounds, timeline),
        "one_record_batch": one_record_batches(spark, args.records),
    }
    spark.stop()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
