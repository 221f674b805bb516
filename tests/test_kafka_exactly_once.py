"""Exactly once into Kafka (``SET 'processing.guarantee' = 'exactly_once_v2'``, issue 30): each
micro-batch in one Kafka transaction with its batch marker, on the real broker. A re-run batch
is not produced again; a runtime process killed (SIGKILL) many times mid-batch leaves a
read_committed consumer every record once, in order per key, while a read_uncommitted one also
sees what the killed runtimes' open transactions had produced (aborted)."""
from __future__ import annotations

import collections
import json
import os
import random
import signal
import sys
import time

import pytest

from airflow_provider_streamql.runtime import kafka_exactly_once
from airflow_provider_streamql.runtime.batch_writer import BatchWriter
from airflow_provider_streamql.storage.checkpoints import last_committed_batch, last_planned_batch

from .support import wait_until

KEYS = [f"k{n}" for n in range(10)]


@pytest.mark.spark
def test_a_table_changelog_batch_run_again_is_produced_once(kafka_spark, kafka_topics, sqlite_engine):
    """A table's changelog (an update and a tombstone) written by its batch writer in a
    transaction; the same batch run again (a restart before Spark's commit) adds nothing, the
    next batch comes after it."""
    spark, engine, topic = kafka_spark, sqlite_engine, kafka_topics.new("big")
    engine.execute(f"CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='{kafka_topics.new()}');"
                   "SET 'processing.guarantee' = 'exactly_once_v2';"
                   f"CREATE TABLE big WITH (kafka_topic='{topic}') AS "
                   "SELECT item, SUM(qty) AS qty FROM orders GROUP BY item HAVING SUM(qty) > 5")
    query, big = engine.catalog.query("CTAS_BIG_1"), engine.catalog.source("BIG")
    column = query.plan.having_column
    from airflow_provider_streamql.runtime.tables import HavingChanges
    schema = f"item STRING, qty BIGINT, {column} BOOLEAN"
    batches = [spark.createDataFrame([("tea", 7, True), ("pot", 2, False)], schema),
               spark.createDataFrame([("cup", 9, True)], schema)]

    def writer():  # a new run of the query: a new writer, a new producer with the query's transactional id
        return BatchWriter(big, "v0001", lambda: None, as_directory=True,
                           compute=HavingChanges(column, big.key_columns),
                           transactions=kafka_exactly_once.for_query(query, big))
    writer()(batches[0], 0)
    # the end a read_committed reader sees moves past the transaction's commit marker a moment
    # after the commit returns (the broker writes markers asynchronously)
    wait_until(lambda: kafka_topics.records_in(topic) > 0, 30, "the first batch's commit visible")
    written = kafka_topics.records_in(topic)
    writer()(batches[0], 0)  # batch 0 again, after a restart
    assert kafka_topics.records_in(topic) == written  # not even an empty transaction
    writer()(batches[1], 1)
    assert [(k, v) for k, v, _, _ in kafka_topics.read_to_end(topic)] == [
        ("tea", '{"qty":7}'), ("pot", None), ("cup", '{"qty":9}')]


