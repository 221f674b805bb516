"""Where a RESUME ALL's time goes (issue 33): N filters on one runtime (in this process,
``local[2]``, the default policy), paused and resumed ``--rounds`` times; per RESUME ALL, its
time (the statement to every query RUNNING, as ``bench/scale.py`` times it) and each part of
the starts timed where it runs, over the runtime's workers: how many runs, their time summed
over the threads, the mean, and the span from the statement.

    PYTHONPATH=$PWD .venv/bin/python bench/resume_all_parts.py [--queries 40] [--rounds 4]

Spark's own parts are ``DataStreamWriter.foreachBatch`` (PySpark's set-up of the batch
writer's callback) and ``DataStreamWriter.start``; the rest of ``start_query`` is streamql's
calls that build the writer. The first RESUME ALL warms the code paths and is left out.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time

from pyspark.sql.streaming.readwriter import DataStreamWriter
from timeline import Timeline

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.conditions import QueriesInState
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import (
    Runtime,
    build_session,
    file_dead_letters,
    holds,
    reconcile,
    rollout,
    spark_queries,
    status,
)

#: name -> (owner, attribute) of each part of a start that is timed
PARTS = {
    "reconcile": (reconcile.Reconciler, "reconcile"),
    "readiness window (versions read)": (rollout.Rollout, "resume_window"),
    "state reported (STARTING)": (status.Status, "report"),
    "SparkQueries.start": (spark_queries.SparkQueries, "start"),
    "interrupted writes removed": (spark_queries, "remove_interrupted_writes"),
    "checkpoint damage checked": (spark_queries, "find_damage"),
    "bad-record guard": (holds.Holds, "guard"),
    "file dead letters followed": (file_dead_letters.FileDeadLetters, "follow"),
    "start_query": (spark_queries, "start_query"),
    "DataStreamWriter.foreachBatch": (DataStreamWriter, "foreachBatch"),
    "DataStreamWriter.start": (DataStreamWriter, "start"),
    "versions recorded": (rollout.Rollout, "record_start"),
    "state reported (RUNNING)": (status.Status, "running"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    timeline = Timeline(PARTS)
    spark = build_session("local[2]", "bench-resume-all-parts", {"spark.ui.enabled": "false"})
    home = tempfile.mkdtemp(prefix="bench-resume-all-parts-")
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute("CREATE STREAM src (id INT, v DOUBLE)")
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    n = args.queries
    script = ";\n".join(f"CREATE STREAM o{i} AS SELECT * FROM src WHERE id % {n} = {i}" for i in range(n))
    ids = [r.query_id for r in engine.execute(script + ";")]
    engine.wait(QueriesInState(ids, ["RUNNING"]), timeout=600, poll=0.02)
    time.sleep(3)
    rounds = []
    for r in range(args.rounds + 1):
        engine.execute("PAUSE ALL")
        engine.wait(QueriesInState(ids, ["PAUSED"]), timeout=600, poll=0.02)
        time.sleep(1.5)
        timeline.events.clear()
        asked = time.time()
        engine.execute("RESUME ALL")
        engine.wait(QueriesInState(ids, ["RUNNING"]), timeout=600, poll=0.02)
        took = time.time() - asked
        if r > 0:
            rounds.append({"resume_all_s": round(took, 3), "parts": timeline.totals(asked)})
        time.sleep(2)
    runtime.stop()
    thread.join()
    spark.stop()
    print(json.dumps({"queries": n, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
