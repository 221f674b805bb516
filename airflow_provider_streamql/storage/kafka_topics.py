"""The engine's own Kafka client, without Spark: ``INSERT INTO ... VALUES`` produces to a
topic, ``PRINT`` and pull queries read one from given offsets to its end now.

Its settings (:class:`KafkaSettings`) are Kafka's Java client settings, as a runtime's: the
Kafka client properties of ``$STREAMQL_KAFKA_PROPERTIES`` or the file
``$STREAMQL_KAFKA_PROPERTIES_FILE`` names, and what the caller hands the engine (the Airflow
connection's ``kafka_bootstrap_servers`` and ``kafka_properties``); never argv. They reach
librdkafka through :mod:`.kafka_client`. Errors mask every secret value.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import StateError, ValidationError
from ..language.limits import Limits
from . import kafka_client, kafka_properties
from .kafka_records import KafkaRecord

#: how long a produce may wait for the broker's acknowledgements, in seconds
PRODUCE_SECONDS = 30.0
#: how long a metadata or offsets request may take, in seconds
REQUEST_SECONDS = 10.0
#: the consumer group named in the engine's reads (it never commits offsets: nothing joins it)
GROUP = "streamql-engine"


@dataclass(frozen=True)
class KafkaSettings:
    """The Kafka client settings of the engine (Java client names), or none."""

    settings: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        environ: Mapping[str, str],
        *,
        bootstrap_servers: str | None = None,
        properties: Mapping[str, str] | str | None = None,
    ) -> KafkaSettings:
        """The settings of ``environ``'s Kafka properties, then ``properties`` (settings, or
        properties text), then ``bootstrap_servers``: each wins over the one before."""
        settings = kafka_properties.load(environ)
        if isinstance(properties, str):
            settings.update(kafka_properties.parse(properties, "given to the engine"))
        elif properties:
            settings.update({str(k): str(v) for k, v in properties.items()})
        if bootstrap_servers:
            settings["bootstrap.servers"] = bootstrap_servers
        return cls(settings)

    @property
    def given(self) -> bool:
        """Whether any bootstrap servers were given."""
        return bool(self.settings.get("bootstrap.servers", "").strip())

    @property
    def bootstrap_servers(self) -> str | None:
        return self.settings.get("bootstrap.servers") if self.given else None

    def mask(self, text: str) -> str:
        return kafka_properties.mask(text, kafka_properties.secret_values(self.settings))

    def __repr__(self) -> str:  # never the values: they may hold secrets
        return f"KafkaSettings({', '.join(sorted(self.settings))})"

    def require(self, what: str) -> KafkaSettings:
        """These settings, or StateError saying ``what`` needs them and how to give them."""
        if not self.given:
            raise StateError(
                f"{what} talks to Kafka, and this engine has no Kafka bootstrap servers: give them as "
                f"Kafka client properties (bootstrap.servers=HOST:9092 and any security settings) in "
                f"${kafka_properties.PROPERTIES_ENV} or the file ${kafka_properties.PROPERTIES_FILE_ENV} "
                f"names, Engine(kafka_properties=...), or the streamql Airflow connection's "
                f"kafka_bootstrap_servers and kafka_properties"
            )
        return self


def produce(settings: KafkaSettings, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> int:
    """Produce ``records`` (key, value) to ``topic`` in order with an idempotent producer, and
    wait until the broker acknowledged each; the number produced. A record the broker did not
    take is a StateError naming the topic and why (records before it may have been taken)."""
    client = kafka_client.producer(
        settings.settings,
        **{"enable.idempotence": True, "acks": "all", "message.timeout.ms": int(PRODUCE_SECONDS * 1000)},
    )
    failures: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(str(error.str()))

    try:
        for key, value in records:
            client.produce(topic, key=key, value=value, on_delivery=delivered)
            client.poll(0)
        left = client.flush(PRODUCE_SECONDS + 5)
    except (BufferError, _kafka_exception()) as e:
        raise StateError(f"cannot produce to Kafka topic {topic!r}: {settings.mask(str(e))}") from None
    if failures or left:
        why = failures[0] if failures else f"{left} record(s) not acknowledged in {PRODUCE_SECONDS:g} s"
        raise StateError(
            f"Kafka topic {topic!r} did not take {len(failures) or left} of {len(records)} record(s): "
            f"{settings.mask(why)}"
        )
    return len(records)


def end_offsets(settings: KafkaSettings, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` and the offset its next record will have (for
    ``read_committed``: its last stable offset); empty for a topic that does not exist."""
    consumer = _consumer(settings)
    try:
        return {p: high for p, (_low, high) in _watermarks(consumer, settings, topic).items()}
    finally:
        consumer.close()


