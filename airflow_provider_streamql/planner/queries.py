"""Persistent queries: ``CREATE STREAM|TABLE ... AS SELECT``, its ``CREATE OR REPLACE``
(validated by :meth:`PersistentQueries.check_replace` against the query's last version) and
``INSERT INTO ... SELECT``. Each is compiled by the one compile step
(:mod:`..language.compiler`); :meth:`~PersistentQueries.sink` decides the output it writes,
:meth:`~PersistentQueries.query_info` makes the catalog record of a compiled query. The
families that make new versions of queries (sources widening a column their readers read,
shadows) hold this one and call those.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from sqlalchemy import Connection

from ..catalog import ERROR_POLICIES, QueryInfo, SourceInfo
from ..catalog.model import BATCH_FILES, INTERNAL_PROPERTIES, MIXED_SPELLINGS
from ..catalog.states import DesiredState, QueryState
from ..errors import StateError, ValidationError
from ..language import statements as st
from ..language.analyzer import SelectAnalysis
from ..language.compiler import QUERY_KINDS, CompiledQuery, compile_query
from ..language.expectations import SETTINGS as EXPECTATION
from ..language.expectations import Recorded
from ..language.rates import RateLimit, RateLimits, rate_problem
from ..language.starting import OFFSET_RESET, STARTING_TIMESTAMP
from ..language.types import TypeName
from ..results import Result
from ..storage import topics
from ..storage.state import recorded_state
from ..upgrades import Code, Finding, Report, UpgradeKind, Verdict, validate_upgrade
from .planning import Planning, error_at, unchanged
from .properties import (
    QUERY_PROPERTIES,
    TOPIC_PROPERTY,
    PropertyProblem,
    dead_letter_topic_problem,
    expectation_settings,
)
from .redeploys import same_query, written_alike
from .step import Step

#: what :meth:`PersistentQueries.check_replace` returns: (current query, report, new version,
#: new sink)
Replacement = tuple[QueryInfo, Report, QueryInfo, SourceInfo]


class PersistentQueries:
    """The statements that create or change a persistent query, planned in ``planning``."""

    def __init__(self, planning: Planning):
        self.planning = planning

    def create_as_select(self, stmt: st.CreateAsSelect) -> Step:
        existing = self.planning.snapshot.sources.get(stmt.name)
        if (exists := self.planning.if_not_exists(stmt)) is not None:
            return exists
        checked = None
        if self.planning.skip_unchanged and existing is not None and existing.writer_query:
            current = self.planning.snapshot.queries[existing.writer_query]
            try:
                checked = self.check_replace(stmt)
            except ValidationError:
                # a query running as written is left as it is, even where today's rules (a
                # bound, a feasibility rule) would refuse the statement if it were new
                if written_alike(current, stmt, self.planning.query_settings(stmt)):
                    return unchanged(stmt, f"query {current.id}", current)
                raise
            current, _report, new, sink = checked
            if same_query(current, existing, new, sink, stmt):
                return unchanged(stmt, f"query {current.id}", current)
        if stmt.or_replace and existing is not None:
            return self.replace_in_place(stmt, checked or self.check_replace(stmt))
        self.planning.check_new_name(stmt.name, stmt)
        analysis = self.planning.analyze_query(stmt)
        seq = self.planning.snapshot.next_seq
        query_id = f"{QUERY_KINDS[stmt.kind]}_{stmt.name}_{seq}"
        sink = self.sink(stmt, analysis, query_id)
        query = self.query_info(query_id, seq, sink, self.compile(stmt, analysis, sink, query_id), stmt)
        self.planning.snapshot.sources[sink.name] = sink

        def write(conn: Connection) -> None:
            self.planning.catalog.insert_source(conn, sink)
            self.planning.catalog.insert_query(conn, query, sink)

        return Step(
            Result(
                stmt.text,
                f"Created query {query_id} writing {sink.kind.lower()} {sink.name}",
                query_id=query_id,
                waits=[(query_id, QueryState.RUNNING)],
                version=1,
                action="created",
            ),
            write=write,
        )

    def check_replace(self, stmt: st.CreateAsSelect) -> Replacement:
        """Validate ``CREATE OR REPLACE`` of an existing query's sink against the query's last
        recorded version. Returns (current query, report, new version, new sink); writes nothing."""
        old_sink = self.planning.snapshot.sources.get(stmt.name)
        if old_sink is None:
            raise self.planning.unknown(stmt.name, stmt)
        if old_sink.writer_query is None:
            raise error_at(
                f"{stmt.name} is a declared {old_sink.kind.lower()}, not the output of "
                f"a query; replace it with CREATE OR REPLACE {old_sink.kind} "
                f"{stmt.name} (columns ...)",
                stmt,
            )
        current = self.planning.snapshot.queries[old_sink.writer_query]
        analysis = self.planning.analyze_query(stmt, spellings=old_sink.columns)  # its readers read these
        sink = self.sink(stmt, analysis, current.id, replacing=old_sink)
        version = max(self.planning.catalog.next_version(self.planning.conn, current.id), current.version + 1)
        compiled = self.compile(stmt, analysis, sink, current.id, named=current.shape.named)
        new = self.query_info(current.id, current.seq, sink, compiled, stmt, version=version, register=False)
        # the query's own settings (on_error, dead_letter_topic) are kept unless the statement
        # or the session gives them anew; its expectation is part of its definition: kept only if restated
        kept = QUERY_PROPERTIES - set(EXPECTATION)
        new.settings.update({k: v for k, v in current.settings.items() if k in kept and k not in new.settings})
        # where the checkpoint started is the query's: a version on the same checkpoint resumes
        # from its offsets (a replacing upgrade, a new query, starts where the statement says)
        for setting in (OFFSET_RESET, STARTING_TIMESTAMP):
            new.settings.pop(setting, None)
            if setting in current.settings:
                new.settings[setting] = current.settings[setting]
        # a paused query stays paused (RESUME it when ready); a terminated one restarts
        new.desired_state = (
            DesiredState.PAUSED if current.desired_state == DesiredState.PAUSED else DesiredState.RUNNING
        )
        readers = sorted(
            q.id
            for q in self.planning.snapshot.queries.values()
            if sink.name in q.sources and q.desired_state != DesiredState.TERMINATED
        )
        policies = (current.settings.get("on_error"), new.settings.get("on_error"))
        rates = (RateLimits.of(current.settings), RateLimits.of(new.settings))
        report = validate_upgrade(
            current.id,
            current.shape,
            new.shape,
            state_key=_state_key(current),
            downstream=readers,
            policies=policies,
            rates=rates,
            expectations=(Recorded.of(current.settings), Recorded.of(new.settings)),
        )
        writers = [
            q.id
            for q in self.planning.snapshot.queries.values()
            if q.sink == sink.name and q.id != current.id and q.desired_state != DesiredState.TERMINATED
        ]
        if writers:
            report.add(
                Finding(
                    Code.MULTIPLE_WRITERS,
                    "INSERT INTO",
                    UpgradeKind.UNSUPPORTED,
                    Verdict.REJECTED,
                    f"{sink.name} is also written by {', '.join(writers)}; replacing one writer of a "
                    f"shared output is not supported (as in ksqlDB, whose CREATE OR REPLACE refuses a "
                    f"sink INSERT INTO queries write: their SELECTs would no longer match a changed "
                    f"output); TERMINATE them first, or declare the stream and write it only with "
                    f"INSERT INTO ... SELECT",
                )
            )
        return current, report, new, sink

    def replace_in_place(self, stmt: st.CreateAsSelect, checked: Replacement) -> Step:
        """Apply a replacement ``check_replace`` validated, if it can be done in place."""
        current, report, new, sink = checked
        if report.verdict != "IN_PLACE":
            reasons = "; ".join(f"{f.code}: {f.message}" for f in report.findings if f.verdict == report.verdict)
            error = ValidationError if report.verdict == "REJECTED" else StateError
            hint = (
                ""
                if report.verdict == "REJECTED"
                else (
                    " — this needs a new checkpoint: use Engine.replace(sql, start_from='earliest'), "
                    "or TERMINATE, DROP and create it again"
                )
            )
            raise error(
                f"CREATE OR REPLACE of {current.id} is {report.verdict}: {reasons}{hint}",
                line=stmt.line,
                col=stmt.col,
                text=stmt.text.strip()[:120],
            )
        self.planning.snapshot.queries[new.id] = new
        self.planning.snapshot.sources[sink.name] = sink
        return Step(
            Result(
                stmt.text,
                f"Replaced {new.id} in place: version {new.version} ({', '.join(report.kinds)}){report.policy_note}",
                query_id=new.id,
                waits=[(new.id, new.desired_state)],
                report=report.to_dict(),
                version=new.version,
                action="replaced",
            ),
            write=lambda conn: self.planning.catalog.add_version(conn, new, sink, report.to_dict()),
        )

    def sink(
        self, stmt: st.CreateAsSelect, analysis: SelectAnalysis, query_id: str, replacing: SourceInfo | None = None
    ) -> SourceInfo:
        """The output a query writes. A replacement keeps the old sink's WITH properties unless
        it restates them."""
        if replacing is not None:  # the planner's own properties: kept below, never restated
            kept = {k: v for k, v in replacing.properties.items() if k not in INTERNAL_PROPERTIES}
            stmt = replace(stmt, properties={**kept, **stmt.properties})
        # on_error and dead_letter_topic belong to the query, not to its output
        stmt = replace(stmt, properties={k: v for k, v in stmt.properties.items() if k not in QUERY_PROPERTIES})
        sink = self.planning.source(stmt, analysis.columns, writer=query_id, replacing=replacing)
        if replacing is not None and replacing.batch_files:
            sink.properties[BATCH_FILES] = True  # how an output is written never changes
        if replacing is not None and replacing.mixed_spellings:
            sink.properties[MIXED_SPELLINGS] = True  # what its files hold stays as it is
        elif (
            replacing is None
            and sink.kind == "STREAM"
            and not sink.kafka_topic
            and not os.path.isdir(os.path.join(sink.path, topics.SINK_LOG))  # a dropped sink's log: Spark's sink
        ):
            sink.properties[BATCH_FILES] = True  # whole renamed files: INSERT INTO ... SELECT may write it too
        inherited = self.planning.snapshot.sources[analysis.sources[0]].timestamp_column
        if (
            "timestamp" not in sink.properties
            and stmt.window is None
            and any(c.name == inherited and c.type.name is TypeName.TIMESTAMP for c in sink.columns)
        ):
            sink.properties["timestamp"] = inherited  # the event time passes through unchanged
        return sink

    def insert_select(self, stmt: st.InsertSelect) -> Step:
        written = self.planning.snapshot.sources.get(stmt.target)
        if written is not None and written.writer_query and written.kind == "STREAM" and written.batch_files:
            target = written  # a CREATE STREAM AS SELECT output written as whole files: several writers
        elif written is not None and written.writer_query and written.kind == "STREAM" and not written.kafka_topic:
            raise error_at(_query_output_refusal(written), stmt)
        else:
            target = self.planning.declared(stmt.target, "STREAM", stmt, "INSERT INTO")
        analysis = self.planning.analyze_query(stmt)
        if analysis.aggregate:
            raise error_at("INSERT INTO ... SELECT cannot aggregate; write a TABLE instead", stmt)
        got = [(c.name.lower(), c.type) for c in analysis.columns]
        want = [(c.name.lower(), c.type) for c in target.columns]
        if got != want:
            raise error_at(f"the SELECT's columns {got} do not match {target.name}'s {want}", stmt)
        analysis = analysis.respelled(target.columns)  # written as the target's readers read it
        if self.planning.skip_unchanged:
            for q in self.planning.snapshot.queries.values():
                if (
                    q.kind == "INSERT"
                    and q.sink == target.name
                    and q.desired_state != DesiredState.TERMINATED
                    and (
                        self.compile(stmt, analysis, target, q.id, kind="INSERT").plan.spark_sql == q.select_sql
                        or written_alike(q, stmt, self.planning.query_settings(stmt))
                    )
                ):
                    return unchanged(stmt, f"query {q.id}", q)
        seq = self.planning.snapshot.next_seq
        query_id = f"INSERTQUERY_{seq}"
        query = self.query_info(
            query_id, seq, target, self.compile(stmt, analysis, target, query_id, kind="INSERT"), stmt
        )
        return Step(
            Result(
                stmt.text,
                f"Created query {query.id} writing stream {target.name}",
                query_id=query.id,
                waits=[(query.id, QueryState.RUNNING)],
                version=1,
                action="created",
            ),
            write=lambda conn: self.planning.catalog.insert_query(conn, query, target),
        )

    def compile(
        self,
        stmt: st.CreateAsSelect | st.InsertSelect,
        analysis: SelectAnalysis,
        sink: SourceInfo,
        query_id: str,
        *,
        kind: str | None = None,
        named: bool = True,
    ) -> CompiledQuery:
        """The compile step (:func:`compile_query`) over the snapshot's sources; ``named``:
        its streams are named for Spark's source evolution (every new query; a version keeps
        its query's choice)."""
        return compile_query(
            stmt,
            analysis,
            self.planning.schemas(),
            sink.as_sink,
            query_id=query_id,
            kind=kind or QUERY_KINDS[getattr(stmt, "kind", "STREAM")],
            named=named,
            offset_reset=self.planning.query_settings(stmt).get(OFFSET_RESET, "latest"),
        )

    def query_info(
        self,
        query_id: str,
        seq: int,
        sink: SourceInfo,
        compiled: CompiledQuery,
        stmt,
        *,
        version: int = 1,
        register: bool = True,
    ) -> QueryInfo:
        """The catalog record of a compiled query, new or a new version."""
        now = time.time()
        settings = self.planning.query_settings(stmt)
        policy = getattr(stmt, "properties", {}).get("on_error")
        property_at = getattr(stmt, "property_at", {})
        if policy is not None:
            if str(policy).upper() not in ERROR_POLICIES:
                raise error_at(
                    f"on_error must be one of {', '.join(ERROR_POLICIES)}, not {policy!r}",
                    stmt,
                    at=property_at.get("on_error"),
                )
            settings["on_error"] = str(policy).upper()
        if (topic := getattr(stmt, "properties", {}).get(TOPIC_PROPERTY)) is not None:
            if problem := dead_letter_topic_problem(query_id, topic, compiled, self.planning.snapshot.sources, sink):
                raise error_at(
                    f"property {TOPIC_PROPERTY} = {topic!r}: {problem}", stmt, at=property_at.get(TOPIC_PROPERTY)
                )
            settings[TOPIC_PROPERTY] = topic
        for limit in RateLimit:
            if (value := getattr(stmt, "properties", {}).get(limit.value)) is not None:
                if problem := rate_problem(limit, value) or self.planning.rate_limit_problem(
                    limit, compiled.plan, compiled.sources
                ):
                    raise error_at(f"property {limit} = {value!r}: {problem}", stmt)
                settings[limit.value] = value
        try:
            settings.update(expectation_settings(getattr(stmt, "properties", {}), sink))
        except PropertyProblem as e:
            raise error_at(str(e), stmt, at=property_at.get(e.name)) from None
        query = QueryInfo(
            id=query_id,
            seq=seq,
            pipeline=self.planning.pipeline,
            kind=compiled.shape.kind,
            sink=sink.name,
            sources=list(compiled.sources),
            sql=stmt.text.strip(),
            select_sql=compiled.plan.spark_sql,
            settings=settings,
            plan=compiled.plan,
            shape=compiled.shape,
            version=version,
            checkpoint=self.planning.layout.checkpoint(query_id),
            desired_state=DesiredState.RUNNING,
            observed_state=QueryState.PENDING,
            created_at=now,
            updated_at=now,
        )
        if register:
            self.planning.snapshot.queries[query_id] = query
            self.planning.snapshot.next_seq += 1
        return query


