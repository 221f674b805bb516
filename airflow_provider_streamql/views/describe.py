"""SHOW, DESCRIBE and EXPLAIN: tables built from the catalog, the checkpoints and (for
DESCRIBE ... STATE) a reader of Spark state handed in by the caller."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from ..catalog import Catalog, ProcessingGuarantee, QueryInfo, Snapshot
from ..errors import StateError
from ..language import statements as st
from ..language.rates import RateLimits
from ..language.streaming import DEFAULT_GRACE_SECONDS, duration_sql
from ..results import Result
from ..storage.checkpoints import last_committed_batch, planned_watermark_ms
from ..storage.state import StateOperator, recorded_state
from .console import queries_text, source_text
from .descriptions import SourceDescription, describe_queries, describe_source
from .rows import QUERY_COLUMNS, SNAPSHOT_COLUMNS, query_rows, snapshot_row

#: reads the state a checkpoint holds as of its last committed batch: ``(checkpoint, its
#: stateful operators, at most this many rows per operator)`` -> ``(columns, rows)``. The
#: runtime's reads it with Spark's State Data Source (``runtime/state.py``); the engine hands
#: it in, so nothing here starts Spark
StateReader = Callable[[str, list[StateOperator], int], tuple[list[str], list[list[Any]]]]


def show(
    catalog: Catalog,
    conn: Connection,
    snapshot: Snapshot,
    stmt: st.Show,
    settings: dict[str, str],
    properties: Mapping[str, tuple[str, ...]],
) -> Result:
    """``SHOW STREAMS|TABLES|QUERIES|TOPICS|PROPERTIES``; ``settings``: the request's SET
    values; ``properties``: the session properties SET takes, with their allowed values."""
    if stmt.what == "PROPERTIES":
        rows = [[key, settings.get(key), ", ".join(allowed)] for key, allowed in properties.items()]
        return Result(stmt.text, columns=["property", "value", "allowed"], rows=rows)
    if stmt.what == "TOPICS":  # ksqlDB's topics: where each stream and table lives
        sources = sorted(snapshot.sources.values(), key=lambda s: s.name)
        rows = [[s.name, s.kind, s.format, f"kafka:{s.kafka_topic}" if s.kafka_topic else s.path] for s in sources]
        return Result(stmt.text, columns=["name", "kind", "format", "topic"], rows=rows)
    if stmt.what == "SNAPSHOTS":
        queries = sorted(snapshot.queries.values(), key=lambda q: q.seq)
        rows = [snapshot_row(snap) for q in queries for snap in catalog.snapshots.of(q.id, conn)]
        return Result(stmt.text, columns=SNAPSHOT_COLUMNS, rows=rows)
    if stmt.what == "QUERIES":
        queries = sorted(snapshot.queries.values(), key=lambda q: q.seq)
        shown = QUERY_COLUMNS if stmt.extended else QUERY_COLUMNS[:6]
        result = Result(
            stmt.text, columns=shown, rows=[[r[c] for c in shown] for r in query_rows(catalog, queries, conn)]
        )
        if stmt.extended:  # ksqlDB's query descriptions, the table's rows kept for callers
            result.description = describe_queries(catalog, conn, snapshot)
            result.message = queries_text(result.description)
        return result
    kind = stmt.what[:-1]
    sources = [s for s in sorted(snapshot.sources.values(), key=lambda s: s.name) if s.kind == kind]
    columns = ["name", "format", "written_by", "path"] if stmt.extended else ["name", "format", "written_by"]
    rows = [[s.name, s.format, s.writer_query, s.path][: len(columns)] for s in sources]
    return Result(stmt.text, columns=columns, rows=rows)


def describe(
    catalog: Catalog, conn: Connection, snapshot: Snapshot, stmt: st.Describe, recorded: Sequence[str] = ()
) -> Result:
    """``DESCRIBE <source> [EXTENDED]``: its columns and where it lives; with EXTENDED its
    writers' versions and bad records, its queries' state, and ``recorded``: what each ksqlDB
    property it was given and streamql records does here."""
    src = snapshot.sources[stmt.name]
    readers = [q.id for q in snapshot.queries.values() if src.name in q.sources]
    writers = [q.id for q in snapshot.queries.values() if q.sink == src.name]
    lines = [
        f"Name: {src.name}",
        f"Type: {src.kind}",
        f"Format: {src.format}",
        f"Path: {src.path}",
        f"Written by: {', '.join(writers) or '(declared; INSERT VALUES)'}",
        f"Read by: {', '.join(readers) or '-'}",
    ]
    if stmt.extended:  # ksqlDB's fields first, then what streamql adds (its details)
        lines = [f"Property {note}" for note in recorded]
        for writer in writers:
            lines += [f"{label} of {writer}: {text}" for label, text in version_history(catalog, writer, conn)]
            lines += [f"Bad record of {writer}: {text}" for text in bad_record_lines(catalog, writer, conn)]
            if (grace := grace_period(snapshot.queries[writer])) is not None:
                lines.append(f"Grace period of {writer}: {grace}")
        for row in query_rows(catalog, [snapshot.queries[i] for i in writers + readers], conn):
            lines.append(
                f"Query {row['query_id']}: {row['state']} (desired {row['desired']}), "
                f"last batch {row['last_batch']}, {row['rows_per_sec']} rows/s"
                + (f", error: {row['error']}" if row["error"] else "")
            )
    result = Result(
        stmt.text,
        message="\n".join(lines),
        columns=["column", "type", "key"],
        rows=[[c.name, c.type.spark(), "KEY" if c.key else ""] for c in src.columns],
    )
    if stmt.extended:
        described(result, describe_source(catalog, conn, snapshot, src, lines))
    return result


def described(result: Result, description: SourceDescription) -> None:
    """Give ``result`` the source's description and its ksqlDB layout as its message."""
    result.description = description
    result.message = source_text(description)