def test_an_exactly_once_sink_without_confluent_kafka_says_what_to_install(sqlite_engine, runtimes, monkeypatch):
    """A runtime whose Python has no confluent-kafka: the query goes to ERROR saying what to
    install, not a traceback."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM clicks (id INT KEY, page STRING); SET 'processing.guarantee' = 'exactly_once_v2';"
                   "CREATE STREAM pages WITH (kafka_topic='pages') AS SELECT * FROM clicks PARTITION BY id")
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # an import of it fails, as where it is not installed
    runtimes.start(engine)
    engine.wait_for_state("CSAS_PAGES_1", "ERROR", timeout=120)
    assert engine.query("CSAS_PAGES_1").error == (
        "talking to Kafka from Python needs confluent-kafka: pip install 'airflow-provider-streamql[kafka]'")


class Pipeline:
    """A stream over a topic into an exactly-once topic (query CSAS_OUT_1), its input produced
    a chunk at a time, each key's records in order."""

    def __init__(self, engine, kafka_topics, partitions: int = 1, chunk: int = 1500):
        self.topics, self.chunk = kafka_topics, chunk  # records produced at a time
        self.source = kafka_topics.new("in", partitions=partitions)
        self.out = kafka_topics.new("out", partitions=partitions)
        engine.execute(f"CREATE STREAM src (k STRING KEY, seq INT) WITH (kafka_topic='{self.source}');"
                       "SET 'auto.offset.reset' = 'earliest'; SET 'processing.guarantee' = 'exactly_once_v2';"
                       f"CREATE STREAM out WITH (kafka_topic='{self.out}') AS SELECT k, seq FROM src PARTITION BY k")
        self.checkpoint = engine.query("CSAS_OUT_1").checkpoint
        self.produced: list[tuple[str, int]] = []

    def feed(self) -> None:
        n = len(self.produced)
        chunk = [(KEYS[(n + i) % len(KEYS)], n + i) for i in range(self.chunk)]
        self.topics.produce(self.source, [(k, {"seq": seq}) for k, seq in chunk])
        self.produced.extend(chunk)

    def in_flight(self) -> bool:
        """A batch is planned and not committed (in the checkpoint)."""
        batch = last_committed_batch(self.checkpoint) + 1
        return os.path.exists(f"{self.checkpoint}/offsets/{batch}") and \
            not os.path.exists(f"{self.checkpoint}/commits/{batch}")

    def transaction_open(self) -> bool:
        """A transaction holds records in the output that read_committed consumers cannot see yet."""
        return self.topics.transaction_open(self.out)

    def committed(self) -> int:
        return last_committed_batch(self.checkpoint)

    def quiet(self) -> bool:
        """Every planned batch committed, no transaction open."""
        return self.committed() == last_planned_batch(self.checkpoint) and not self.transaction_open()

    def wait_for(self, moment) -> None:
        """Until ``moment()``, feeding more input whenever the query wrote everything between two looks."""
        def now() -> bool:
            if moment():
                return True
            if self.committed() >= 0 and self.quiet():
                self.feed()
            return False
        wait_until(now, timeout=180, what=moment.__name__)

    def read_committed(self) -> list[tuple[str, int, int]]:
        """(key, seq, partition) of every record a read_committed consumer reads, in offset order per partition."""
        return [(k, json.loads(v)["seq"], p) for k, v, p, _ in self.topics.read_to_end(self.out)]


def test_a_pause_mid_transaction_leaves_no_transaction_open(kafka_spark, kafka_topics, sqlite_engine, runtimes):
    """PAUSE while a batch's transaction is open: once PAUSED, no transaction is left open on
    the output (read_committed consumers are not held back), and after RESUME every record is
    there once."""
    engine = sqlite_engine
    pipeline = Pipeline(engine, kafka_topics, chunk=10000)  # batches that take a while to write
    pipeline.feed()
    runtimes.start(engine)
    pipeline.wait_for(pipeline.transaction_open)
    engine.execute("PAUSE CSAS_OUT_1")
    engine.wait_for_state("CSAS_OUT_1", "PAUSED", timeout=120)
    assert not pipeline.transaction_open()
    engine.execute("RESUME CSAS_OUT_1")
    assert len(kafka_topics.consume(pipeline.out, len(pipeline.produced), timeout=180)) == len(pipeline.produced)
    wait_until(pipeline.quiet, 120, "the last batch committed")
    assert sorted((k, seq) for k, seq, _ in pipeline.read_committed()) == sorted(pipeline.produced)


#: SIGKILLs of the runtime process: the first ones while a batch's transaction is open (its
#: records produced, not committed), the others at a random moment of an in-flight batch
KILLS_IN_A_TRANSACTION, KILLS_AT_RANDOM = 2, 2


