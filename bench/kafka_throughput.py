"""Throughput over Kafka (issue 30): a filter and a GROUP BY over a topic of JSON records, run by
a streamql runtime and hand-written in PySpark, on the same broker, in one session.

    .venv/bin/python bench/kafka_throughput.py [--records 1000000] [--partitions 4] [--rounds 5] [--warmup 1]

The input topic is produced once (``--records`` JSON values ``{"user", "cost"}`` keyed by the
id, ``--partitions`` partitions); then each round runs, in turn, every query of ``QUERIES`` as
(a) the hand-written PySpark query (``readStream`` kafka -> ``from_json`` -> ``where`` or
``groupBy`` -> ``writeStream`` kafka) and (b) the same query as a statement to an idle
streamql runtime (``SET 'auto.offset.reset' = 'earliest'``), each from ``earliest`` into a new
output topic with a new checkpoint. Both run with Spark's default trigger and no
``maxOffsetsPerTrigger`` (the runtime sets neither), in the same SparkSession (the
runtime's, ``local[2]``).

Both sides are timed the same way, from Spark's own events: from the query's start
(``QueryStartedEvent.timestamp``) to the end of the first micro-batch whose end offsets reach
the input's end offsets (its progress ``timestamp`` plus ``triggerExecution``). For (b) the
time from the statement to that end is reported too (it adds the catalog write and the
runtime's reconcile wait). The output topic's record count is checked against the input.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from broker import KafkaBroker, end_offsets, kafka_broker, on_broker
from progress import ProgressEvents
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import Runtime, build_session
from airflow_provider_streamql.runtime.evolution import source_evolution
from airflow_provider_streamql.runtime.schemas import WHOLE_RECORDS

POLL = 0.01
SCHEMA = "user STRING, cost DOUBLE"
#: the source as streamql declares it
SOURCE = "CREATE STREAM s (id INT KEY, user STRING, cost DOUBLE) WITH (kafka_topic='{topic}')"


def passes_filter(i: int) -> bool:
    return (i % 200) - 50 > 0


def decoded(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The input as a hand-written query reads it: the key as the id, the value parsed."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    value = F.from_json(F.col("value").cast("string"), SCHEMA)
    return raw.select(F.col("key").cast("string").cast("int").alias("id"), value.alias("v")).select("id", "v.*")


def hand_filter(df: DataFrame) -> DataStreamWriter:
    out = df.where("cost > 0").select(
        F.col("id").cast("string").alias("key"), F.to_json(F.struct("user", "cost")).alias("value")
    )
    return out.writeStream.outputMode("append")


def hand_group_by(df: DataFrame) -> DataStreamWriter:
    stats = df.groupBy("user").agg(F.count(F.lit(1)).alias("n"), F.sum("cost").alias("total"))
    out = stats.select(F.col("user").alias("key"), F.to_json(F.struct("n", "total")).alias("value"))
    return out.writeStream.outputMode("update")


@dataclass(frozen=True)
class Query:
    """One query both ways: the statement (``{topic}``: its output topic) and the query id the
    runtime gives it, the hand-written writer, and how many output records the input makes."""

    name: str
    statement: str
    query_id: str
    handwritten: Callable[[DataFrame], DataStreamWriter]
    expected: Callable[[int], int]


QUERIES = (
    Query(
        "filter",
        "CREATE STREAM f WITH (kafka_topic='{topic}') AS SELECT * FROM s WHERE cost > 0",
        "CSAS_F_1",
        hand_filter,
        lambda n: sum(1 for i in range(n) if passes_filter(i)),
    ),
    Query(
        "group_by",
        "CREATE TABLE t WITH (kafka_topic='{topic}') AS "
        "SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM s GROUP BY user",
        "CTAS_T_1",
        hand_group_by,
        lambda n: min(n, 1000),  # one batch: one change per user
    ),
)


def produce_input(spark: SparkSession, broker: KafkaBroker, records: int, partitions: int) -> str:
    """``records`` JSON records on a new topic of ``partitions`` partitions, written by Spark's
    Kafka sink (a batch write); about 75 % have ``cost > 0``, 1,000 users."""
    topic = broker.create_topic("bench-input", partitions)
    rows = spark.range(0, records, numPartitions=4).selectExpr(
        "CAST(id AS STRING) AS key",
        "to_json(named_struct('user', concat('u', CAST(id % 1000 AS STRING)), "
        "'cost', CAST(id % 200 - 50 AS DOUBLE))) AS value",
    )
    rows.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).save()
    return topic


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


@dataclass
class Run:
    started: float | None = None
    finished: float | None = None
    batches: int = 0
    rows: int = 0
    duration_ms: dict | None = None


class CaughtUp(ProgressEvents):
    """Spark's events of every query of the session (by name): when it started, and when its
    first batch reaching the input's end offsets ended."""

    def __init__(self, topic: str, end: dict[int, int]):
        self.topic, self.end = topic, {str(p): o for p, o in end.items()}
        self.runs: dict[str, Run] = {}
        self.lock = threading.Lock()

    def onQueryStarted(self, event):
        with self.lock:
            self.runs[event.name] = Run(started=_epoch(event.timestamp))

    def progress(self, progress: dict) -> None:
        with self.lock:
            run = self.runs.setdefault(progress["name"], Run())
            if run.finished is not None or not progress["numInputRows"]:
                return
            run.batches += 1
            run.rows += progress["numInputRows"]
            offsets = progress["sources"][0]["endOffset"]
            offsets = json.loads(offsets) if isinstance(offsets, str) else offsets
            if offsets.get(self.topic) == self.end:
                run.finished = _epoch(progress["timestamp"]) + progress["durationMs"]["triggerExecution"] / 1000
                run.duration_ms = progress["durationMs"]

    def wait(self, name: str, timeout: float = 600) -> Run:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                run = self.runs.get(name)
                if run is not None and run.finished is not None and run.started is not None:
                    return self.runs.pop(name)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not reach the input's end in {timeout} s")
            time.sleep(POLL)


