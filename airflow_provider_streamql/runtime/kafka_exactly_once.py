"""Exactly once into Kafka (``SET 'processing.guarantee' = 'exactly_once_v2'``): each
micro-batch of a query's Kafka output is produced in one Kafka transaction, with a marker
saying which batch it was, so a ``read_committed`` consumer sees every batch once.

Spark's Kafka sink is at least once: a batch re-run after a crash (its records produced, the
checkpoint's commit not yet written) is produced again. Here the driver writes the batch:

- a transactional producer whose ``transactional.id`` is the query's
  (:func:`transactional_id`: the pipeline and the query id, the same across restarts and
  upgrades of that query), so the producer of a restarted runtime fences the one a killed
  runtime left behind, and its ``init_transactions`` aborts that producer's open transaction;
- inside the batch's transaction, a marker on the compacted topic :data:`CONTROL_TOPIC`,
  keyed by the transactional id: the batch id and a digest of where the batch reads up to in
  its sources (the checkpoint's offset log). A batch re-run with the same id and the same
  input positions as the marker was committed before the crash and is skipped; any other
  (a rewound checkpoint re-plans a batch id over other input) is written.

The batch's rows reach the driver with ``toLocalIterator`` (one partition at a time, in
order, so a key's records keep their order): throughput is one Python producer's, not the
executors' (docs/deployment.md, "Kafka"). Records go to partitions as Java's producer puts
them (murmur2 of the key), like Spark's own Kafka sink.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ..catalog import ProcessingGuarantee, QueryInfo, SourceInfo
from ..errors import StateError, ValidationError
from ..language.limits import Limits
from ..storage import kafka_client, kafka_topics
from ..storage.checkpoints import source_positions
from . import kafka

log = logging.getLogger(__name__)

#: the compacted topic of batch markers, one key per query (its transactional id)
CONTROL_TOPIC = "__streamql_commits"
#: every transactional id starts so (a secured cluster grants WRITE on this prefix)
TRANSACTIONAL_ID_PREFIX = "streamql-"
#: how long a call to the broker may take before the batch fails (and is retried)
TIMEOUT_S = 60.0
#: librdkafka settings of the producer over the runtime's Kafka settings
PRODUCER = {"partitioner": "murmur2_random"}  # the Java producer's: a key's partition as Spark's sink picks it
#: ... and under them (the runtime's ``spark.streamql.kafka.<setting>`` wins)
PRODUCER_DEFAULTS = {
    "linger.ms": "20",
    # a batch must be written within it, a whole first batch from earliest included; a
    # killed runtime's open transaction holds read_committed consumers back until a new
    # runtime aborts it, or this long
    "transaction.timeout.ms": "300000",
}


def transactional_id(query: QueryInfo) -> str:
    """The query's transactional id: the same for every run and version of the query."""
    return f"{TRANSACTIONAL_ID_PREFIX}{query.pipeline}-{query.id}"


def client_settings(spark: SparkSession) -> dict[str, str]:
    """The runtime's Kafka settings as Kafka's Java client names them (never from argv)."""
    return {k.removeprefix("kafka."): v for k, v in kafka.settings(spark).items()}


def for_query(query: QueryInfo, sink: SourceInfo) -> TransactionalSink | None:
    """The transactional writer of ``query``'s output, if it is a Kafka topic and the query
    asks for exactly once; None: Spark's Kafka sink (at least once) or a file output."""
    if not sink.kafka_topic or ProcessingGuarantee.of(query.settings) != ProcessingGuarantee.EXACTLY_ONCE_V2:
        return None
    kafka_client.require()  # a runtime without the Python client: the query's ERROR says what to install
    return TransactionalSink(sink.kafka_topic, transactional_id(query), query.checkpoint)


@dataclass(frozen=True)
class Marker:
    """What the control topic records of a query's last committed batch."""

    batch: int
    inputs: str  # digest of the batch's source positions

    def encode(self) -> bytes:
        return json.dumps({"batch": self.batch, "inputs": self.inputs}).encode()

    @classmethod
    def decode(cls, value: bytes | None) -> Marker | None:
        if value is None:
            return None
        try:
            fields = json.loads(value)
            return cls(int(fields["batch"]), str(fields["inputs"]))
        except (ValueError, TypeError, KeyError):
            raise StateError(f"{CONTROL_TOPIC!r} holds a record streamql did not write: {value[:80]!r}") from None