def explain(catalog: Catalog, conn: Connection, snapshot: Snapshot, stmt: st.Explain) -> Result:
    q = snapshot.queries[stmt.query_id]
    row = query_rows(catalog, [q], conn)[0]
    p = catalog.observed.progress(q.id, conn)
    fields = [
        ("query_id", q.id),
        ("kind", q.kind),
        ("pipeline", q.pipeline),
        ("version", q.version),
        ("state", row["state"]),
        ("retry", row["retry"]),
        ("desired", q.desired_state),
        ("sink", q.sink),
        ("sink_path", snapshot.sources[q.sink].path if q.sink in snapshot.sources else None),
        ("sources", ", ".join(q.sources)),
        ("source_names", source_naming(q)),
        ("checkpoint", q.checkpoint),
        ("sql", q.sql),
        ("spark_select", q.select_sql),
        ("last_batch", p.batch_id if p else None),
        ("last_batch_at", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p.last_batch_at)) if p else None),
        ("rows_per_sec", row["rows_per_sec"]),
        ("late_rows", row["late_rows"]),
        ("output_mode", q.plan.output_mode),
        ("watermarks", q.plan.watermarks),
        ("grace_period", grace_period(q)),
        ("watermark_now", _utc(planned_watermark_ms(q.checkpoint)) if q.plan.watermarks else None),
        *[
            (
                f"state[{n}]",
                f"{op['operator']}: {op['rows']} rows, {op['memory_bytes']} bytes, "
                f"{op['dropped_by_watermark']} late rows dropped",
            )
            for n, op in enumerate(p.state_operators if p else [])
        ],
        *[(f"state_store[{n}]", line) for n, line in enumerate(state_lines(q.checkpoint))],
        *[(key, q.settings[key]) for key in ("shadow_of", "shadow_version", "shadow_from_batch") if key in q.settings],
        *[("shadow", s.id) for s in snapshot.queries.values() if s.settings.get("shadow_of") == q.id],
        ("error", q.error),
        ("on_error", q.settings.get("on_error") or "(the pipeline's default)"),
        ("rate_limit", RateLimits.of(q.settings).describe()),
        *([("expectation", row["expectation"])] if row["expectation"] else []),
        *_guarantee(snapshot, q),
        *version_history(catalog, q.id, conn),
        *[("bad record", text) for text in bad_record_lines(catalog, q.id, conn)],
    ]
    return Result(stmt.text, columns=["field", "value"], rows=[[k, v] for k, v in fields])


def _guarantee(snapshot: Snapshot, q: QueryInfo) -> list[tuple[str, str]]:
    """How the query writes its Kafka output; nothing for a file output (exactly once per batch)."""
    sink = snapshot.sources.get(q.sink)
    if sink is None or not sink.kafka_topic:
        return []
    return [("processing_guarantee", str(ProcessingGuarantee.of(q.settings)))]


def describe_query(catalog: Catalog, conn: Connection, snapshot: Snapshot, stmt: st.Describe) -> Result:
    """``DESCRIBE <query_id> [EXTENDED]``: the query's fields (as EXPLAIN), and with
    EXTENDED its bad records."""
    explained = explain(catalog, conn, snapshot, st.Explain(query_id=stmt.name, text=stmt.text))
    rows = explained.rows if stmt.extended else [r for r in explained.rows if r[0] != "bad record"]
    return Result(stmt.text, columns=explained.columns, rows=rows)


