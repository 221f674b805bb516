"""``DESCRIBE <source> EXTENDED`` and ``SHOW QUERIES EXTENDED`` as typed values with
ksqlDB's fields (its ``SourceDescription`` and ``QueryDescription``), built from what the
catalog and the checkpoints hold: no Spark call. A Kafka source's consumer positions also
need the topic's offsets from the broker (:func:`consumer_offsets`), read by the caller
outside the catalog transaction. :mod:`.console` lays them out as ksqlDB's CLI does."""

from __future__ import annotations

import dataclasses
import enum
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlglot import exp

from ..catalog import Catalog, QueryInfo, Snapshot, SourceInfo
from ..catalog.model import INTERNAL_PROPERTIES
from ..errors import StreamQLError
from ..storage import kafka_topics
from ..storage.kafka_topics import KafkaSettings
from .lag import ConsumerOffsets, consumer_offsets
from .rows import retry, shown_state

#: the window ``messages-per-sec`` is measured over, seconds (ksqlDB's rates are windowed too)
RATE_WINDOW = 30.0
#: a query's errors shown, the most recent (ksqlDB's ``ksql.query.error.max.queue.size``
#: default): a query that logs thousands of bad records lists its last ones, and counts all
#: of them in ``failed-messages``
RECENT_ERRORS = 10


class ErrorType(enum.StrEnum):
    """ksqlDB's ``QueryError.Type``: the user's (a bad record, a statement) or the system's."""

    USER = "USER"
    SYSTEM = "SYSTEM"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Statistics:
    """ksqlDB's local runtime statistics: records read (``total-messages``), their rate over
    the last :data:`RATE_WINDOW` seconds, when the last arrived, and the records that could
    not be read (``failed-messages``: the bad records). For a source, the figures of the
    queries reading it (ksqlDB's ``consumer-`` statistics). Times are epoch seconds."""

    messages_per_sec: float
    total_messages: int
    last_message: float | None
    failed_messages: int
    last_failed: float | None
    #: a query's: records dropped as later than the watermark, rows and bytes of its state
    late_messages: int | None = None
    state_rows: int | None = None
    state_bytes: int | None = None


@dataclass(frozen=True)
class FieldInfo:
    """A column as ksqlDB's ``Field | Type`` table shows it; ``key``: ``key``, ``primary key`` or ''."""

    name: str
    type: str
    key: str = ""


@dataclass(frozen=True)
class RunningQuery:
    """A query reading or writing a source: its ID, shown state and statement."""

    id: str
    state: str
    sql: str


@dataclass(frozen=True)
class QueryError:
    """ksqlDB's ``QueryError``: when (epoch seconds; None when not recorded), what, whose."""

    timestamp: float | None
    message: str
    type: ErrorType


@dataclass(frozen=True)
class SourceDescription:
    """``DESCRIBE <source> EXTENDED`` in ksqlDB's fields; ``topic`` is the Kafka topic or
    the file topic's folder; ``partitions`` None where not known (a file topic, Kafka not
    asked); ``details``: streamql's own lines (properties, versions, bad records)."""

    name: str
    type: str
    timestamp: str
    key_format: str
    value_format: str
    topic: str
    kafka: bool
    partitions: int | None
    statement: str
    fields: tuple[FieldInfo, ...]
    read_queries: tuple[RunningQuery, ...]
    write_queries: tuple[RunningQuery, ...]
    statistics: Statistics
    consumer_offsets: tuple[ConsumerOffsets, ...] = ()
    details: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class QueryDescription:
    """A query as ``SHOW QUERIES EXTENDED`` describes it, in ksqlDB's fields: ``status``
    is its shown state and ``runtime`` the runtime holding it (ksqlDB's host query status);
    ``execution_plan`` the compiled plan (sink, SELECT, sources, the state its last batch
    reported); ``overridden_properties`` its SET and WITH settings."""

    id: str
    query_type: str
    sql: str
    status: str
    desired: str
    runtime: str | None
    #: a failing query's retries (:func:`~.rows.retry`), None when it is not failing
    retry: str | None
    version: int
    fields: tuple[FieldInfo, ...]
    sources: tuple[str, ...]
    sinks: tuple[str, ...]
    execution_plan: str
    overridden_properties: dict[str, str]
    statistics: Statistics
    errors: tuple[QueryError, ...]

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


def _plain(value: Any) -> dict[str, Any]:
    """A description as JSON-ready values (enums by name)."""
    return dataclasses.asdict(value, dict_factory=lambda items: {k: _value(v) for k, v in items})


