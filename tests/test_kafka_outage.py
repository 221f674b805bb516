"""A Kafka broker restarted under running queries (issue 34's broker fault, as a test): the
broker killed (SIGKILL) and started again on its data while two queries read a topic, one into
a file stream, one into a topic produced exactly once. Records produced before, during (held
by the idempotent producer) and after the outage; the queries come back by themselves and
each record is in both outputs once."""
from __future__ import annotations

import json
import signal

import pytest

from airflow_provider_streamql.conditions import CaughtUp
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime import kafka_connector
from airflow_provider_streamql.runtime.kafka import CONF_PREFIX
from bench.chaos import KAFKA

from .kafka_broker import KafkaBroker
from .support import wait_until


@pytest.fixture
def own_broker():
    """A broker of the test's own: restarting the session's would hold up other tests' topics
    (and a restart that failed would fail every Kafka test after it)."""
    broker = KafkaBroker().start()
    yield broker
    broker.stop()


@pytest.fixture
def engine(spark, own_broker, sqlite_url, home):
    """An engine and the shared session's runtimes on the test's broker."""
    kafka_connector.ensure(spark)
    spark.conf.set(f"{CONF_PREFIX}bootstrap.servers", own_broker.bootstrap)
    e = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=own_broker.bootstrap)
    yield e
    e.close()
    spark.conf.unset(f"{CONF_PREFIX}bootstrap.servers")


def test_queries_over_a_topic_ride_out_a_broker_restart_and_write_each_record_once(engine, own_broker, runtimes):
    from confluent_kafka import Producer

    events, once = own_broker.create_topic("events", 2), own_broker.create_topic("once", 2)
    queries = [r.query_id for r in engine.execute(KAFKA.format(events=events, once=once)) if r.query_id]
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "enable.idempotence": True, "log_level": 2})

    def produce(ids: range) -> None:
        for i in ids:
            producer.produce(events, key=str(i), value=json.dumps({"n": 1}))
        producer.poll(0)

    def recovered():
        caught_up = [CaughtUp(q) for q in queries]  # the topic's end offsets at the first look
        return lambda: all(engine.state(q) == "RUNNING" for q in queries) and all(
            c.check(engine).done for c in caught_up)

    produce(range(1, 21))
    assert producer.flush(30) == 0
    runtimes.start(engine)
    wait_until(recovered(), 180, "the queries to read the records before the outage")

    own_broker.halt(signal.SIGKILL)
    produce(range(21, 41))  # kept by the producer until the broker is back
    own_broker.start_again()
    produce(range(41, 61))
    assert producer.flush(60) == 0
    wait_until(recovered(), 180, "the queries to recover and catch up by themselves")

    assert sorted(r[0] for r in engine.execute("SELECT id FROM events_copy")[0].rows) == list(range(1, 61))
    # the last batch's commit marker is written a moment after its commit returns
    wait_until(lambda: not own_broker.transaction_open(once), 60,
               "no transaction open on the exactly-once topic")
    assert sorted(int(k) for k, *_ in own_broker.read_to_end(once)) == list(range(1, 61))
