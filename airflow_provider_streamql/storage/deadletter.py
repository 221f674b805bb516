"""The dead-letter stream of a query, ``<QUERY_ID>_DLQ``: the bad records it skipped or
logged, one row each, readable with a pull query (``SELECT * FROM CSAS_X_1_DLQ``).

A query whose every source is a Kafka topic has its dead letters on a Kafka topic, as ksqlDB
users expect of a processing log: the stream ``<QUERY_ID>_DLQ`` over the topic its
``WITH (dead_letter_topic=...)`` names, by default one named as the stream. Each dead letter
is a JSON value with the same fields as a file dead-letter stream's rows, keyed by its
position (``kafka:<topic>/<partition>@<offset>``), so the records about one source record
share a key (a compacted topic, or a reader keeping the latest per key, holds one). Any other
query's dead letters are files in its home.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping

from ..catalog import BadRecord, QueryInfo, SourceInfo
from ..language.statements import Column
from . import kafka_records, topics
from .layout import Layout, home_of_checkpoint

COLUMNS = [
    Column.of("query_id", "STRING"),
    Column.of("source", "STRING"),
    Column.of("file", "STRING"),
    Column.of("line", "INT"),
    Column.of("raw", "STRING"),
    Column.of("error", "STRING"),
    Column.of("batch_id", "BIGINT"),
    Column.of("status", "STRING"),
    Column.of("recorded_at", "STRING"),
    Column.of("handled_by", "STRING"),
]


#: the query's WITH property naming its dead-letter topic
TOPIC_PROPERTY = "dead_letter_topic"
#: what Kafka takes as a topic name (its Topic.validate): legal characters, at most 249 of them
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def dead_letter_name(query_id: str) -> str:
    return f"{query_id}_DLQ"


def topic_name_problem(value: object) -> str | None:
    """What keeps ``value`` from being a Kafka topic's name (None: nothing)."""
    if not isinstance(value, str) or not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
        return "must be a Kafka topic name: 1 to 249 of the characters a-z A-Z 0-9 . _ - (not '.' or '..')"
    return None


def dead_letter_topic(query: QueryInfo, sources: Mapping[str, SourceInfo]) -> str | None:
    """The Kafka topic ``query``'s dead letters go to: its ``dead_letter_topic``, else one named
    as its dead-letter stream; None when a source it reads is not a Kafka topic (files: its
    dead letters are files in its home)."""
    read = [sources.get(name) for name in query.sources]
    if not read or not all(src is not None and src.kafka_topic for src in read):
        return None
    return query.settings.get(TOPIC_PROPERTY) or dead_letter_name(query.id)


def dead_letter_source(query: QueryInfo, home: str | None = None, topic: str | None = None) -> SourceInfo:
    """The dead-letter stream of ``query``: a declared JSON stream over Kafka ``topic``
    (:func:`dead_letter_topic`), or with none, in its home."""
    name = dead_letter_name(query.id)
    if topic is not None:
        return SourceInfo(
            name, "STREAM", list(COLUMNS), {"dead_letter_of": query.id, "kafka_topic": topic}, "JSON", f"kafka:{topic}"
        )
    return SourceInfo(
        name,
        "STREAM",
        list(COLUMNS),
        {"dead_letter_of": query.id},
        "JSON",
        Layout(home or home_of_checkpoint(query.checkpoint)).topic(name),
    )


def _row(r: BadRecord) -> dict:
    return {
        "query_id": r.query_id,
        "source": r.source,
        "file": r.file,
        "line": r.line,
        "raw": r.raw,
        "error": r.error,
        "batch_id": r.batch_id,
        "status": r.status,
        "recorded_at": _iso(r.recorded_at),
        "handled_by": r.handled_by,
    }


def append_dead_letters(src: SourceInfo, records: Iterable[BadRecord], name: str | None = None) -> str | None:
    """Append ``records`` to a dead-letter stream in files as one file (``name``: write it
    once); returns the file's path (None when there was nothing to write)."""
    rows = [_row(r) for r in records]
    return topics.append(src.path, src.format, src.columns, rows, name=name) if rows else None


def kafka_dead_letters(records: Iterable[BadRecord]) -> list[tuple[bytes, bytes]]:
    """``records`` as the Kafka records of a dead-letter topic: (key, value), the key the
    record's position, the value a JSON object of the stream's columns."""
    return [(r.file.encode("utf-8"), kafka_records.json_value(_row(r), COLUMNS)) for r in records]


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t or time.time()))
