"""Descriptions laid out as ksqlDB's CLI prints them (its ``Console``: ``%-20s : %s``
fields, ``Field | Type`` tables, ``Local runtime statistics`` lines of ``%16s:%10.0f``
figures), so a ksqlDB user reads ``DESCRIBE ... EXTENDED`` and ``SHOW QUERIES EXTENDED``
where they expect each field."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .descriptions import ConsumerOffsets, FieldInfo, QueryDescription, SourceDescription, Statistics


def source_text(d: SourceDescription) -> str:
    """``DESCRIBE <source> EXTENDED`` as ksqlDB's CLI prints it, then streamql's details."""
    lines = [
        _field("Name", d.name),
        _field("Type", d.type),
        _field("Timestamp field", d.timestamp or "Not set - using <ROWTIME>"),
        _field("Key format", d.key_format),
        _field("Value format", d.value_format),
    ]
    if d.kafka:
        lines.append(_field("Kafka topic", d.topic) + (f" (partitions: {d.partitions})" if d.partitions else ""))
    else:
        lines.append(_field("File topic", d.topic))
    lines += [_field("Statement", d.statement), ""]
    lines += _fields(d.fields)
    for queries, operation in ((d.read_queries, "read from"), (d.write_queries, "write into")):
        if queries:
            lines += ["", f"Queries that {operation} this {d.type}", "-" * 35]
            lines += [f"{q.id} ({q.state}) : {' '.join(q.sql.split())}" for q in queries]
            lines += ["", "For query topology and execution plan please run: EXPLAIN <QueryId>"]
    lines += ["", "Local runtime statistics", "-" * 24, *statistics_lines(d.statistics, "consumer-")]
    where = f"Kafka topic {d.topic}" if d.kafka else f"file topic {d.topic}"
    lines.append(f"(Statistics of the queries of this pipeline reading the {where})")
    if d.consumer_offsets:
        lines += ["", "Consumer Groups summary:"]
        for group in d.consumer_offsets:
            lines += _offsets(group)
    if d.details:
        lines += ["", "streamql details", "-" * 16, *d.details]
    return "\n".join(lines)


def queries_text(descriptions: Sequence[QueryDescription]) -> str:
    """``SHOW QUERIES EXTENDED`` as ksqlDB's CLI prints it: each query's description."""
    return "\n\n".join(query_text(d) for d in descriptions) or "No queries"


def query_text(d: QueryDescription) -> str:
    lines = [_field("ID", d.id), _field("Query Type", d.query_type), _field("SQL", d.sql)]
    lines.append(_field("Host Query Status", f"{{{d.runtime or '(no runtime)'}={d.status}}}"))
    if d.retry:
        lines.append(_field("Retry", d.retry))
    lines += [_field("Desired state", d.desired), _field("Version", str(d.version)), ""]
    lines += _fields(d.fields)
    for title, names, what in (
        (
            "Sources that this query reads from:",
            d.sources,
            "source description please run: DESCRIBE [EXTENDED] <SourceId>",
        ),
        ("Sinks that this query writes to:", d.sinks, "sink description please run: DESCRIBE [EXTENDED] <SinkId>"),
    ):
        lines += ["", title, "-" * 35, *names, "", f"For {what}"]
    lines += ["", "Execution plan", "-" * 14, d.execution_plan]
    if d.overridden_properties:
        lines += ["", "Overridden Properties", "-" * 21]
        lines += _table(["Property", "Value"], [[k, v] for k, v in d.overridden_properties.items()])
    lines += ["", "Local runtime statistics", "-" * 24, *statistics_lines(d.statistics, "")]
    for error in d.errors:
        lines += [
            "",
            _field("Error Date", _date(error.timestamp)),
            _field("Error Details", error.message),
            _field("Error Type", error.type.value),
        ]
    return "\n".join(lines)


def statistics_lines(s: Statistics, prefix: str) -> list[str]:
    """ksqlDB's two statistics lines (its ``MetricCollectors.format``); a query's third line:
    its late rows and state."""
    figures = [(f"{prefix}messages-per-sec", s.messages_per_sec), (f"{prefix}total-messages", s.total_messages)]
    lines = [_stats(figures, "last-message", s.last_message)]
    lines.append(_stats([(f"{prefix}failed-messages", s.failed_messages)], "last-failed", s.last_failed))
    if s.late_messages is not None and s.state_rows is not None and s.state_bytes is not None:
        late = [("late-messages", s.late_messages), ("state-rows", s.state_rows), ("state-bytes", s.state_bytes)]
        lines.append(" ".join(_stat(name, value) for name, value in late))
    return lines


def _stats(figures: list[tuple[str, float]], last: str, at: float | None) -> str:
    return " ".join(_stat(name, value) for name, value in figures) + f" {last:>16}: {_iso(at):>9}"


def _stat(name: str, value: float) -> str:
    """One figure as ksqlDB's ``TopicSensors.Stat.formatted``: whole numbers without decimals."""
    return f"{name:>16}:{value:10.0f}" if value == round(value) else f"{name:>16}:{value:10.2f}"


def _offsets(group: ConsumerOffsets) -> list[str]:
    lines = ["", _field("Consumer Group", group.group_id)]
    if group.note:
        return [*lines, f"<{group.note}>"]
    lines += ["", _field("Kafka topic", group.kafka_topic), _field("Max lag", str(group.max_lag)), ""]
    position = lambda offset: "-" if offset is None else str(offset)
    rows = [
        [str(o.partition), str(o.start_offset), str(o.end_offset), position(o.offset), str(o.lag)]
        for o in group.offsets
    ]
    return lines + _table(["Partition", "Start Offset", "End Offset", "Offset", "Lag"], rows)


def _fields(fields: Sequence[FieldInfo]) -> list[str]:
    rows = [[f.name, f"{f.type:<16} ({f.key})" if f.key else f.type] for f in fields]
    return _table(["Field", "Type"], rows) if rows else []


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """ksqlDB's CLI table: `` a | b `` rows between dashed lines."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    line = lambda cells: (" " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))).rstrip()
    separator = "-" * (sum(w + 3 for w in widths) - 1)
    return [line(headers), separator, *[line(r) for r in rows], separator]


def _field(name: str, value: str) -> str:
    return f"{name:<20} : {value}"


def _iso(at: float | None) -> str:
    """A time as ksqlDB's statistics show it (ISO 8601 in UTC), ``n/a`` when none."""
    if at is None:
        return "n/a"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


def _date(at: float | None) -> str:
    """An error's date as ksqlDB's CLI shows it (``yyyy-MM-dd hh:mm:ss,SSS (zone)``)."""
    if at is None:
        return "n/a"
    local = time.localtime(at)
    return time.strftime("%Y-%m-%d %H:%M:%S", local) + f",{int(at * 1000) % 1000:03d} ({time.strftime('%Z', local)})"
