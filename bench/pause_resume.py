"""Control-plane latency and runtime throughput (issue 2's performance targets).

    .venv/bin/python bench/pause_resume.py [--rounds 10] [--rows 2000000] [--parts latency]
        [--on-error FAIL] [--catalog-url postgresql+psycopg://.../empty_database]
    .venv/bin/python bench/pause_resume.py --kafka [--rounds 10]

Measures, with a real runtime on a local SparkSession and a SQLite catalog (or, for the
latency rounds, the empty database ``--catalog-url`` names):
  * PAUSE issued -> PAUSED observed, on an idle query (target < 1 s);
  * RESUME issued -> first batch committed (target < 1.5 s);
  * throughput of a file-to-file filter query run by the runtime vs the same query
    hand-written in PySpark in the same session (target ratio >= 0.95).
The runtime reconciles every 0.5 s (the default), as `streamql runtime` does, under the
default error policy (LOG_AND_CONTINUE: on files, one Spark query; on Kafka topics, each
query with its dead-letter companion) unless ``--on-error`` names another. ``--parts latency``
runs the latency rounds alone.

``--kafka`` (issue 30): the latency rounds on a query from one Kafka topic to another, on the
tests' broker (``bench/broker.py``), a record produced to the input topic while paused; the
file throughput is not run (Kafka's is ``bench/kafka_throughput.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from progress import ProgressEvents
from pyspark.sql import DataFrame
from pyspark.sql.streaming import DataStreamWriter

from airflow_provider_streamql.catalog import ERROR_POLICIES, Catalog
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import Runtime, build_session
from airflow_provider_streamql.runtime.evolution import source_evolution
from airflow_provider_streamql.runtime.schemas import WHOLE_RECORDS
from airflow_provider_streamql.storage.checkpoints import last_committed_batch
from airflow_provider_streamql.storage.layout import ALLOWED_PATHS_ENV

POLL = 0.005


def poll(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(POLL)
    return time.monotonic()


@dataclass(frozen=True)
class Pipeline:
    """The query the latency rounds pause and resume (``CSAS_F_1``), and how one record
    reaches its input while it is paused."""

    statements: str
    add_record: Callable[[Engine, int], None]


#: a stream of files into a stream of files
FILES = Pipeline(
    "CREATE STREAM s (id INT, v DOUBLE); CREATE STREAM f AS SELECT * FROM s WHERE v > 0;",
    lambda engine, i: engine.execute(f"INSERT INTO s VALUES ({i}, 1.0)"),
)


def on_kafka(broker) -> Pipeline:
    """A topic into a topic on ``broker``; a record is produced to the input topic."""
    source, sink = broker.create_topic("bench-pause-in"), broker.create_topic("bench-pause-out")
    return Pipeline(
        f"CREATE STREAM s (id INT KEY, v DOUBLE) WITH (kafka_topic='{source}');"
        f"CREATE STREAM f WITH (kafka_topic='{sink}') AS SELECT * FROM s WHERE v > 0;",
        lambda engine, i: broker.produce(source, [(str(i), {"v": 1.0})]),
    )


def latency(
    spark, rounds: int, pipeline: Pipeline = FILES, *, on_error: str | None = None, catalog_url: str | None = None
) -> dict:
    home = tempfile.mkdtemp(prefix="bench-latency-")
    engine = Engine(catalog_url or f"sqlite:///{home}/catalog.db", home=home)
    engine.execute(pipeline.statements)
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5, on_error=on_error)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    engine.wait_for_state("CSAS_F_1", "RUNNING", timeout=120)
    checkpoint = engine.query("CSAS_F_1").checkpoint
    pauses, resumes = [], []
    for i in range(rounds):
        time.sleep(1.0)  # idle
        t0 = time.monotonic()
        engine.execute("PAUSE CSAS_F_1")
        pauses.append(poll(lambda: engine.query("CSAS_F_1").observed_state == "PAUSED") - t0)
        pipeline.add_record(engine, i)
        before = last_committed_batch(checkpoint)
        t0 = time.monotonic()
        engine.execute("RESUME CSAS_F_1")
        resumes.append(poll(lambda: last_committed_batch(checkpoint) > before) - t0)
    runtime.stop()
    thread.join()
    return {"pause_to_paused_s": summary(pauses), "resume_to_first_commit_s": summary(resumes)}


def write_input(path: str, rows: int, files: int) -> None:
    os.makedirs(path, exist_ok=True)
    per_file = rows // files
    for f in range(files):
        with open(os.path.join(path, f"part-{f:05d}.json"), "w") as out:
            for i in range(f * per_file, (f + 1) * per_file):
                out.write(json.dumps({"id": i, "user": f"u{i % 1000}", "cost": (i % 200) - 50.0}) + "\n")


def hand_filter(df: DataFrame, out: str) -> DataStreamWriter:
    """The filter as a user writes it in PySpark, into Spark's file sink."""
    return df.where("cost > 0").writeStream.format("json").option("path", out).outputMode("append")


#: the filter as a statement to a runtime, and the query id it gets
FILTER = ("CREATE STREAM f AS SELECT * FROM s WHERE cost > 0", "CSAS_F_1")


