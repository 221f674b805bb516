"""How far a query is behind its input: the input files of its file topics it has not
processed (the UI's and the metrics' lag, a caught-up wait, the caught-up event) and the
records in them, and on a Kafka topic the records between its checkpoint's position and the
topic's end offsets (``DESCRIBE ... EXTENDED``'s consumer offsets)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..catalog import Catalog, DesiredState, QueryInfo
from ..errors import StreamQLError
from ..storage import kafka_topics, topics
from ..storage.checkpoints import (
    kafka_positions,
    last_committed_batch,
    processed_by,
    processed_files,
    source_positions,
)
from ..storage.kafka_topics import KafkaSettings


@dataclass(frozen=True)
class Lag:
    """How far a query is behind its input, where its sources can tell.

    ``files``: input files of its file topics not processed yet (None: it reads none);
    ``records``: records not processed yet, in those files and after its position on its Kafka
    topics (None: not known, ``note`` says why)."""

    files: int | None
    records: int | None
    note: str | None = None
    #: when the oldest input file it has not processed was committed (epoch seconds; None:
    #: none waits, or its sources cannot tell: Kafka)
    waiting_since: float | None = None

    @property
    def behind(self) -> bool:
        """Input waits for it."""
        return bool(self.files or self.records)

    def text(self) -> str | None:
        """As the CLI and the page show it: ``3 files, 120 records``."""
        parts = [f"{self.files} file(s)"] if self.files is not None else []
        parts += [f"{self.records} record(s)"] if self.records is not None else []
        return ", ".join(parts) or None


def kafka_sources(catalog: Catalog, query: QueryInfo) -> list[str]:
    """The sources of ``query`` that are Kafka topics (catching up is measured on files)."""
    return [n for n in query.sources if getattr(catalog.source(n), "kafka_topic", None)]


def input_files(catalog: Catalog, query: QueryInfo, as_of: float) -> set[str]:
    """The committed input files of the query's file topics written by ``as_of`` (epoch
    seconds)."""
    return set(_input_formats(catalog, query, as_of))


def _input_formats(catalog: Catalog, query: QueryInfo, as_of: float) -> dict[str, str]:
    """:func:`input_files`, each with its source's value format."""
    wanted: dict[str, str] = {}
    # tables joined as of each batch are read whole each time, never consumed
    static = set(query.plan.static_tables)
    for name in (n for n in query.sources if n not in static):
        src = catalog.source(name)
        if src is not None:
            # a query over tables reads their changelogs' files (runtime/tables.py)
            files = (
                [os.path.realpath(f) for f in topics.changelog_files(src.path)]
                if src.kind == "TABLE"
                else topics.committed_files(src.path)
            )
            if not src.kafka_topic:
                wanted.update((f, src.format) for f in files if _mtime(f) <= as_of)
    return wanted


def unprocessed_files(catalog: Catalog, query: QueryInfo) -> int:
    """How many committed input files the query has not processed yet (its lag, in files)."""
    return len(input_files(catalog, query, float("inf")) - processed_files(query.checkpoint))


def lag_files(catalog: Catalog, query: QueryInfo) -> int | None:
    """:func:`unprocessed_files`, for a query that may still read (None once terminated)."""
    return None if query.desired_state == DesiredState.TERMINATED else unprocessed_files(catalog, query)


class TopicRanges:
    """The offset ranges of Kafka topics, as asked of the broker during one look at many
    queries (a listing, a scrape): each topic asked once, and once the broker could not be
    reached, not asked again, since each ask waits out its timeout (``streamql queries``
    during an outage takes one timeout, not one per query)."""

    def __init__(self, kafka: KafkaSettings):
        self.kafka = kafka
        self._ranges: dict[str, dict[int, tuple[int, int]]] = {}
        self._unreachable: StreamQLError | None = None

    def __call__(self, topic: str) -> dict[int, tuple[int, int]]:
        if self._unreachable is not None:
            raise self._unreachable
        if topic not in self._ranges:
            try:
                self._ranges[topic] = kafka_topics.offset_ranges(self.kafka, topic)
            except StreamQLError as e:
                self._unreachable = e
                raise
        return self._ranges[topic]


def query_lag(
    catalog: Catalog, query: QueryInfo, kafka: KafkaSettings | None = None, ranges: TopicRanges | None = None
) -> Lag:
    """The query's lag: in files and their records on its file topics, in records on its
    Kafka topics (end offsets minus the position of its last committed batch, asked of the
    broker: only with ``kafka`` given; ``ranges``: what a look at other queries already
    asked). A terminated query has none."""
    if query.desired_state == DesiredState.TERMINATED:
        return Lag(None, None)
    try:
        formats = _input_formats(catalog, query, float("inf"))
        behind = set(formats) - processed_files(query.checkpoint)
        counts = [topics.record_count(f, formats[f]) for f in sorted(behind)]
    except (OSError, StreamQLError) as e:  # a topic folder gone or unreadable: no lag, and why
        return Lag(None, None, f"its input could not be listed: {e}")
    files = len(behind) if formats else None
    waiting_since = min((_mtime(f) for f in behind), default=None)
    records: int | None = None if None in counts else sum(c or 0 for c in counts)
    note = None if records is not None else "records are counted in JSON, CSV and DELIMITED files only"
    on_kafka = kafka_sources(catalog, query)
    if on_kafka:
        if kafka is None or not kafka.given:
            return Lag(files, None, "no Kafka bootstrap servers given: lag in records is not known", waiting_since)
        on_topics, ranges = 0, ranges or TopicRanges(kafka)
        for name in on_kafka:
            source = catalog.source(name)
            topic = str(source.kafka_topic if source is not None else name)
            try:
                group = consumer_offsets(query, topic, ranges(topic))
            except StreamQLError as e:
                return Lag(files, None, e.message, waiting_since)
            if group.note is not None:
                return Lag(files, None, group.note, waiting_since)
            on_topics += sum(o.lag or 0 for o in group.offsets)
        records = on_topics if not formats else None if records is None else records + on_topics
    return Lag(files, records, note if records is None else None, waiting_since)


