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
from .kafka_records import KafkaRecord
from .kafka_values import KafkaValue, ValueFormat


class Decoded:
    """Records of ``src``'s Kafka topic decoded as a runtime decodes them, in the order given:
    :meth:`row` decodes one (a record its value format cannot read is skipped and counted),
    :meth:`add` keeps each change as a row, as a push query shows it (a table's tombstones
    and records without a key show none)."""

    def __init__(self, src: SourceInfo):
        self.src = src
        self.value_format = KafkaValue.of(src)
        self.rows: list[dict] = []
        self.skipped = 0
        self.first = ""  # the position of the first record skipped

    def row(self, record: KafkaRecord) -> dict | None:
        """``record``'s row (each column's JSON value, None when missing), or None when it
        cannot be read."""
        row = kafka_records.decode(record, self.src.columns, self.value_format)
        if row is None:
            self.skipped += 1
            self.first = self.first or f"kafka:{self.src.kafka_topic}/{record.position}"
        return row

    def add(self, record: KafkaRecord) -> None:
        if self.src.kind == "TABLE" and (record.key is None or record.value is None):
            return
        row = self.row(record)
        if row is not None:
            self.rows.append(row)

    def notes(self) -> list[str]:
        """What a reader should know: the records skipped, and the first one's position."""
        if not self.skipped:
            return []
        s = "s" if self.skipped != 1 else ""
        value = self.value_format.format
        what = "JSON object" if value is ValueFormat.JSON else f"{value.value} value"
        return [
            f"Skipped {self.skipped} record{s} of {self.src.kind} {self.src.name} that cannot be read "
            f"(no {what}), the first: {self.first}"
        ]


def topic_rows(kafka: kafka_topics.KafkaSettings, src: SourceInfo, limits: Limits, notes: list[str]) -> list[dict]:
    """The rows ``src`` (on a Kafka topic) holds now, each column's JSON value (None when
    missing); what a user should know (records skipped) is added to ``notes``."""
    topic = src.kafka_topic
    assert topic is not None
    what = f"the pull query of {src.kind} {src.name}"
    table = src.kind == "TABLE"
    rows: dict[Any, tuple[int, dict]] = {}  # key (a stream: the position) -> (size, row)
    held = 0
    decoded = Decoded(src)
    records = kafka_topics.read(kafka.require(what), topic, None, limits, what)
    with contextlib.closing(records):
        for record in records:
            identity = record.key if table else (record.partition, record.offset)
            if table and record.key is None:
                continue  # no row of a table
            if table and record.value is None:
                held -= rows.pop(identity, (0, {}))[0]
                continue
            row = decoded.row(record)
            if row is None:
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
    notes.extend(decoded.notes())
    return [row for _size, row in rows.values()]
