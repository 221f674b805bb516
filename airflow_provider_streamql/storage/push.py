"""Push queries: ``SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]``.

A push query follows the committed output of ``s``'s topic, as ``PRINT`` does
(:mod:`.printing`): on a file topic each data file committed after the query started (a
table: each entry of its changelog; its tombstones delete and show no row), on a Kafka topic
each committed record after the offsets it started at (read by the engine's own consumer,
``read_committed``, decoded as a runtime decodes them: :mod:`.topic_tables`; a table's
tombstones and records without a key show no row). Those rows are loaded into a pull
query's locked DuckDB (:class:`.pull.PullQuery`) and the SELECT's projection and WHERE run on
them, in the order they were written (a Kafka topic: partition by partition in offset
order). Nothing runs on Spark and no persistent query is touched: a row appears once the
query writing ``s`` (or an INSERT VALUES, or any producer of a Kafka topic) commits it, so a
push query's latency is that query's batch interval.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..catalog import SourceInfo
from ..language.analyzer import SelectAnalysis
from ..language.limits import Limits
from . import kafka_topics, topics
from .kafka_topics import KafkaSettings
from .topic_tables import Decoded

#: files read at most at one look: an earliest push query over a long history shows its rows
#: in bounded steps (each within the pull query's bounds), not in one answer
FILES_PER_LOOK = 64
#: Kafka records read at most at one look, for the same reason
RECORDS_PER_LOOK = 10_000


@dataclass(frozen=True)
class PushPlan:
    """A push query resolved once: the source it follows, its SELECT (as analysed, without
    LIMIT), the analysis, the rows it stops after, and the bounds of each look."""

    source: SourceInfo
    select: exp.Select
    analysis: SelectAnalysis
    limit: int | None
    limits: Limits
    #: the engine's Kafka settings, for a source on a Kafka topic
    kafka: KafkaSettings = field(default_factory=KafkaSettings)

    @property
    def columns(self) -> list[str]:
        """The names of the rows' values, as the SELECT names them."""
        return [c.name for c in self.analysis.columns]


@dataclass(frozen=True)
class Pushed:
    """Where a push query stands: the rows found at the last look, every file read so far
    (a Kafka topic: each partition read and the offset to read next), how many rows were
    shown in all, and what a reader should know (lines or records skipped)."""

    rows: list[list[Any]] = field(default_factory=list)
    files: frozenset[str] = frozenset()
    shown: int = 0
    notes: tuple[str, ...] = ()
    offsets: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Where it stands, without the rows (a JSON value)."""
        offsets = {"offsets": {str(p): o for p, o in sorted(self.offsets.items())}} if self.offsets else {}
        return {"files": sorted(self.files), "shown": self.shown, **offsets}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pushed:
        offsets = {int(p): int(o) for p, o in data.get("offsets", {}).items()}
        return cls(files=frozenset(data["files"]), shown=data["shown"], offsets=offsets)


def start(plan: PushPlan, *, earliest: bool) -> Pushed:
    """Where a push query starts: after everything committed now (ksqlDB's default,
    ``auto.offset.reset`` latest: every file, or each partition's end offset), or before
    the first record (``earliest``)."""
    if earliest:
        return Pushed()
    topic = plan.source.kafka_topic
    if topic:
        return Pushed(offsets=kafka_topics.end_offsets(plan.kafka.require(_what(plan)), topic))
    return Pushed(files=frozenset(topics.data_files(plan.source)))


def push_rows(plan: PushPlan, since: Pushed) -> Pushed:
    """The rows of the files committed to ``plan``'s source that ``since`` has not read
    (at most :data:`FILES_PER_LOOK`, oldest first), through the SELECT, in order, until
    ``plan.limit`` rows are shown in all."""
    if plan.limit is not None and since.shown >= plan.limit:
        return Pushed(files=since.files, shown=since.shown, offsets=since.offsets)
    if plan.source.kafka_topic:
        return _push_kafka(plan, since)
    new = [f for f in topics.data_files(plan.source) if f not in since.files][:FILES_PER_LOOK]
    readable = [f for f in new if not topics.is_tombstones(f)]
    if not readable:
        return Pushed(files=since.files | set(new), shown=since.shown)
    rows, notes = _look(plan, since, files={plan.source.name: readable})
    return Pushed(rows, since.files | set(new), since.shown + len(rows), tuple(notes))


def _push_kafka(plan: PushPlan, since: Pushed) -> Pushed:
    """:func:`push_rows` of a source on a Kafka topic: the records committed after
    ``since``'s offsets (at most :data:`RECORDS_PER_LOOK`), each change a row."""
    src, offsets, what = plan.source, dict(since.offsets), _what(plan)
    decoded = Decoded(src)
    records = kafka_topics.read(plan.kafka.require(what), str(src.kafka_topic), offsets, plan.limits, what)
    with contextlib.closing(records):  # a full look closes the consumer at once
        for n, record in enumerate(records, start=1):
            offsets[record.partition] = record.offset + 1
            decoded.add(record)
            if n >= RECORDS_PER_LOOK:
                break
    if not decoded.rows:
        return Pushed(files=since.files, shown=since.shown, notes=tuple(decoded.notes()), offsets=offsets)
    rows, notes = _look(plan, since, topics={src.name: decoded.rows})
    return Pushed(rows, since.files, since.shown + len(rows), tuple(decoded.notes() + notes), offsets)


def _look(plan: PushPlan, since: Pushed, **data: dict[str, list]) -> tuple[list[list[Any]], list[str]]:
    """The SELECT run on one look's rows (``data``: the files or the Kafka rows a
    :class:`.pull.PullQuery` loads), with a LIMIT of the rows still to show (a typed number,
    never text): the rows and what a reader should know."""
    from .pull import PullQuery  # DuckDB and Arrow load at a push query's look, not with every command

    select = plan.select if plan.limit is None else plan.select.limit(plan.limit - since.shown)
    with PullQuery([plan.source], plan.limits, **data) as query:
        _, rows = query.run(select, plan.analysis)
    return rows, query.notes


def _what(plan: PushPlan) -> str:
    return f"the push query of {plan.source.kind} {plan.source.name}"