def _value(v: Any) -> Any:
    return v.value if isinstance(v, enum.Enum) else v


# -- building ---------------------------------------------------------------------------
def describe_source(
    catalog: Catalog, conn: Connection, snapshot: Snapshot, src: SourceInfo, details: list[str]
) -> SourceDescription:
    """The source's description from the catalog and checkpoints (no consumer offsets yet:
    see :func:`with_consumer_offsets`)."""
    leases = catalog.leases.holders(conn)
    queries = sorted(snapshot.queries.values(), key=lambda q: q.seq)
    readers = [q for q in queries if src.name in q.sources]
    writers = [q for q in queries if q.sink == src.name]
    running = lambda q: RunningQuery(q.id, shown_state(q, leases.get(q.id)), q.sql)
    writer = snapshot.queries.get(src.writer_query or "")
    return SourceDescription(
        name=src.name,
        type=src.kind,
        timestamp=src.timestamp_column or "",
        key_format=key_format(src),
        value_format=src.format,
        topic=src.kafka_topic or src.path,
        kafka=bool(src.kafka_topic),
        partitions=None,
        statement=writer.sql if writer else declaration(src),
        fields=fields_of(src),
        read_queries=tuple(running(q) for q in readers),
        write_queries=tuple(running(q) for q in writers),
        statistics=_statistics(catalog, conn, readers, source=src.name),
        details=tuple(details),
    )


def with_consumer_offsets(
    description: SourceDescription, snapshot: Snapshot, kafka: KafkaSettings
) -> SourceDescription:
    """``description`` with the positions of each query reading its Kafka topic and the
    topic's partition count, read from the broker (outside any catalog transaction)."""
    if not description.kafka or not description.read_queries:
        return description
    topic = description.topic
    try:
        ranges = kafka_topics.offset_ranges(kafka.require(f"DESCRIBE {description.name} EXTENDED"), topic)
    except StreamQLError as e:  # DESCRIBE still answers: the positions say why they are missing
        offsets = tuple(ConsumerOffsets(q.id, topic, note=e.message) for q in description.read_queries)
        return dataclasses.replace(description, consumer_offsets=offsets)
    offsets = tuple(
        consumer_offsets(snapshot.queries[q.id], topic, ranges)
        for q in description.read_queries
        if q.id in snapshot.queries
    )
    return dataclasses.replace(description, partitions=len(ranges) or None, consumer_offsets=offsets)


def describe_queries(catalog: Catalog, conn: Connection, snapshot: Snapshot) -> list[QueryDescription]:
    """Every query of the snapshot, oldest first, as ``SHOW QUERIES EXTENDED`` describes it."""
    leases = catalog.leases.holders(conn)
    return [
        _describe_query(catalog, conn, snapshot, q, leases.get(q.id))
        for q in sorted(snapshot.queries.values(), key=lambda q: q.seq)
    ]


def _describe_query(
    catalog: Catalog, conn: Connection, snapshot: Snapshot, q: QueryInfo, lease: dict[str, Any] | None
) -> QueryDescription:
    sink = snapshot.sources.get(q.sink)
    return QueryDescription(
        id=q.id,
        query_type="PERSISTENT",
        sql=q.sql,
        status=shown_state(q, lease),
        desired=str(q.desired_state),
        runtime=lease["runtime_id"] if lease else None,
        retry=retry(q, shown_state(q, lease)),
        version=q.version,
        fields=fields_of(sink) if sink else (),
        sources=tuple(q.sources),
        sinks=(q.sink,),
        execution_plan=execution_plan(catalog, conn, snapshot, q),
        overridden_properties={k: str(v) for k, v in sorted(q.settings.items())},
        statistics=_statistics(catalog, conn, [q]),
        errors=tuple(_errors(catalog, conn, q)),
    )


def _statistics(catalog: Catalog, conn: Connection, queries: list[QueryInfo], source: str | None = None) -> Statistics:
    """The figures of ``queries`` summed (for a ``source``: only its bad records count as
    failed); one query's also its late rows and state."""
    now = time.time()
    total, recent, last = 0, 0, None
    for q in queries:
        p = catalog.observed.progress(q.id, conn)
        history = catalog.observed.progress_history(q.id, conn)
        total += p.total_input_rows if p else 0
        recent += sum(h["input_rows"] for h in history if h["at"] >= now - RATE_WINDOW)
        arrived = [h["at"] for h in history if h["input_rows"]]
        at = max(arrived, default=p.last_batch_at if p and p.total_input_rows else None)
        last = at if last is None or (at is not None and at > last) else last
    bad = [r for q in queries for r in catalog.bad_records.of(q.id, conn=conn) if source is None or r.source == source]
    one = catalog.observed.progress(queries[0].id, conn) if len(queries) == 1 and source is None else None
    return Statistics(
        messages_per_sec=round(recent / RATE_WINDOW, 2),
        total_messages=total,
        last_message=last,
        failed_messages=len(bad),
        last_failed=max((r.recorded_at for r in bad), default=None),
        late_messages=one.late_rows if one else (0 if source is None else None),
        state_rows=one.state_rows if one else (0 if source is None else None),
        state_bytes=one.state_bytes if one else (0 if source is None else None),
    )