def _query_output_refusal(target: SourceInfo) -> str:
    """Why INSERT INTO ... SELECT cannot write the output of a CREATE STREAM AS SELECT created
    before several writers were possible (no :data:`BATCH_FILES`), and what to do instead."""
    columns = ", ".join(f"{c.name} {c.type}" for c in target.columns)
    return (
        f"INSERT INTO {target.name} ... SELECT: {target.name} is the output of query "
        f"{target.writer_query}, created before several writers were possible: a Spark file sink "
        f"whose readers see only the files listed in its _spark_metadata log, which that query alone "
        f"writes; another query's rows would never be read. Create it again (DROP STREAM "
        f"{target.name} DELETE TOPIC, then CREATE STREAM {target.name} AS SELECT ...: a new output "
        f"takes several writers), or declare the stream and write it with one INSERT INTO ... SELECT "
        f"per input: CREATE STREAM <merged> ({columns}) WITH (...); INSERT INTO <merged> SELECT ... "
        f"FROM <each input>"
    )


def _state_key(query: QueryInfo) -> list[tuple[str, str]] | None:
    """The key schema of the aggregation state the query's checkpoint holds, as Spark
    recorded it (None when there is none): the validator trusts it over the statement text."""
    for op in recorded_state(query.checkpoint):
        if op.name == "stateStoreSave":
            return next((store.key for store in op.stores if store.key), None)
    return None
