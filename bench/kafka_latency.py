"""End-to-end latency over Kafka (issue 30): records produced at a steady rate, a filter from the
input topic to an output topic, and a ``read_committed`` consumer of the output.

    .venv/bin/python bench/kafka_latency.py [--rate 1000] [--seconds 30] [--warmup 10]

A producer thread writes ``--rate`` records a second (one at a time, on a fixed schedule,
``linger.ms`` 0) to a topic of ``--partitions`` partitions, each value carrying its produce
time (``ts``, epoch seconds). For each form below in turn, a query reads the topic from
``latest`` and writes ``SELECT * ... WHERE cost > 0`` (about 75 % of the records) to a new
output topic; a consumer of that topic (``isolation.level=read_committed``, in this process,
so one clock) takes, for every record, the time it saw it minus ``ts``. The first
``--warmup`` seconds after the first output record are dropped; the next ``--seconds`` are
reported (p50, p99, max).

Forms (``FORMS``):
  * ``streamql``: the statement run by a streamql runtime. A runtime starts every query with
    Spark's default trigger (a micro-batch as soon as the last one ended; streamql has no
    trigger setting), so this is both its default and its fastest trigger.
  * ``streamql-plan``: the plan a runtime starts for that statement, started without a runtime
    (where the difference to ``pyspark`` is: the plan, or the runtime around it).
  * ``pyspark``: the same filter hand-written, default trigger (what streamql's form costs).
  * ``pyspark-realtime``: the same, with Spark 4.3's real-time mode
    (``trigger(realTime=...)``), which streamql does not offer; reported as found.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker import KafkaBroker, kafka_broker, on_broker
from progress import ProgressEvents
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import Runtime, build_session
from airflow_provider_streamql.runtime.badrecords import RecordGuard
from airflow_provider_streamql.runtime.connectors import Frames, start_query
from airflow_provider_streamql.runtime.evolution import source_evolution
from airflow_provider_streamql.runtime.schemas import WHOLE_RECORDS

SCHEMA = "user STRING, cost DOUBLE, ts DOUBLE"
#: the query's name in Spark, both ways: the id the runtime gives the statement's query
QUERY = "CSAS_F_1"


class Producer(threading.Thread):
    """``rate`` records a second to ``topic`` until stopped, each stamped with its produce time."""

    def __init__(self, broker: KafkaBroker, topic: str, rate: int):
        super().__init__(daemon=True)
        self.broker, self.topic, self.rate = broker, topic, rate
        self.done = threading.Event()
        self.late = 0  # records sent more than 5 ms after their slot (the schedule slipped)

    def run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        producer = KafkaProducer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 0})
        start, i = time.time(), 0
        while not self.done.is_set():
            slot = start + i / self.rate
            wait = slot - time.time()
            if wait > 0:
                time.sleep(wait)
            elif wait < -0.005:
                self.late += 1
            value = {"user": f"u{i % 1000}", "cost": float(i % 200 - 50), "ts": time.time()}
            producer.produce(self.topic, key=str(i), value=json.dumps(value))
            producer.poll(0)
            i += 1
        producer.flush(30)


class Latencies(threading.Thread):
    """A ``read_committed`` consumer of ``topic``: each record's arrival minus its ``ts``."""

    def __init__(self, broker: KafkaBroker, topic: str):
        super().__init__(daemon=True)
        self.broker, self.topic = broker, topic
        self.seen: list[tuple[float, float]] = []  # (arrival, latency)
        self.done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.done.is_set():
                message = consumer.poll(0.05)
                if message is None or message.error():
                    continue
                now = time.time()
                self.seen.append((now, now - json.loads(message.value())["ts"]))
        finally:
            consumer.close()

    def window(self, warmup: float, seconds: float, failed: Callable[[], str | None]) -> list[float]:
        """The latencies of the records that arrived in the ``seconds`` after ``warmup``
        seconds past the first one; waits until that window has passed (or the query failed)."""
        deadline = time.monotonic() + 180
        while not self.seen:
            error = failed() or (time.monotonic() > deadline and "no output in 180 s")
            if error:
                raise RuntimeError(error)
            time.sleep(0.1)
        begin = self.seen[0][0] + warmup
        time.sleep(max(0.0, begin + seconds - time.time()))
        return [latency for at, latency in list(self.seen) if begin <= at < begin + seconds]


@dataclass(frozen=True)
class Started:
    """A form's running query: how to stop it, and its error if it failed."""

    stop: Callable[[], None]
    failed: Callable[[], str | None]


class BatchTimes(ProgressEvents):
    """Spark's breakdown (``durationMs``) of every batch that read input, by query name: where
    a form's latency goes."""

    def __init__(self) -> None:
        self.seen: dict[str, list[dict]] = {}

    def progress(self, progress: dict) -> None:
        if progress["numInputRows"]:
            self.seen.setdefault(progress["name"], []).append(
                {**progress["durationMs"], "rows": progress["numInputRows"]}
            )

    def medians(self, name: str) -> dict:
        batches = self.seen.pop(name, [])
        keys = sorted({k for b in batches for k in b})
        return {"batches": len(batches), **{k: statistics.median(b.get(k, 0) for b in batches) for k in keys}}