def _errors(catalog: Catalog, conn: Connection, q: QueryInfo) -> list[QueryError]:
    """The query's :data:`RECENT_ERRORS` latest errors, oldest first: its bad records (the
    user's), the versions that failed and its current error (the system's)."""
    errors = [
        QueryError(r.recorded_at, f"{r.status} at {r.position}: {r.error}", ErrorType.USER)
        for r in catalog.bad_records.of(q.id, conn=conn)
    ]
    errors += [
        QueryError(v["ended_at"], f"version {v['version']}: {v['error']}", ErrorType.SYSTEM)
        for v in catalog.versions(q.id, conn)
        if v["error"]
    ]
    if q.error and not any(q.error in e.message for e in errors):
        errors.append(QueryError(q.updated_at or None, q.error, ErrorType.SYSTEM))
    return sorted(errors, key=lambda e: e.timestamp or 0.0)[-RECENT_ERRORS:]


def execution_plan(catalog: Catalog, conn: Connection, snapshot: Snapshot, q: QueryInfo) -> str:
    """The compiled plan as ksqlDB's execution plan lays it out, sink first: where it
    writes and in which output mode, the SELECT Spark runs, the stateful operators its last
    batch reported, and each source with its watermark."""
    where = lambda name: (
        f"kafka:{src.kafka_topic}" if (src := snapshot.sources.get(name)) and src.kafka_topic else "file topic"
    )
    lines = [f" > [ SINK ] | {q.sink} ({where(q.sink)}) | Output mode: {q.plan.output_mode}"]
    lines.append(f"{_LEVEL} > [ SELECT ] | {q.select_sql}")
    p = catalog.observed.progress(q.id, conn)
    operators = p.state_operators if p else []
    lines += [
        f"{_LEVEL * 2} > [ STATE ] | {op['operator']}: {op['rows']} rows, {op['memory_bytes']} bytes"
        for op in operators
    ]
    for name in q.sources:
        watermark = q.plan.watermarks.get(name)
        mark = f" | Watermark: {watermark[0]} - {watermark[1]:g} s" if watermark else ""
        lines.append(f"{_LEVEL * (3 if operators else 2)} > [ SOURCE ] | {name} ({where(name)}){mark}")
    return "\n".join(lines)


#: how far each step of the execution plan is indented under the one it feeds
_LEVEL = " " * 8


def fields_of(src: SourceInfo) -> tuple[FieldInfo, ...]:
    key = "primary key" if src.kind == "TABLE" else "key"
    return tuple(FieldInfo(c.name, str(c.type), key if c.key else "") for c in src.columns)


def key_format(src: SourceInfo) -> str:
    """The key format: as given; else as streamql writes a Kafka key (one STRING column as
    text: KAFKA; other keys as JSON); a file topic holds its key columns in the value."""
    if "key_format" in src.properties:
        return str(src.properties["key_format"]).upper()
    if not src.kafka_topic:
        return "NONE"
    keys = [c for c in src.columns if c.key]
    return "KAFKA" if not keys or (len(keys) == 1 and keys[0].type.is_text) else "JSON"


def declaration(src: SourceInfo) -> str:
    """A declared source's statement, rendered from what the catalog records of it (names
    and values quoted by sqlglot, never formatted from user text)."""
    key = "PRIMARY KEY" if src.kind == "TABLE" else "KEY"
    name = lambda text: exp.Identifier(this=text, quoted=True).sql(dialect="spark")
    columns = ", ".join(f"{name(c.name)} {c.type}" + (f" {key}" if c.key else "") for c in src.columns)
    props = {k: v for k, v in src.properties.items() if k not in INTERNAL_PROPERTIES}
    given = ", ".join(f"{k.upper()}={_literal(v)}" for k, v in props.items())
    return f"CREATE {src.kind} {name(src.name)} ({columns})" + (f" WITH ({given})" if given else "") + ";"


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return exp.Literal.number(value).sql()
    return exp.Literal.string(str(value)).sql(dialect="spark")