@dataclass(frozen=True)
class PartitionOffset:
    """One partition of a topic a query reads: the topic's first and next offsets and where
    the query's last committed micro-batch read up to (None before one committed)."""

    partition: int
    start_offset: int
    end_offset: int
    offset: int | None

    @property
    def lag(self) -> int | None:
        """Records after the query's position (all the partition holds before a batch committed)."""
        return self.end_offset - (self.start_offset if self.offset is None else self.offset)


@dataclass(frozen=True)
class ConsumerOffsets:
    """ksqlDB's ``QueryOffsetSummary``: where a query reading a Kafka topic stands. Spark
    keeps a query's positions in its checkpoint, not in a consumer group, so ``group_id`` is
    the query ID; ``note`` says why no offsets are shown (none committed, Kafka unreachable)."""

    group_id: str
    kafka_topic: str
    offsets: tuple[PartitionOffset, ...] = ()
    note: str | None = None

    @property
    def max_lag(self) -> int:
        return max((o.lag or 0 for o in self.offsets), default=0)


def consumer_offsets(query: QueryInfo, topic: str, ranges: dict[int, tuple[int, int]]) -> ConsumerOffsets:
    """Where ``query``'s last committed micro-batch read ``topic`` up to (its checkpoint's
    offset log), against the topic's ``ranges`` (partition -> first and next offset)."""
    batch = last_committed_batch(query.checkpoint)
    if batch < 0:
        return ConsumerOffsets(query.id, topic, note="no offsets committed by this query yet")
    read: dict[int, int] = {}
    for position in source_positions(query.checkpoint, batch).values():
        if isinstance(position, dict) and isinstance(position.get(topic), dict):
            read.update({int(p): int(o) for p, o in position[topic].items()})
    offsets = tuple(PartitionOffset(p, low, high, read.get(p)) for p, (low, high) in sorted(ranges.items()))
    return ConsumerOffsets(query.id, topic, offsets)


@dataclass(frozen=True)
class LagPoint:
    """The query's lag at one time: after one of its last batches committed, or now."""

    at: float
    #: the batch that had just committed (None: now)
    batch_id: int | None
    files: int | None
    records: int | None


def lag_history(catalog: Catalog, query: QueryInfo, kafka: KafkaSettings | None = None) -> list[LagPoint]:
    """The query's lag after each of its last batches (the progress history the catalog
    keeps), then now. On file topics each point counts the input files committed by then that
    the batches up to it had not processed, and their records; a Kafka topic keeps no end
    offsets of the past, so a query on one has its present lag only."""
    now = lag_now = query_lag(catalog, query, kafka)
    points = []
    history = catalog.observed.progress_history(query.id)
    if history and lag_now.files is not None:
        formats = _input_formats(catalog, query, float("inf"))
        written = {f: _mtime(f) for f in formats}
        processed = processed_by(query.checkpoint, [h["batch_id"] for h in history])
        for h in (h for h in history if h["batch_id"] in processed):
            behind = [f for f, at in written.items() if at <= h["at"] and f not in processed[h["batch_id"]]]
            counts = [topics.record_count(f, formats[f]) for f in behind]
            records = None if None in counts else sum(c or 0 for c in counts)
            points.append(LagPoint(h["at"], h["batch_id"], len(behind), records))
    return [*points, LagPoint(time.time(), None, now.files, now.records)]


#: a Kafka topic's partitions and their first and next offsets
Ranges = dict[int, tuple[int, int]]


def kafka_ends(catalog: Catalog, query: QueryInfo, kafka: KafkaSettings) -> dict[str, Ranges]:
    """The Kafka topics ``query`` reads and their offsets now (``read_committed``): what it
    must have read to be caught up. StateError when the engine has no Kafka settings."""
    ends: dict[str, Ranges] = {}
    for name in kafka_sources(catalog, query):
        source = catalog.source(name)
        topic = str(source.kafka_topic if source is not None else name)
        ends[topic] = kafka_topics.offset_ranges(
            kafka.require(f"catching up of {query.id} on the Kafka topic {topic!r}"), topic
        )
    return ends


def kafka_behind(checkpoint: str, ends: dict[str, Ranges]) -> int:
    """Records of ``ends`` the query has not read in a committed batch: each partition's
    next offset then minus where the query goes on (all of it before the query started)."""
    going_on = kafka_positions(checkpoint)
    behind = 0
    for topic, ranges in ends.items():
        for partition, (low, high) in ranges.items():
            position = going_on.get(topic, {}).get(str(partition))
            behind += max(0, high - (low if position is None else position))
    return behind


def caught_up_message(query_id: str, files: int, records: int | None = None) -> str:
    kafka = "" if records is None else f", and {records:,} Kafka records"
    return f"{query_id} caught up ({files} input files{kafka} processed and committed)"


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:  # compacted away since it was listed: it was processed
        return float("inf")