def state_lines(checkpoint: str) -> list[str]:
    """One line per state store the checkpoint records (see :func:`recorded_state`)."""
    return [line for op in recorded_state(checkpoint) for line in op.describe()]


def describe_state(
    q: QueryInfo, stmt: st.Describe, read_state: StateReader | None
) -> tuple[Result, Callable[[], None] | None]:
    """``DESCRIBE <query_id> STATE [LIMIT n]``: what the checkpoint records of each stateful
    operator, and how to read up to ``n`` rows per operator with ``read_state`` (after the
    catalog transaction: Spark may take seconds to start)."""
    operators = recorded_state(q.checkpoint)
    empty = f"{q.id} keeps no state" if last_committed_batch(q.checkpoint) >= 0 else f"{q.id} has no batch yet"
    result = Result(stmt.text, "\n".join(state_lines(q.checkpoint)) or empty, query_id=q.id)
    if not operators:
        return result, None
    if read_state is None:
        raise StateError(f"DESCRIBE {q.id} STATE needs a reader of Spark state; this planner was given none")

    def read_rows() -> None:
        result.columns, result.rows = read_state(q.checkpoint, operators, stmt.state_limit)

    return result, read_rows


def source_naming(query: QueryInfo) -> str:
    """How the query's checkpoint knows its streams: by name (a version may add or drop one
    in place) or by position (created before streams were named)."""
    if query.plan.source_names:
        names = ", ".join(f"{stream} as {name!r}" for stream, name in query.plan.source_names.items())
        return f"{names} (source evolution: a version may add or drop a stream in place)"
    if query.plan.table_query:
        return "by position (a query over tables reads their changelogs; another set needs a new checkpoint)"
    return "by position (created before streams were named: another set of streams needs a new checkpoint)"


def grace_period(q: QueryInfo) -> str | None:
    """The grace period of a windowed or joined query as its plan was compiled (the watermark
    delay of its sources), ``(default)`` where the statement gives no GRACE PERIOD; None for
    a query without a watermark. Sources with different grace periods are named."""
    if not q.plan.watermarks:
        return None
    given = _given_graces(q)
    shown = {}
    for source, (_column, seconds) in q.plan.watermarks.items():
        text = duration_sql(seconds)
        if seconds not in given.get(source, []):
            text += " (default)" if seconds == DEFAULT_GRACE_SECONDS else " (default when created)"
        shown[source] = text
    if len(set(shown.values())) == 1:
        return next(iter(shown.values()))
    return ", ".join(f"{source}: {text}" for source, text in shown.items())


def _given_graces(q: QueryInfo) -> dict[str, list[float]]:
    """Source -> the GRACE PERIODs the query's statement gives it (its WINDOW's and WITHINs'),
    as the plan assigns them (a WINDOW to the FROM stream, a WITHIN to both streams it joins),
    read off its compiled shape."""
    first = q.sources[0]
    given: dict[str, list[float]] = {}
    shape = q.shape
    if shape.window is not None and shape.window.grace is not None:
        given.setdefault(first, []).append(shape.window.grace)
    for (_kind, joined), within in zip(shape.joins, shape.withins, strict=False):
        if within is not None and within.grace is not None:
            for name in (first, joined):
                given.setdefault(name, []).append(within.grace)
    return given


def bad_record_lines(catalog: Catalog, query_id: str, conn: Connection | None = None) -> list[str]:
    """One line per bad record of the query: status, batch, position, error and raw text."""
    return [
        f"{r.status} (batch {r.batch_id}) at {r.position}: {r.error}; raw: {r.raw[:200]}"
        + (f"; {r.status.lower()} by {r.handled_by}" if r.handled_by else "")
        for r in catalog.bad_records.of(query_id, conn=conn)
    ]


def version_history(catalog: Catalog, query_id: str, conn: Connection | None = None) -> list[tuple[str, str]]:
    """One (label, text) per version: its verdict and what the validator found changed,
    start, end, outcome, error and SQL."""
    rows = []
    for v in catalog.versions(query_id, conn):
        when = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"
        report = json.loads(v["report"]) if isinstance(v["report"], str) else v["report"] or {}
        codes = [f["code"] for f in report.get("findings", [])]
        rows.append(
            (
                f"version {v['version']}",
                f"{v['outcome'] or 'PENDING'}; verdict {v['verdict'] or '(created)'}"
                + (f" ({', '.join(codes)})" if codes else "")
                + f"; started {when(v['started_at'])}; ended {when(v['ended_at'])}"
                + (f"; error: {v['error']}" if v["error"] else "")
                + f"; sql: {v['sql']}",
            )
        )
    return rows


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + " UTC"