class TransactionalSink:
    """Writes each batch of (key, value) records to ``topic`` in one transaction, once.

    One producer per run of the query, made at its first batch; a failed batch aborts its
    transaction (a fatal error, such as being fenced, drops the producer) and raises, so
    Spark fails the query and the runtime retries it."""

    #: transactional id -> the sink whose producer holds it in this process: a new run of the
    #: query drops the producer of the one before (which Spark may keep referenced), so a
    #: runtime PAUSEd and RESUMEd many times holds one producer per query, not one per run
    _holders: dict[str, TransactionalSink] = {}

    def __init__(self, topic: str, transactional_id: str, checkpoint: str):
        self.topic, self.transactional_id, self.checkpoint = topic, transactional_id, checkpoint
        self._producer: Any = None
        self._last: Marker | None = None

    def write(self, records: DataFrame, batch_id: int, before_commit: Callable[[], None]) -> None:
        """Produce ``records`` (string columns ``key`` and ``value``, a null value a
        tombstone) as batch ``batch_id``, unless it is the batch committed last;
        ``before_commit`` raises if the runtime lost the query's lease."""
        rows = ((row["key"], row["value"]) for row in records.toLocalIterator(prefetchPartitions=True))
        self.produce_once(records.sparkSession, rows, self.marker(batch_id), before_commit)

    def marker(self, batch_id: int, inputs: str | None = None) -> Marker:
        """The marker of batch ``batch_id``: over ``inputs`` (a digest of what it holds), else
        over where it reads up to in its sources (the checkpoint's offset log)."""
        return Marker(batch_id, inputs if inputs is not None else self._inputs(batch_id))

    def produce_once(
        self, spark: SparkSession, rows: Iterable[tuple[Any, Any]], marker: Marker, before_commit: Callable[[], None]
    ) -> bool:
        """Produce ``rows`` (key, value) in one transaction with ``marker``, unless ``marker``
        is the one committed last (returns False: they are in Kafka already)."""
        producer = self._ready(spark)
        if marker == self._last:
            log.info("%s: batch %d is in Kafka already (committed before a restart); skipped", self.topic, marker.batch)
            return False
        try:
            producer.begin_transaction()
            for key, value in rows:
                self._produce(producer, self.topic, key, value)
            self._produce(producer, CONTROL_TOPIC, self.transactional_id, marker.encode())
            before_commit()
            producer.commit_transaction(int(PRODUCER_DEFAULTS["transaction.timeout.ms"]) / 1000)  # flushes the batch
        except BaseException as e:
            self._abort(e)
            raise _failure(e) from None
        self._last = marker
        return True

    def _ready(self, spark: SparkSession):
        """The producer, made and its transactions initialized at the first batch, which also
        reads the query's last marker."""
        if self._producer is None:
            settings = client_settings(spark)
            defaults = {k: v for k, v in PRODUCER_DEFAULTS.items() if k not in settings}
            overrides = {**defaults, "transactional.id": self.transactional_id, **PRODUCER}
            producer = kafka_client.producer(settings, **overrides)
            ensure_topic(settings, CONTROL_TOPIC, {"cleanup.policy": "compact"}, partitions=1)
            try:
                producer.init_transactions(TIMEOUT_S)  # fences an older producer, aborts its open transaction
            except Exception as e:
                raise _failure(e) from None
            self._last = _last_marker(settings, self.transactional_id)
            before = self._holders.get(self.transactional_id)
            if before is not None and before is not self:
                before._producer = None  # fenced by ours already: nothing it could still commit
            self._holders[self.transactional_id] = self
            self._producer = producer
        return self._producer

    def _inputs(self, batch_id: int) -> str:
        positions = source_positions(self.checkpoint, batch_id)
        return hashlib.sha256(json.dumps(positions, sort_keys=True).encode()).hexdigest()[:32]

    @staticmethod
    def _produce(producer, topic: str, key: str | bytes | None, value: str | bytes | None) -> None:
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                return
            except BufferError:  # the local queue is full: let it drain to the broker
                producer.poll(0.1)

    def _abort(self, error: BaseException) -> None:
        """Abort the batch's transaction; a producer that cannot go on is dropped (the next
        run makes a new one, whose init_transactions aborts what is left open)."""
        kafka_error = _kafka_error(error)
        if kafka_error is None or not kafka_error.fatal():
            try:
                self._producer.abort_transaction(TIMEOUT_S)
                return
            except Exception as e:
                log.warning("%s: aborting the batch's transaction: %s", self.topic, kafka.error_report(e))
        self._producer = None


def _kafka_error(error: object):
    """The KafkaError ``error`` is or carries (a KafkaException's first argument), or None."""
    if hasattr(error, "fatal"):
        return error
    args = getattr(error, "args", ())
    return args[0] if args and hasattr(args[0], "fatal") else None


def _failure(error: object) -> BaseException:
    """A Kafka client's error as a StateError saying what failed; others as they are."""
    kafka_error = _kafka_error(error)
    if kafka_error is None:
        return error if isinstance(error, BaseException) else StateError(str(error))
    return StateError(f"the exactly-once Kafka sink's transaction failed: {kafka.redact(kafka_error.str())}")


def ensure_topic(
    settings: Mapping[str, str], name: str, config: Mapping[str, str] | None = None, *, partitions: int = -1
) -> None:
    """Make topic ``name`` (``partitions``, -1: the broker's default) unless it exists."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    admin = kafka_client.admin(settings)
    if name in admin.list_topics(timeout=TIMEOUT_S).topics:
        return
    topic = NewTopic(name, partitions, -1, config=dict(config or {}))
    try:
        admin.create_topics([topic])[name].result(TIMEOUT_S)
    except Exception as e:
        if _kafka_error(e) is None or _kafka_error(e).code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise _failure(e) from None


def _last_marker(settings: Mapping[str, str], key: str) -> Marker | None:
    """The last committed marker under ``key``: the control topic read to its end
    (read_committed, so after init_transactions aborted what a dead producer left open)."""
    records = kafka_topics.read(
        kafka_topics.KafkaSettings(settings), CONTROL_TOPIC, None, Limits(pull_seconds=TIMEOUT_S), "a commit marker"
    )
    wanted, last = key.encode(), None
    try:
        with contextlib.closing(records):
            for record in records:
                if record.key == wanted:
                    last = Marker.decode(record.value)
    except ValidationError:  # its time ran out
        raise StateError(f"reading {CONTROL_TOPIC!r}: not read to its end in {TIMEOUT_S:.0f} s") from None
    return last
