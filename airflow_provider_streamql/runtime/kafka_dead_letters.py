"""Dead letters on a Kafka topic (:mod:`..storage.deadletter`), written once per batch.

The companion query of LOG_AND_CONTINUE writes through foreachBatch, which is at least once:
a batch whose dead letters were produced is run again when the runtime stops before Spark
records its commit. So a batch's dead letters are produced the way the exactly-once sink
produces a query's output (:mod:`.kafka_exactly_once`): in one Kafka transaction with a
marker on the control topic (the batch id and where the batch reads up to), under a
transactional id of their own (the query's plus ``-dead-letters``); a batch run again with
the marker committed last is not produced again, so a ``read_committed`` reader sees each
dead letter once, after any restart. Each is also keyed by its position (the topic,
partition and offset of the source record), so a reader keeping the latest record per key
(a compacted topic) holds one per source record even of what a ``read_uncommitted`` reader
may see of an aborted transaction.

The records ``RESUME ... SKIP BAD RECORDS`` skips go the same way when the runtime next
starts the query (the statement's engine may have no Kafka settings; the runtime has), under
the query's transactional id plus ``-skipped``, with a marker over the skipped records, so a
second start before the batch commits does not send them again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pyspark.sql import SparkSession

from ..catalog import BadRecord, QueryInfo
from ..storage.deadletter import kafka_dead_letters
from ..storage.layout import dead_letter_checkpoint
from . import kafka_exactly_once
from .kafka_exactly_once import TransactionalSink

#: what each writer of a query's dead letters adds to the query's transactional id
LOGGED, SKIPPED = "dead-letters", "skipped"


class KafkaDeadLetters:
    """Writes a query's dead letters to Kafka ``topic`` (made with the broker's defaults if
    it does not exist), once per batch; ``purpose``: :data:`LOGGED` or :data:`SKIPPED`."""

    def __init__(self, query: QueryInfo, topic: str, purpose: str):
        self.topic = topic
        self.sink = TransactionalSink(
            topic, f"{kafka_exactly_once.transactional_id(query)}-{purpose}", dead_letter_checkpoint(query.checkpoint)
        )
        self._made = False

    def send(self, spark: SparkSession, records: Sequence[BadRecord], batch_id: int, inputs: str | None = None) -> bool:
        """Produce ``records`` as batch ``batch_id`` (its marker over ``inputs``, else over the
        companion query's source positions); False when that batch is in Kafka already."""
        if not self._made:
            kafka_exactly_once.ensure_topic(kafka_exactly_once.client_settings(spark), self.topic)
            self._made = True
        marker = self.sink.marker(batch_id, inputs)
        return self.sink.produce_once(spark, kafka_dead_letters(records), marker, lambda: None)


def send_skipped(spark: SparkSession, query: QueryInfo, topic: str, records: Sequence[BadRecord]) -> bool:
    """Produce the records a RESUME skipped (``records``, of batches not committed yet) to
    ``topic``, unless the same ones were sent last (False)."""
    ids = "\n".join(sorted(r.record_id for r in records))
    inputs = hashlib.sha256(ids.encode()).hexdigest()[:32]
    return KafkaDeadLetters(query, topic, SKIPPED).send(spark, records, max(r.batch_id for r in records), inputs)
