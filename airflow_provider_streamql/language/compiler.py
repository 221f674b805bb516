"""The compile step: a persistent query's statement, and the typed schemas of what it reads
and writes, become its :class:`CompiledQuery`: the output schema (each column's one canonical
name and typed type), the Spark plan a runtime runs, and the typed shape the CREATE OR
REPLACE validator compares. The planner, the catalog's migrations and the validator take it
from here and nowhere else; text is produced from it only at the edges (Spark SQL, display).

Two phases, because the planner checks what Structured Streaming can run (its feasibility
rules) in between: :func:`analyze_query` (what the SELECT reads and outputs, keyed and
spelled as its output will be), then :func:`compile_query`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import ValidationError
from .analyzer import SelectAnalysis, analyze_select
from .partition import keyed_select, rekey_problem
from .pseudocolumns import EventTime, TextTime
from .query_shape import QueryShape, SinkShape, Writer, query_shape, select_shape
from .statements import Column, CreateAsSelect, InsertSelect, Statement
from .streaming import StreamingPlan, plan_streaming
from .tables import keyed_by, passed_keys

#: the kind of query each statement makes, by the kind of its output
QUERY_KINDS = {"STREAM": "CSAS", "TABLE": "CTAS"}


@dataclass(frozen=True)
class SourceSchema:
    """A stream or table as the compiler sees it: plain typed values, not a catalog row."""

    name: str
    kind: str  # STREAM | TABLE
    columns: tuple[Column, ...]
    timestamp: str | None = None  # its event-time column
    on_kafka: bool = False
    #: the pattern of an event-time column declared as text (ksqlDB's TIMESTAMP_FORMAT on a
    #: VARCHAR); None when the column is a TIMESTAMP
    text_time: str | None = None

    @property
    def event_time(self) -> EventTime:
        """Its event time as the analyzer and the plan take it."""
        if self.timestamp is not None and self.text_time is not None:
            return TextTime(self.timestamp, self.text_time)
        return self.timestamp

    @property
    def keys(self) -> list[str]:
        return [c.name for c in self.columns if c.key]


@dataclass(frozen=True)
class SinkSchema:
    """Where a query's output goes, as far as the plan and the shape care."""

    path: str
    format: str
    on_kafka: bool = False
    #: written as whole renamed files per batch (else, for a stream: Spark's file sink)
    batch_files: bool = False


@dataclass(frozen=True)
class CompiledQuery:
    """One version of a persistent query, compiled."""

    columns: tuple[Column, ...]  # the output: each column's one spelling and typed type
    sources: tuple[str, ...]  # what it reads, FROM first
    plan: StreamingPlan
    shape: QueryShape


def analyze_query(
    stmt: CreateAsSelect | InsertSelect,
    sources: Mapping[str, SourceSchema],
    *,
    spellings: tuple[Column, ...] | list[Column] = (),
    check: Callable[[SelectAnalysis], None] | None = None,
) -> SelectAnalysis:
    """What ``stmt``'s SELECT reads and outputs, checked against ``sources``: PARTITION BY's
    columns first and made the key, a changelog's key passed through, an aggregation's GROUP BY;
    each output column spelled as ``spellings`` (an existing output's columns: a replaced
    query's sink, an INSERT INTO target) spells it. ``check`` sees the SELECT's analysis first
    (the planner's feasibility rules). ValidationError says what is wrong."""
    schemas = {name: list(src.columns) for name, src in sources.items()}
    select = stmt.select
    if stmt.partition_by:  # the key columns first, in the plan as in the output
        select = keyed_select(select, stmt.partition_by, schemas)
    analysis = analyze_select(
        select,
        schemas,
        stmt,
        persistent=True,
        timestamps={name: src.event_time for name, src in sources.items()},
    )
    if check is not None:
        check(analysis)
    if isinstance(stmt, CreateAsSelect):
        analysis = _keyed(stmt, analysis, sources)
    return analysis.respelled(list(spellings)) if spellings else analysis