def hand_filter(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    raw = (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    )
    value = F.from_json(F.col("value").cast("string"), SCHEMA)
    rows = raw.select(F.col("key").cast("string").cast("int").alias("id"), value.alias("v")).select("id", "v.*")
    return rows.where("cost > 0").select(
        F.col("id").cast("string").alias("key"), F.to_json(F.struct("user", "cost", "ts")).alias("value")
    )


def handwritten(trigger: Callable[[DataStreamWriter], DataStreamWriter]) -> Callable:
    def run(spark, broker, source: str, out: str) -> Started:
        for key in WHOLE_RECORDS:  # set by the runtime on the session: a hand-written query has Spark's defaults
            spark.conf.unset(key)
        with source_evolution(spark, False):  # an unnamed source in the runtime's session
            writer = hand_filter(spark, broker.bootstrap, source).writeStream.format("kafka")
            query = trigger(
                writer.option("kafka.bootstrap.servers", broker.bootstrap)
                .option("topic", out)
                .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-latency-hand-"))
                .queryName(QUERY)
            ).start()
        return Started(query.stop, lambda: query.exception() and str(query.exception()))

    return run


def planned(source: str, out: str) -> Engine:
    """A catalog holding the filter as a statement (not yet run)."""
    home = tempfile.mkdtemp(prefix="bench-latency-streamql-")
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute(
        f"CREATE STREAM s (id INT KEY, user STRING, cost DOUBLE, ts DOUBLE) WITH (kafka_topic='{source}');"
        f"CREATE STREAM f WITH (kafka_topic='{out}') AS SELECT * FROM s WHERE cost > 0"
    )
    return engine


def plan_alone(spark, broker, source: str, out: str) -> Started:
    """The streaming plan a runtime starts for the statement (its decoding, bad-record guard
    and encoding, ``runtime/connectors.py``), started here with no runtime around it: tells
    the plan's cost from the runtime's."""
    catalog = planned(source, out).catalog
    query = catalog.query(QUERY)
    assert query is not None
    sources = catalog.sources()
    guard = RecordGuard(QUERY, "FAIL")
    stream = start_query(spark, query, query.plan, sources, sources[query.sink], lambda: None, guard, Frames())
    return Started(stream.stop, lambda: stream.exception() and str(stream.exception()))


def via_runtime(spark, broker, source: str, out: str) -> Started:
    engine = planned(source, out)
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()

    def stop() -> None:
        runtime.stop()
        thread.join()

    return Started(stop, lambda: engine.query(QUERY).error)


def realtime(duration: str) -> Callable:
    # real-time mode refuses append ("set the output mode to Update"); a filter writes the
    # same records either way
    return handwritten(lambda w: w.outputMode("update").trigger(realTime=duration))


def forms(realtime_batch: str) -> dict[str, Callable]:
    return {
        "streamql": via_runtime,
        "streamql-plan": plan_alone,
        "pyspark": handwritten(lambda w: w),
        "pyspark-realtime": realtime(realtime_batch),
    }


def measure(
    spark, broker, source: str, form: str, start: Callable, warmup: float, seconds: float, batches: BatchTimes
) -> dict:
    out = broker.create_topic(f"bench-latency-{form}", 1)
    consumer = Latencies(broker, out)
    consumer.start()
    started = None
    try:
        started = start(spark, broker, source, out)
        latencies = sorted(consumer.window(warmup, seconds, started.failed))
    except Exception as e:  # a form this Spark cannot run is reported, not fatal
        return {"error": " ".join(str(e).split())[:600]}
    finally:
        if started is not None:
            started.stop()
        consumer.done.set()
        consumer.join()
    return {
        "records": len(latencies),
        "p50_ms": round(1000 * statistics.median(latencies), 1),
        "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
        "max_ms": round(1000 * latencies[-1], 1),
        "batch_ms_median": batches.medians(QUERY),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--realtime-batch", default="5 seconds")
    parser.add_argument("--forms", default="streamql,streamql-plan,pyspark,pyspark-realtime")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = build_session(args.master, "streamql-bench", {"spark.ui.enabled": "false"})
    result: dict = {"rate": args.rate, "seconds": args.seconds, "partitions": args.partitions}
    with kafka_broker() as broker:
        on_broker(spark, broker)
        source = broker.create_topic("bench-latency-input", args.partitions)
        producer = Producer(broker, source, args.rate)
        producer.start()
        table = forms(args.realtime_batch)
        batches = BatchTimes()
        spark.streams.addListener(batches)
        for form in args.forms.split(","):
            batches.seen.clear()
            result[form] = measure(spark, broker, source, form, table[form], args.warmup, args.seconds, batches)
            print(json.dumps({form: result[form]}), flush=True)
        producer.done.set()
        producer.join()
        result["late_produces"] = producer.late
        spark.stop()  # before the broker: Spark's cached Kafka producers would retry it
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
