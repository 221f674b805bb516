"""What a stream or table on a Kafka topic holds now, for a pull query: the topic read from
its start to its end offsets (committed records only), decoded as a runtime decodes it.

A table is the topic compacted: the latest value per key, a tombstone (a null value)
deleting its key, a record without a key no row (as in ksqlDB). A stream is every record,
partition by partition in offset order. Either way the whole topic is read each time, so a
pull query's cost grows with the topic (ksqlDB answers pull queries from a materialized
table instead; docs/deployment.md, "Kafka"): it is bounded by ``pull_seconds`` and by
``pull_memory_bytes`` for the rows it holds. A record whose value is no JSON object is
skipped, and the answer says so.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..catalog import SourceInfo
from ..errors import ValidationError
from ..language.limits import Limits
from . import kafka_records, kafka_topics
from .kafka_values import KafkaValue, ValueFormat


def topic_rows(kafka: kafka_topics.KafkaSettings, src: SourceInfo, limits: Limits, notes: list[str]) -> list[dict]:
    """The rows ``src`` (on a Kafka topic) holds now, each column's JSON value (None when
    missing); what a user should know (records skipped) is added to ``notes``."""
    topic = src.kafka_topic
    assert topic is not None
    what = f"the pull query of {src.kind} {src.name}"
    table = src.kind == "TABLE"
    value_format = KafkaValue.of(src)
    what_value = "JSON object" if value_format.format is ValueFormat.JSON else f"{value_format.format.value} value"
    rows: dict[Any, tuple[int, dict]] = {}  # key (a stream: the position) -> (size, row)
    held, skipped, first = 0, 0, ""
    records = kafka_topics.read(kafka.require(what), topic, None, limits, what)
    with contextlib.closing(records):
        for record in records:
            identity = record.key if table else (record.partition, record.offset)
            if table and record.key is None:
                continue  # no row of a table
            if table and record.value is None:
                held -= rows.pop(identity, (0, {}))[0]
                continue
            row = kafka_records.decode(record, src.columns, value_format)
            if row is None:
                skipped, first = skipped + 1, first or f"kafka:{topic}/{record.position}"
                continue
            size = len(record.value or b"") + len(record.key or b"")
            held += size - rows.get(identity, (0, {}))[0]
            if held > limits.pull_memory_bytes:
                raise ValidationError(
                    limits.exceeded(
                        "pull_memory_bytes",
                        f"{what} holds more than {limits.pull_memory_bytes:,} bytes of Kafka topic {topic!r}",
                    )
                )
            rows[identity] = (size, row)
    if skipped:
        notes.append(
            f"Skipped {skipped} record{'s' if skipped != 1 else ''} of {src.kind} {src.name} that cannot be "
            f"read (no {what_value}), the first: {first}"
        )
    return [row for _size, row in rows.values()]