def handwritten(spark, src: str, out: str, shape: Callable[[DataFrame, str], DataStreamWriter] = hand_filter) -> float:
    """``shape`` (the query from the source to its writer) over ``src``, hand-written in PySpark:
    the time from ``start()`` to every input file processed."""
    t0 = time.monotonic()
    # the session is the runtime's, which makes the parsers read whole records for its
    # queries: the hand-written query gets Spark's defaults, as in a session of its own
    for key in WHOLE_RECORDS:
        spark.conf.unset(key)
    # ... and which names its streams (source evolution on): an unnamed hand-written
    # source starts with it off, as the runtime's own older queries do
    with source_evolution(spark, False):
        df = spark.readStream.format("json").schema("`id` INT, `user` STRING, `cost` DOUBLE").load(src)
        query = shape(df, out).option("checkpointLocation", out + "-checkpoint").start()
    query.processAllAvailable()
    elapsed = time.monotonic() - t0
    query.stop()
    return elapsed


def via_runtime(spark, src: str, home: str, query: tuple[str, str] = FILTER) -> float:
    """``query`` (a statement and its query id) over ``src`` by an idle runtime: the time from
    the statement to every input file processed and committed."""
    statement, query_id = query
    # the shared input lies outside this round's home: allow its folder, as an operator would
    os.environ[ALLOWED_PATHS_ENV] = os.path.dirname(src)
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute(f"CREATE STREAM s (id INT, user STRING, cost DOUBLE) WITH (path='{src}')")
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    time.sleep(1.0)  # the runtime is up and idle, as in production
    t0 = time.monotonic()
    engine.execute(statement)
    engine.wait_caught_up(query_id, timeout=600, poll=POLL)
    elapsed = time.monotonic() - t0
    runtime.stop()
    thread.join()
    return elapsed


class BatchDurations(ProgressEvents):
    """Spark's own breakdown (``durationMs``) of each query's batch that read input: where
    the time of a side goes (addBatch is the sink's write, getBatch the source's listing)."""

    def __init__(self):
        self.seen: list[dict] = []

    def progress(self, progress: dict) -> None:
        if progress["numInputRows"] > 0:
            self.seen.append(progress["durationMs"])

    def take(self, timeout: float = 10.0) -> dict:
        """The durations of the batch just run (listener events are delivered late)."""
        poll(lambda: self.seen, timeout)
        return self.seen.pop()


def throughput(spark, rows: int, rounds: int) -> dict:
    base = tempfile.mkdtemp(prefix="bench-throughput-")
    src = os.path.join(base, "input")
    write_input(src, rows, 200)
    durations = BatchDurations()
    spark.streams.addListener(durations)
    hand, ours = [], []
    breakdown: dict[str, list[dict]] = {"handwritten": [], "streamql": []}
    for r in range(rounds):  # alternate, so warm-up and caches favour neither side
        hand.append(handwritten(spark, src, os.path.join(base, f"hand-{r}")))
        breakdown["handwritten"].append(durations.take())
        ours.append(via_runtime(spark, src, os.path.join(base, f"streamql-{r}")))
        breakdown["streamql"].append(durations.take())
    spark.streams.removeListener(durations)
    return {
        "rows": rows,
        "handwritten_s": summary(hand),
        "streamql_s": summary(ours),
        "throughput_ratio": round(statistics.median(hand) / statistics.median(ours), 3),
        # median ms per phase of the one batch each round reads its input in
        "batch_ms": {
            side: {k: statistics.median(d[k] for d in seen) for k in ("triggerExecution", "getBatch", "addBatch")}
            for side, seen in breakdown.items()
        },
    }


def summary(values: list[float]) -> dict:
    values = sorted(values)
    return {
        "median": round(statistics.median(values), 3),
        "min": round(values[0], 3),
        "max": round(values[-1], 3),
        "n": len(values),
    }


PARTS = ("latency", "throughput")


def parts(text: str) -> list[str]:
    """``--parts``: names of :data:`PARTS`, comma-separated."""
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in named if part not in PARTS]
    if unknown or not named:
        raise argparse.ArgumentTypeError(f"parts are {', '.join(PARTS)}, not {text!r}")
    return named


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--throughput-rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--kafka", action="store_true", help="the latency rounds on Kafka topics; no throughput")
    parser.add_argument(
        "--parts",
        type=parts,
        default=",".join(PARTS),
        help=f"comma-separated, of {', '.join(PARTS)} (not with --kafka)",
    )
    parser.add_argument(
        "--catalog-url",
        help="the latency rounds' catalog: an empty database (e.g. PostgreSQL's); default a new SQLite file",
    )
    parser.add_argument(
        "--on-error",
        type=str.upper,
        choices=[policy.value for policy in ERROR_POLICIES],
        help="the latency rounds' error policy (default: the runtime's)",
    )
    args = parser.parse_args()
    spark = build_session(args.master, "streamql-bench", {"spark.ui.enabled": "false"})
    if args.kafka:
        from broker import kafka_broker, on_broker

        with kafka_broker() as broker:
            on_broker(spark, broker)
            result = {
                "latency_kafka": latency(
                    spark, args.rounds, on_kafka(broker), on_error=args.on_error, catalog_url=args.catalog_url
                )
            }
            spark.stop()  # before the broker: Spark's cached Kafka producers would retry it
        print(json.dumps(result, indent=2))
        return
    result = {}
    if "latency" in args.parts:
        result["latency"] = latency(spark, args.rounds, on_error=args.on_error, catalog_url=args.catalog_url)
    if "throughput" in args.parts:
        result["throughput"] = throughput(spark, args.rows, args.throughput_rounds)
    print(json.dumps(result, indent=2))
    spark.stop()


if __name__ == "__main__":
    main()
