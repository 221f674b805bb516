"""The state a script is planned in, shared by every statement family of the planner.

:class:`Planning` holds what planning reads and changes (the catalog and its connection, the
:class:`Snapshot` a script is planned against, the session's settings, who issues the
statements, the bounds) and the lookups and checks the families share: declared sources and
names (:meth:`~Planning.declared`, :meth:`~Planning.check_new_name`,
:meth:`~Planning.readers`), the source builder :meth:`~Planning.source` (its WITH
properties are :mod:`.properties`), and the analysis of a SELECT
(:meth:`~Planning.analyze_query`, checked against :mod:`.feasibility` when it runs as a
persistent query). Each family holds the one :class:`Planning` of its planner, so a
statement sees what the statements before it in the script did. Errors placed at a
statement (:func:`error_at`, :func:`state_error_at`) and the step of a statement that
changes nothing (:func:`unchanged`) need no state and are plain functions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from sqlalchemy import Connection
from sqlglot import exp

from ..catalog import Catalog, QueryInfo, Snapshot, SourceInfo
from ..catalog.states import DesiredState
from ..errors import NotFoundError, StateError, ValidationError
from ..language import statements as st
from ..language.analyzer import SelectAnalysis, analyze_select
from ..language.compiler import SourceSchema, analyze_query
from ..language.limits import Limits
from ..language.rates import RateLimit
from ..language.starting import START, with_start
from ..language.streaming import StreamingPlan
from ..language.types import SqlType, TypeName
from ..results import Result
from ..storage import kafka_properties, kafka_values, topics
from ..storage.kafka_topics import KafkaSettings
from ..storage.layout import Layout, Part
from ..views.describe import StateReader
from ..views.reader import RUNTIME_STALE_AFTER
from . import feasibility, properties
from .step import Step

# WITH properties that would put Kafka connection settings in SQL text
KAFKA_CONNECTION_SETTINGS = ("kafka.", "bootstrap", "security", "sasl", "ssl")


# -- errors placed at a statement, and the step that changes nothing --------------------
def error_at(message: str, stmt: st.Statement, *, at: tuple[int, int] | None = None) -> ValidationError:
    """``message`` placed at ``stmt``, or at ``at`` (line, column) inside it."""
    line, col = at or (stmt.line, stmt.col)
    return ValidationError(message, line=line, col=col, text=stmt.text.strip()[:120])


def state_error_at(message: str, stmt: st.Statement) -> StateError:
    return StateError(message, line=stmt.line, col=stmt.col, text=stmt.text)


def placed(folder: str, stmt: st.Statement) -> str:
    """``folder`` where the layout placed it (:class:`Part`), or the statement's StateError."""
    try:
        return Part(folder).folder
    except StateError as e:
        raise state_error_at(e.message, stmt) from None


def unchanged(stmt: st.Statement, what: str, query: QueryInfo | None = None) -> Step:
    """The step of a statement whose object already exists exactly as it defines it."""
    result = Result(
        stmt.text,
        f"Unchanged: {what} already exists as defined",
        query_id=query.id if query else None,
        version=query.version if query else None,
        action="unchanged",
    )
    return Step(result)


def column_tuples(columns: list[st.Column]) -> list[tuple[str, SqlType, bool]]:
    return [(c.name.lower(), c.type, c.key) for c in columns]