def test_a_runtime_killed_mid_batch_again_and_again_produces_every_record_once(sqlite_engine, env, processes,
                                                                               kafka_topics):
    """A stream over a topic into an exactly-once topic through `streamql runtime` processes,
    each killed with SIGKILL while it writes, then restarted: a read_committed consumer reads
    every record once, each key's in the order it was produced; a read_uncommitted consumer
    also reads the records of the transactions the kills left open, which were aborted."""
    engine, rng = sqlite_engine, random.Random(30)
    pipeline = Pipeline(engine, kafka_topics, partitions=2)
    produced = pipeline.produced
    conf = ["--conf", f"spark.streamql.kafka.bootstrap.servers={kafka_topics.bootstrap}"]
    for kill in range(KILLS_IN_A_TRANSACTION + KILLS_AT_RANDOM):
        runtime = processes("default", *conf, lease_ttl=8.0)  # takes the query once the killed one's lease expired
        before = pipeline.committed()
        pipeline.feed()
        # this runtime's own work first (the killed one's batch is still planned, its transaction open)
        wait_until(lambda: pipeline.committed() > before, 180, "a batch this runtime committed")  # noqa: B023
        moment = pipeline.transaction_open if kill < KILLS_IN_A_TRANSACTION else pipeline.in_flight
        pipeline.wait_for(moment)
        if moment == pipeline.in_flight:
            time.sleep(rng.uniform(0, 0.5))  # a random moment of the batch (or just after it)
        os.killpg(runtime.pid, signal.SIGKILL)
        runtime.wait()

    processes("default", *conf, lease_ttl=8.0)
    assert len(kafka_topics.consume(pipeline.out, len(produced), timeout=300)) == len(produced)
    wait_until(pipeline.quiet, 120, "the last batch committed")
    committed = pipeline.read_committed()
    assert len(committed) == len(produced) and {(k, s) for k, s, _ in committed} == set(produced)
    by_key = collections.defaultdict(list)
    for k, seq, _ in committed:  # read_to_end gives each partition in offset order; a key has one partition
        by_key[k].append(seq)
    assert by_key == {k: [s for key, s in produced if key == k] for k in KEYS}

    # what a read_uncommitted consumer sees: the same records, and those of aborted transactions again
    uncommitted = kafka_topics.read_to_end(pipeline.out, "read_uncommitted")
    assert {(k, json.loads(v)["seq"]) for k, v, _, _ in uncommitted} == set(produced)
    assert len(uncommitted) > len(produced)
    assert len({p for _, _, p in committed}) == 2  # keys spread over both partitions, as Java's producer puts them


@pytest.mark.spark
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_query_holding_at_a_bad_record_pauses_whatever_its_guarantee(
        guarantee, kafka_spark, kafka_topics, sqlite_engine, runtimes):
    """on_error='PAUSE' holds a query at a malformed record also when its output is produced
    exactly once (the guard fails inside the transactional batch writer, whose error wraps the
    guard's): PAUSED, not ERROR; SKIP BAD RECORDS moves past exactly that record."""
    from .test_kafka_lifecycle import MALFORMED, good, orders

    engine = sqlite_engine
    source, sink = kafka_topics.new("orders"), kafka_topics.new("copy")
    engine.execute(orders(source) + f"SET 'auto.offset.reset' = 'earliest'; SET 'processing.guarantee' = '{guarantee}';"
                   f"CREATE STREAM copy WITH (kafka_topic='{sink}', on_error='PAUSE') AS "
                   "SELECT * FROM orders PARTITION BY id")
    kafka_topics.produce(source, [good(1), ("2", MALFORMED), good(3)])
    runtimes.start(engine)
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=120)
    assert [r.file for r in engine.bad_records("CSAS_COPY_1", "PENDING")] == [f"kafka:{source}/0@1"]
    engine.execute("RESUME CSAS_COPY_1 SKIP BAD RECORDS")
    def rows() -> list[tuple]:  # (key, item) of each record a read_committed consumer reads
        return sorted((key, json.loads(value)["item"]) for key, value, *_ in kafka_topics.read_to_end(sink))

    wait_until(lambda: set(rows()) == {("1", "item1"), ("3", "item3")}, 120, "the good records in the output")
    if guarantee == "exactly_once_v2":  # Spark's own sink may have produced item1 before the batch failed
        assert rows() == [("1", "item1"), ("3", "item3")]
