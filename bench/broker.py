"""The Kafka broker and Spark session the Kafka benchmarks share (``bench/kafka_throughput.py``,
``bench/kafka_latency.py``, ``bench/pause_resume.py --kafka``): the tests' own broker,
``tests/kafka_broker.py`` (one KRaft node of Apache Kafka 4.4.0 on loopback, from the jars
``scripts/setup`` put in ``.kafka/broker``), imported rather than copied, and Spark's Kafka
connector from ``.kafka/connector``, as the tests load it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # `python bench/x.py` puts bench/ first on the path, not the checkout
    sys.path.insert(0, REPO)

from airflow_provider_streamql.runtime import kafka_connector  # noqa: E402
from airflow_provider_streamql.runtime.kafka import CONF_PREFIX  # noqa: E402
from tests.kafka_broker import KafkaBroker  # noqa: E402

__all__ = ["KafkaBroker", "end_offsets", "kafka_broker", "on_broker"]


@contextmanager
def kafka_broker() -> Iterator[KafkaBroker]:
    """A started broker, stopped (its folder removed) at the end."""
    broker = KafkaBroker().start()
    try:
        yield broker
    finally:
        broker.stop()


def on_broker(spark: SparkSession, broker: KafkaBroker) -> None:
    """``spark`` as a runtime on ``broker`` sees it: the broker as its bootstrap servers and
    the connector on its classpath (``$STREAMQL_KAFKA_CONNECTOR``, as the tests set it)."""
    os.environ.setdefault(kafka_connector.JARS_ENV, os.path.join(REPO, ".kafka", "connector"))
    kafka_connector.ensure(spark)
    spark.conf.set(f"{CONF_PREFIX}bootstrap.servers", broker.bootstrap)


def end_offsets(broker: KafkaBroker, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` -> its end offset now."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-offsets"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    finally:
        consumer.close()