def offset_ranges(settings: KafkaSettings, topic: str) -> dict[int, tuple[int, int]]:
    """Each partition of ``topic`` and its first and next offsets (``read_committed``: its
    last stable offset); empty for a topic that does not exist."""
    consumer = _consumer(settings)
    try:
        return _watermarks(consumer, settings, topic)
    finally:
        consumer.close()


def offsets_for_time(settings: KafkaSettings, topic: str, timestamp_ms: int) -> dict[int, int]:
    """Each partition of ``topic`` and the offset of its first record whose time is at or
    after ``timestamp_ms`` (Kafka's offsets for a time; a partition with none: its end)."""
    from confluent_kafka import KafkaException, TopicPartition

    consumer = _consumer(settings)
    try:
        ranges = _watermarks(consumer, settings, topic)
        asked = [TopicPartition(topic, p, timestamp_ms) for p in ranges]
        try:
            found = consumer.offsets_for_times(asked, timeout=REQUEST_SECONDS) if asked else []
        except KafkaException as e:
            raise _unreachable(settings, topic, e) from None
        return {tp.partition: tp.offset if tp.offset >= 0 else ranges[tp.partition][1] for tp in found}
    finally:
        consumer.close()


def read(
    settings: KafkaSettings, topic: str, since: Mapping[int, int] | None, limits: Limits, what: str
) -> Generator[KafkaRecord, None, None]:
    """The committed records of ``topic`` from ``since`` (partition -> next offset; a
    partition not in it, or no ``since``: from its start) to its end now, partition by
    partition in offset order. Bounded by ``limits.pull_seconds`` (an error naming ``what``)."""
    from confluent_kafka import TopicPartition

    deadline = time.monotonic() + limits.pull_seconds
    consumer = _consumer(settings)
    try:
        ends = _watermarks(consumer, settings, topic)
        starts = {p: max(low, (since or {}).get(p, low)) for p, (low, _high) in ends.items()}
        todo = {p for p, (_low, high) in ends.items() if starts[p] < high}
        if not todo:
            return
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
        while todo:
            if time.monotonic() > deadline:
                raise ValidationError(
                    limits.exceeded("pull_seconds", f"{what} did not read Kafka topic {topic!r} to its end in time")
                )
            message = consumer.poll(0.5)
            if message is None:
                continue
            partition = message.partition()
            error = message.error()
            if error is not None:
                if error.code() == _partition_eof():
                    todo.discard(partition)
                    continue
                if not error.retriable():
                    raise StateError(f"cannot read Kafka topic {topic!r}: {settings.mask(str(error.str()))}")
                continue
            if partition not in todo:
                continue
            offset = message.offset()
            if offset >= ends[partition][1] - 1:
                todo.discard(partition)
            if offset >= ends[partition][1]:
                continue
            _kind, stamp = message.timestamp()
            yield KafkaRecord(partition, offset, stamp, message.key(), message.value())
    finally:
        consumer.close()


def _consumer(settings: KafkaSettings) -> Any:
    return kafka_client.consumer(
        settings.require("reading a Kafka topic").settings,
        **{
            "group.id": GROUP,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
        },
    )


def _watermarks(consumer: Any, settings: KafkaSettings, topic: str) -> dict[int, tuple[int, int]]:
    from confluent_kafka import KafkaException, TopicPartition

    try:
        metadata = consumer.list_topics(topic, timeout=REQUEST_SECONDS)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return {}  # a topic not made yet holds nothing
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=REQUEST_SECONDS, cached=False)
            for p in sorted(found.partitions)
        }
    except KafkaException as e:
        raise _unreachable(settings, topic, e) from None


def _unreachable(settings: KafkaSettings, topic: str, error: Exception) -> StateError:
    """The error of a broker that did not answer: where it was looked for and what for."""
    why = settings.mask(str(error.args[0].str() if error.args else error))
    return StateError(f"cannot reach Kafka at {settings.bootstrap_servers} (asked for topic {topic!r}): {why}")


def _kafka_exception() -> type[Exception]:
    from confluent_kafka import KafkaException

    return KafkaException


def _partition_eof() -> int:
    from confluent_kafka import KafkaError

    return KafkaError._PARTITION_EOF
