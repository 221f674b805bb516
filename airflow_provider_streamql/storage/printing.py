"""What ``PRINT`` shows of a topic: its records as stored, each with its event time, key and
value (ksqlDB's ``rowtime: ..., key: ..., value: ...``), and where it stopped, so that a
caller following the topic reads only what was written since. A file topic's records come
oldest file first; a Kafka topic's partition by partition in offset order, each with the
record's timestamp, its key and value as produced, its partition and offset."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..catalog import SourceInfo
from ..language.limits import Limits
from . import kafka_topics, topics
from .kafka_records import KafkaRecord
from .kafka_values import KafkaValue, ValueFormat

#: the columns of a printed record of a file topic
COLUMNS = ["rowtime", "key", "value", "file"]
#: the columns of a printed record of a Kafka topic (ksqlDB's PRINT shows the partition too)
KAFKA_COLUMNS = ["rowtime", "key", "value", "partition", "offset"]


def columns(src: SourceInfo) -> list[str]:
    """The columns PRINT shows of ``src``'s records."""
    return list(KAFKA_COLUMNS if src.kafka_topic else COLUMNS)


@dataclass(frozen=True)
class Printed:
    """Where a PRINT stands: the records shown this time (:data:`COLUMNS`), every file read
    so far, how many records were read (for ``INTERVAL``) and shown in all."""

    rows: list[list[Any]] = field(default_factory=list)
    files: frozenset[str] = frozenset()
    read: int = 0
    shown: int = 0
    #: of a Kafka topic: each partition read and the offset to read next
    offsets: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Where it stands, without the rows (a JSON value: a follower hands it back)."""
        offsets = {"offsets": {str(p): o for p, o in sorted(self.offsets.items())}} if self.offsets else {}
        return {"files": sorted(self.files), "read": self.read, "shown": self.shown, **offsets}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Printed:
        offsets = {int(p): int(o) for p, o in data.get("offsets", {}).items()}
        return cls(files=frozenset(data["files"]), read=data["read"], shown=data["shown"], offsets=offsets)


def skip_all(src: SourceInfo, kafka: kafka_topics.KafkaSettings | None = None) -> Printed:
    """Where a PRINT without FROM BEGINNING starts: after every record stored now."""
    if src.kafka_topic:
        settings = (kafka or kafka_topics.KafkaSettings()).require(f"PRINT {src.name}")
        return Printed(offsets=kafka_topics.end_offsets(settings, src.kafka_topic))
    return Printed(files=frozenset(topics.data_files(src)))


def print_records(
    src: SourceInfo,
    since: Printed,
    *,
    interval: int = 1,
    limit: int | None = None,
    kafka: kafka_topics.KafkaSettings | None = None,
    limits: Limits | None = None,
) -> Printed:
    """The records of ``src`` that ``since`` has not read (a file topic: in the files it
    has not read, oldest file first; a Kafka topic: after its offsets, up to the end now):
    every ``interval``-th record read, until ``limit`` are shown in all."""
    if src.kafka_topic:
        return _print_kafka(src, since, interval, limit, kafka or kafka_topics.KafkaSettings(), limits or Limits())
    rows: list[list[Any]] = []
    files, read, shown = set(since.files), since.read, since.shown
    keys = src.key_columns
    for path in topics.data_files(src):
        if path in files:
            continue
        if limit is not None and shown >= limit:
            break
        files.add(path)  # a file is read whole or, once the limit is reached, left as read
        tombstones = re.search(topics.TOMBSTONE_NAME, path) is not None
        records = topics.read_file(path, src.format, src.columns, delimiter=topics.value_delimiter(src.properties))
        for record in records:
            read += 1
            if (read - 1) % interval or (limit is not None and shown >= limit):
                continue
            shown += 1
            rows.append(
                [
                    _text(record.get(src.timestamp_column)) if src.timestamp_column else None,
                    _key(record, keys),
                    None if tombstones else json.dumps(record, default=str, separators=(",", ":")),
                    path.rsplit("/", 1)[-1],
                ]
            )
    return Printed(rows, frozenset(files), read, shown)


def _print_kafka(
    src: SourceInfo,
    since: Printed,
    interval: int,
    limit: int | None,
    kafka: kafka_topics.KafkaSettings,
    limits: Limits,
) -> Printed:
    assert src.kafka_topic is not None
    rows: list[list[Any]] = []
    offsets, read, shown = dict(since.offsets), since.read, since.shown
    if limit is not None and shown >= limit:
        return Printed([], since.files, read, shown, offsets)
    settings = kafka.require(f"PRINT {src.name}")
    value_format = KafkaValue.of(src)
    records = kafka_topics.read(settings, src.kafka_topic, offsets, limits, f"PRINT {src.name}")
    with contextlib.closing(records):  # a LIMIT reached closes the consumer at once
        for record in records:
            offsets[record.partition] = record.offset + 1
            read += 1
            if (read - 1) % interval:
                continue
            shown += 1
            rows.append(_kafka_row(record, value_format))
            if limit is not None and shown >= limit:
                break  # a follower starts after the last record shown
    return Printed(rows, since.files, read, shown, offsets)


def _kafka_row(record: KafkaRecord, value_format: KafkaValue) -> list[Any]:
    """A record as ksqlDB's PRINT shows it: its timestamp (``2024/01/01 00:00:00.000 Z``),
    key and value as text (an AVRO or PROTOBUF value as a JSON object of its fields, a KAFKA value as its
    one value; bytes that are no such value as text), partition and offset."""
    moment = datetime.datetime.fromtimestamp(record.timestamp / 1000, datetime.UTC)
    rowtime = f"{moment:%Y/%m/%d %H:%M:%S}.{moment.microsecond // 1000:03d} Z" if record.timestamp >= 0 else None
    text = lambda data: None if data is None else data.decode("utf-8", "replace")
    value = text(record.value)
    if record.value is not None and value_format.format is not ValueFormat.JSON:
        decoded = value_format.decode(record.value)
        if decoded is not None and value_format.format is not ValueFormat.KAFKA:
            value = json.dumps(decoded, separators=(",", ":"), ensure_ascii=False)
        elif decoded is not None:
            value = _text(decoded[value_format.single.name])
    return [rowtime, text(record.key), value, record.partition, record.offset]


def _key(record: dict[str, Any], keys: list[str]) -> str | None:
    """The record's key as a Kafka record of it holds it: one key column's text, several as
    a JSON object, none: no key."""
    if not keys:
        return None
    if len(keys) == 1:
        return _text(record.get(keys[0]))
    return json.dumps({k: record.get(k) for k in keys}, default=str, separators=(",", ":"))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