@dataclass
class Planning:
    """The state one script is planned in (see the module's docstring)."""

    catalog: Catalog
    conn: Connection
    snapshot: Snapshot
    home: str
    pipeline: str
    layout: Layout
    settings: dict[str, str] = field(default_factory=dict)
    #: a CREATE, ALTER or INSERT INTO ... SELECT whose object already exists exactly as the
    #: statement defines it changes nothing (its result's action is "unchanged"), so that a
    #: deploy script can be applied again
    skip_unchanged: bool = False
    #: who issues the statements (the command log's issuer), recorded on skipped bad records
    issuer: str = ""
    #: queries a SNAPSHOT or RESTORE of this script names (one each per script)
    snapshotted: set[str] = field(default_factory=set)
    #: the bounds statements are planned within (windows, INSERT VALUES and pull queries)
    limits: Limits = field(default_factory=Limits.from_env)
    #: how DESCRIBE ... STATE reads a checkpoint's state rows (the engine hands in the
    #: runtime's Spark reader; the planner never starts Spark itself)
    read_state: StateReader | None = None
    #: the engine's own Kafka client settings (INSERT VALUES, PRINT and pull queries on topics)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)

    # -- lookups -------------------------------------------------------------------------
    def query_named(self, query_id: str, stmt: st.Statement) -> QueryInfo:
        """The query ``query_id``, or NotFoundError listing the known ones."""
        query = self.snapshot.queries.get(query_id)
        if query is None:
            known = ", ".join(sorted(self.snapshot.queries)) or "none"
            raise NotFoundError(
                f"no query {query_id!r} (known queries: {known})", line=stmt.line, col=stmt.col, text=stmt.text
            )
        return query

    def unknown(self, name: str, stmt: st.Statement) -> NotFoundError:
        known = ", ".join(sorted(self.snapshot.sources)) or "none"
        return NotFoundError(
            f"unknown stream or table {name!r} (known: {known})", line=stmt.line, col=stmt.col, text=stmt.text
        )

    def kafka_settings(self, what: str, stmt: st.Statement) -> KafkaSettings:
        """The engine's Kafka settings, or the statement's error saying how to give them."""
        try:
            return self.kafka.require(what)
        except StateError as e:
            raise state_error_at(e.message, stmt) from None

    def source_read(self, name: str, stmt: st.Statement, what: str) -> SourceInfo:
        """Stream or table ``name`` that ``stmt`` reads or writes without Spark (``what`` it
        does: INSERT INTO, PRINT, a push query), with the engine's Kafka settings checked
        when it is on a Kafka topic; NotFoundError naming the known ones otherwise."""
        src = self.snapshot.sources.get(name)
        if src is None:
            raise self.unknown(name, stmt)
        if src.kafka_topic:
            self.kafka_settings(f"{what} {src.name} (Kafka topic {src.kafka_topic!r})", stmt)
        return src

    def if_not_exists(self, stmt: st.CreateSource | st.CreateAsSelect) -> Step | None:
        """``CREATE ... IF NOT EXISTS`` of a name that exists: nothing to do (as in ksqlDB),
        unless the name is the other kind of source."""
        existing = self.snapshot.sources.get(stmt.name) if stmt.if_not_exists else None
        if existing is None:
            return None
        if existing.kind != stmt.kind:
            raise error_at(f"a {existing.kind.lower()} named {stmt.name} already exists", stmt)
        return Step(
            Result(stmt.text, f"{stmt.kind.capitalize()} {stmt.name} exists; nothing created", action="unchanged")
        )

    # -- sources and queries of the snapshot -----------------------------------------
    def check_new_name(self, name: str, stmt: st.Statement) -> None:
        if name in self.snapshot.sources:
            existing = self.snapshot.sources[name]
            raise error_at(f"a {existing.kind.lower()} named {name} already exists", stmt)

    def declared(self, name: str, kind: str, stmt: st.Statement, verb: str) -> SourceInfo:
        src = self.snapshot.sources.get(name)
        if src is None:
            raise self.unknown(name, stmt)
        if src.kind != kind:
            raise error_at(f"{name} is a {src.kind}, not a {kind}", stmt)
        if src.writer_query:
            raise error_at(
                f"{verb} {name}: it is written by query {src.writer_query}; only "
                f"declared streams and tables accept this",
                stmt,
            )
        return src

    def rate_limit_problem(self, limit: RateLimit, plan: StreamingPlan, sources: Sequence[str]) -> str | None:
        """Why ``limit`` cannot apply to a query reading ``sources`` as ``plan`` does (it limits
        the streams it reads of one kind: Kafka topics or file topics), or None."""
        streamed = [self.snapshot.sources[n] for n in sources if n not in plan.static_tables]
        if any(bool(src.kafka_topic) == limit.kafka for src in streamed):
            return None
        read = ", ".join(f"{src.name} ({'Kafka topic' if src.kafka_topic else 'file topic'})" for src in streamed)
        other = next(r for r in RateLimit if r is not limit)
        return f"{limit} limits what a query reads of {limit.sources}, and this one streams {read}: use {other}"

    def readers(self, source: str) -> list[QueryInfo]:
        return sorted(
            (
                q
                for q in self.snapshot.queries.values()
                if source in q.sources and q.desired_state != DesiredState.TERMINATED
            ),
            key=lambda q: q.seq,
        )

    def schemas(self) -> dict[str, SourceSchema]:
        return {name: src.schema for name, src in self.snapshot.sources.items()}

    def analyze_pull(self, stmt: st.PullQuery | st.PushQuery) -> SelectAnalysis:
        """A pull (or push) query's SELECT, checked against the catalog (it never runs on Spark)."""
        if stmt.window or stmt.within:
            raise error_at("WINDOW and WITHIN belong in persistent queries, not pull queries", stmt)
        schemas = {name: src.columns for name, src in self.snapshot.sources.items()}
        timestamps = {name: src.schema.event_time for name, src in self.snapshot.sources.items()}
        select = cast(exp.Select, stmt.select)  # the parser reads one SELECT (parse_select)
        return analyze_select(select, schemas, stmt, persistent=False, timestamps=timestamps)

    def query_settings(self, stmt: st.Statement) -> dict[str, str]:
        """The settings a persistent query of ``stmt`` records: the session's, with the
        statement's ``WITH (start = ...)`` taking precedence over ``auto.offset.reset`` and
        ``starting.timestamp``."""
        start = getattr(stmt, "properties", {}).get(START)
        try:
            return with_start(self.settings, start)
        except ValueError as e:
            raise error_at(
                f"property {START} = {start!r}: {e}", stmt, at=getattr(stmt, "property_at", {}).get(START)
            ) from None

    def analyze_query(self, stmt: st.CreateAsSelect | st.InsertSelect, spellings=()) -> SelectAnalysis:
        """A persistent query's SELECT (:func:`analyze_query`), checked against what Structured
        Streaming can run (:mod:`.feasibility`)."""

        def feasible(analysis: SelectAnalysis) -> None:
            settings = self.query_settings(stmt)
            query = feasibility.Query(stmt, analysis, self.snapshot.sources, settings, limits=self.limits)
            found = feasibility.first_finding(query)
            if found:
                rule, problem = found
                at = stmt.window_at if rule.clause == "WINDOW" else None
                if at is None:
                    raise error_at(problem, stmt)
                raise ValidationError(problem, line=at[0], col=at[1], text=stmt.text.strip()[:120])

        return analyze_query(stmt, self.schemas(), spellings=spellings, check=feasible)

    # -- Kafka -----------------------------------------------------------------------
    def check_kafka_runtimes(self, stmt, topic: str, *, query: bool) -> None:
        """Refuse a CREATE naming Kafka topic ``topic`` when the pipeline has live runtimes
        and none has Kafka bootstrap servers (a query's sink: its runtime would fail on it; a
        declared source: unless the engine has Kafka settings, with which INSERT VALUES,
        PRINT and pull queries reach the topic). With no live runtime it is accepted: one
        started later may have them. A runtime of a release that does not say counts as one
        that has them."""
        now = time.time()
        live = [
            r
            for r in self.catalog.runtimes.all(self.conn)
            if r["pipeline"] == self.pipeline
            and r["stopped_at"] is None
            and now - r["heartbeat_at"] <= RUNTIME_STALE_AFTER
        ]
        if not live or any(r["kafka"] is not False for r in live) or (not query and self.kafka.given):
            return
        engine = "" if query else "; or give this engine Kafka settings ($STREAMQL_KAFKA_PROPERTIES)"
        raise state_error_at(
            f"CREATE {stmt.kind} {stmt.name} names Kafka topic {topic!r}, and no live runtime of pipeline "
            f"{self.pipeline!r} has Kafka settings ({', '.join(sorted(r['id'] for r in live))}): restart it with "
            f"--conf spark.streamql.kafka.bootstrap.servers=HOST:9092 (secrets in ${kafka_properties.PROPERTIES_ENV} "
            f"or the file ${kafka_properties.PROPERTIES_FILE_ENV} names; with SubmitRuntimeOperator, the streamql "
            f"connection's kafka_bootstrap_servers and kafka_properties){engine}",
            stmt,
        )

    # -- the source a CREATE declares (or a query writes) ----------------------------
    def source(self, stmt, columns, writer: str | None, replacing: SourceInfo | None = None) -> SourceInfo:
        props, problem = properties.with_format(dict(stmt.properties))
        if problem:
            raise error_at(problem, stmt, at=stmt.property_at.get("format"))
        for key in props:
            if key.startswith(KAFKA_CONNECTION_SETTINGS):
                raise error_at(
                    f"property {key!r}: Kafka connection settings come from the "
                    f"runtime's configuration (spark.streamql.kafka.*), never from SQL",
                    stmt,
                    at=stmt.property_at.get(key),
                )
        for key, problem in properties.problems(props, columns, kafka="kafka_topic" in props):
            raise error_at(problem, stmt, at=stmt.property_at.get(key) or stmt.property_at.get("format"))
        if "kafka_topic" in props:
            if "path" in props:
                raise error_at("give either kafka_topic or path, not both", stmt)
            path = f"kafka:{props['kafka_topic']}"
            self.check_kafka_runtimes(stmt, props["kafka_topic"], query=writer is not None)
        else:
            others = {
                s.name: s.path
                for s in self.snapshot.sources.values()
                if s is not replacing and s.name != stmt.name and not s.kafka_topic
            }
            try:
                path = self.layout.source_path(props.get("path", stmt.name), others)
            except ValidationError as e:
                raise error_at(f"{stmt.name}: {e.message}", stmt) from None
        if "timestamp" in props:
            ts = next((c for c in columns if c.name.lower() == props["timestamp"].lower()), None)
            text = ts is not None and ts.type.is_text and "timestamp_format" in props  # ksqlDB's VARCHAR time
            if ts is None or (ts.type.name is not TypeName.TIMESTAMP and not text):
                raise error_at(
                    f"timestamp = {props['timestamp']!r} must name a TIMESTAMP column of {stmt.name}, or a "
                    f"STRING one with timestamp_format" + ("" if ts is None else f" ({ts.name} is {ts.type})"),
                    stmt,
                    at=stmt.property_at.get("timestamp"),
                )
            props["timestamp"] = ts.name
        elif "timestamp_format" in props:
            raise error_at("timestamp_format needs timestamp = '<column>'", stmt)
        clash = next((s.name for s in self.snapshot.sources.values() if s.path == path and s is not replacing), None)
        if clash:
            raise error_at(f"path {path!r} is already used by {clash}", stmt)
        fmt = str(props.get("value_format", "JSON")).upper()
        found = kafka_values.problem(fmt, props, columns, kafka="kafka_topic" in props)
        if found:
            raise error_at(f"{stmt.name}: {found[1]}", stmt, at=stmt.property_at.get(found[0]))
        if "value_delimiter" in props and fmt != "DELIMITED":
            raise error_at(
                f"value_delimiter is for value_format='DELIMITED', not {fmt}",
                stmt,
                at=stmt.property_at.get("value_delimiter"),
            )
        problem = topics.format_problem(fmt, columns)
        if problem:
            raise error_at(f"{stmt.name}: {problem}", stmt)
        return SourceInfo(stmt.name, stmt.kind, list(columns), props, fmt, path, writer)