def handwritten(spark, broker, query: Query, topic: str, out: str, name: str, events: CaughtUp) -> Run:
    # the session is the runtime's, whose queries name their streams: an unnamed hand-written
    # source starts with source evolution off (as in bench/pause_resume.py)
    for key in WHOLE_RECORDS:  # set by the runtime on the session: a hand-written query has Spark's defaults
        spark.conf.unset(key)
    with source_evolution(spark, False):
        writer = query.handwritten(decoded(spark, broker.bootstrap, topic))
        started = (
            writer.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", out)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-kafka-hand-"))
            .queryName(name)
            .start()
        )
    run = events.wait(name)
    started.stop()
    return run


def via_runtime(spark, query: Query, topic: str, out: str, events: CaughtUp) -> tuple[Run, float]:
    home = tempfile.mkdtemp(prefix="bench-kafka-streamql-")
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute(SOURCE.format(topic=topic))
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    time.sleep(1.0)  # the runtime is up and idle, as in production
    issued = time.time()
    engine.execute("SET 'auto.offset.reset' = 'earliest';" + query.statement.format(topic=out))
    run = events.wait(query.query_id)
    runtime.stop()
    thread.join()
    assert run.finished is not None
    return run, run.finished - issued


def throughput(spark, broker, records: int, partitions: int, rounds: int, warmup: int = 1) -> dict:
    topic = produce_input(spark, broker, records, partitions)
    end = end_offsets(broker, topic)
    events = CaughtUp(topic, end)
    spark.streams.addListener(events)
    seen: dict[str, dict[str, list]] = {
        q.name: {"hand": [], "streamql": [], "statement": [], "ms": []} for q in QUERIES
    }
    # alternate, so warm-up and caches favour neither side; the first ``warmup`` rounds (a cold
    # JVM: the first side of the first round ran up to twice as long) are run, not counted
    for r in range(-warmup, rounds):
        for query in QUERIES:
            out = broker.create_topic(f"bench-{query.name}-hand-{r}", partitions)
            hand = handwritten(spark, broker, query, topic, out, f"hand_{query.name}_{r}", events)
            check_output(broker, out, query.expected(records))
            out = broker.create_topic(f"bench-{query.name}-streamql-{r}", partitions)
            ours, from_statement = via_runtime(spark, query, topic, out, events)
            check_output(broker, out, query.expected(records))
            times = {"hand_s": elapsed(hand), "streamql_s": elapsed(ours)}
            print(json.dumps({"round": r, "query": query.name, **times}), flush=True)
            if r < 0:
                continue
            side = seen[query.name]
            side["hand"].append(times["hand_s"])
            side["streamql"].append(times["streamql_s"])
            side["statement"].append(from_statement)
            side["ms"].append({"hand": hand.duration_ms, "streamql": ours.duration_ms})
    spark.streams.removeListener(events)
    return {
        "records": records,
        "partitions": partitions,
        "rounds": rounds,
        "warmup_rounds": warmup,
        **{name: report(records, side) for name, side in seen.items()},
    }


def elapsed(run: Run) -> float:
    assert run.started is not None and run.finished is not None
    return round(run.finished - run.started, 3)


def check_output(broker: KafkaBroker, topic: str, expected: int) -> None:
    """The output topic holds what the query makes of the input (a query that did less would
    look fast)."""
    found = broker.records_in(topic)
    if found != expected:
        raise AssertionError(f"{topic!r} holds {found} records, not {expected}")


def report(records: int, side: dict[str, list]) -> dict:
    hand, ours = statistics.median(side["hand"]), statistics.median(side["streamql"])
    return {
        "handwritten_s": summary(side["hand"]),
        "streamql_s": summary(side["streamql"]),
        "streamql_from_statement_s": summary(side["statement"]),
        "handwritten_records_per_s": round(records / hand),
        "streamql_records_per_s": round(records / ours),
        "ratio_streamql_to_handwritten": round(hand / ours, 3),
        # Spark's own breakdown of the one batch each run read the input in, medians
        "batch_ms": {
            who: {k: statistics.median(ms[who][k] for ms in side["ms"]) for k in ("triggerExecution", "addBatch")}
            for who in ("hand", "streamql")
        },
    }


def summary(values: list[float]) -> dict:
    values = sorted(values)
    return {"median": round(statistics.median(values), 3), "min": round(values[0], 3), "max": round(values[-1], 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = build_session(args.master, "streamql-bench", {"spark.ui.enabled": "false"})
    with kafka_broker() as broker:
        on_broker(spark, broker)
        result = throughput(spark, broker, args.records, args.partitions, args.rounds, args.warmup)
        spark.stop()  # before the broker: Spark's cached Kafka producers would retry it
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