def _keyed(stmt: CreateAsSelect, analysis: SelectAnalysis, sources: Mapping[str, SourceSchema]) -> SelectAnalysis:
    over = sources[analysis.sources[0]]
    if stmt.kind == "STREAM" and analysis.aggregate:
        raise _error("an aggregation makes a TABLE: use CREATE TABLE ... AS SELECT", stmt)
    if stmt.kind == "TABLE" and over.kind == "TABLE" and not analysis.aggregate:
        # a changelog in, a changelog out: keyed as its input (language/tables.py)
        return keyed_by(analysis, list(passed_keys(analysis, over.keys).values()))
    if stmt.kind == "TABLE" and not analysis.group_by:
        raise _error("CREATE TABLE ... AS SELECT needs a GROUP BY", stmt)
    if stmt.partition_by:
        problem = rekey_problem(analysis, stmt.partition_by)
        if problem:
            raise _error(problem, stmt)
        return keyed_by(analysis, list(stmt.partition_by))
    return analysis


def compile_query(
    stmt: CreateAsSelect | InsertSelect,
    analysis: SelectAnalysis,
    sources: Mapping[str, SourceSchema],
    sink: SinkSchema,
    *,
    query_id: str,
    kind: str,
    named: bool = True,
    default_grace: float | None = None,
    offset_reset: str = "latest",
) -> CompiledQuery:
    """``stmt`` (its SELECT analysed as ``analysis``) compiled to run as ``query_id``, writing
    ``sink``. ``named``: its streams are named for Spark's source evolution (every new query;
    a version keeps its query's choice); ``default_grace`` as :func:`plan_streaming` takes it;
    ``offset_reset``: where a Kafka stream a new version adds starts (``auto.offset.reset``)."""
    # a query over tables reads each one's changelog as a stream; a stream's query joins
    # tables as they are at each micro-batch
    over_tables = sources[analysis.sources[0]].kind == "TABLE"
    static = set() if over_tables else {n for n in analysis.sources if sources[n].kind == "TABLE"}
    plan = plan_streaming(
        analysis.named if analysis.named is not None else stmt.select,
        stmt,
        analysis,
        query_id,
        kind=kind,
        timestamps={n: sources[n].event_time for n in analysis.sources},
        tables=static,
        schemas={n: list(sources[n].columns) for n in analysis.sources},
        over_tables=over_tables,
        default_grace=default_grace,
    )
    streams = [n for n in analysis.sources if n not in static]
    if over_tables:
        changes = not (analysis.aggregate or analysis.joins)
        plan = plan.with_table_query(
            "changes" if changes else "recompute",
            passed_keys(analysis, sources[analysis.sources[0]].keys) if changes else {},
        )
    elif named:
        plan = plan.with_source_names(source_names(streams))
    plain = kind == "CSAS" and not static and not sink.batch_files
    writer = (Writer.KAFKA_SINK if sink.on_kafka else Writer.FILE_SINK) if plain else Writer.BATCH_FILES
    assert analysis.typed is not None
    shape = query_shape(
        select_shape(analysis.typed, joined=bool(analysis.joins), windowed=stmt.window is not None),
        stmt,
        kind=kind,
        columns=analysis.columns,
        joins=analysis.joins,
        sink=SinkShape(sink.path, sink.format, writer),
        streams=streams,
        grace=plan.grace_by_source(),
        named=bool(plan.source_names),
        starts={
            name: f"its {offset_reset} offset (auto.offset.reset)" if sources[name].on_kafka else "its first file"
            for name in streams
        },
        over_tables=over_tables,
    )
    return CompiledQuery(tuple(analysis.columns), tuple(analysis.sources), plan, shape)


def source_names(streams: list[str]) -> dict[str, str]:
    """Stream -> its Spark source name: the stream's name (a plain name, checked by the
    grammar), lower-case. Stable: the same stream keeps its position in the checkpoint
    whatever else a later version reads."""
    return {name: name.lower() for name in streams}


def _error(message: str, stmt: Statement) -> ValidationError:
    return ValidationError(message, line=stmt.line, col=stmt.col, text=stmt.text.strip()[:120])
