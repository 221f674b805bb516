"""Statements -> checked changes to the catalog.

``Planner.plan`` validates one statement against a :class:`Snapshot` and applies its effect
to that snapshot, so the next statement of the script is checked against the catalog as it
would be. Nothing touches the database until every statement of a script has been planned.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from sqlalchemy import Connection

from ..storage import topics
from ..catalog import ERROR_POLICIES, Catalog, QueryInfo, Snapshot, SourceInfo
from ..storage.deadletter import append_dead_letters, dead_letter_source
from ..errors import NotFoundError, StateError, ValidationError
from ..language import parse_one
from ..language import statements as st
from ..language.analyzer import SelectAnalysis, analyze_select
from ..language.streaming import plan_streaming
from ..results import Result
from ..storage.layout import Layout, MovedAside, query_folders
from ..upgrades import Finding, Report, validate_upgrade

# WITH (...) property -> check of its value (None: accepted as is).
SOURCE_PROPERTIES: dict[str, Callable[[Any], str | None] | None] = {
    "path": None,  # checked and resolved by the storage layout
    "value_format": lambda v: None if str(v).upper() in topics.FORMATS
    else f"must be one of {', '.join(topics.FORMATS)}",
    "kafka_topic": lambda v: None if isinstance(v, str) and v and "," not in v
    else "must name one Kafka topic",
    "timestamp": lambda v: None if isinstance(v, str) and v else "must name a TIMESTAMP column",
    "timestamp_format": lambda v: None if isinstance(v, str) and v
    else "must be a Spark datetime pattern such as 'yyyy-MM-dd HH:mm:ss'",
}
# a declared column type -> the types CREATE OR REPLACE may widen it to (every value of the
# old type reads the same under the new one)
WIDENINGS = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"),
    "SMALLINT": ("INT", "BIGINT", "FLOAT", "DOUBLE"),
    "INT": ("BIGINT", "DOUBLE"),
    "FLOAT": ("DOUBLE",),
}
# WITH properties that would put Kafka connection settings in SQL text
KAFKA_CONNECTION_SETTINGS = ("kafka.", "bootstrap", "security", "sasl", "ssl")
# SET 'key' -> allowed values.
SESSION_PROPERTIES = {"auto.offset.reset": ("earliest", "latest")}
QUERY_PREFIX = {"STREAM": "CSAS", "TABLE": "CTAS"}
CONTROL_TARGET = {"PAUSE": "PAUSED", "RESUME": "RUNNING", "TERMINATE": "TERMINATED"}


#: a file effect: done inside the catalog transaction, it returns how to undo it
FileEffect = Callable[[], Callable[[], None] | None]


@dataclass
class Step:
    """A planned statement, in three phases: its catalog rows, then its file effects and
    reads (still inside the transaction, under the catalog's write lock, after every check
    passed; an effect returns its undo in case the transaction fails), then work after the
    commit (deleting what was moved aside)."""

    result: Result
    write: Callable[[Connection], None] | None = None
    files: FileEffect | None = None
    after_commit: Callable[[Result], None] | None = None
    log: bool = True


@dataclass
class Planner:
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

    def plan(self, stmt: st.Statement) -> Step:
        handler = getattr(self, "_" + type(stmt).__name__)
        step = handler(stmt)
        step.log = stmt.writes and step.result.action != "unchanged"
        return step

    # -- sources -------------------------------------------------------------------
    def _CreateSource(self, stmt: st.CreateSource) -> Step:
        existing = self.snapshot.sources.get(stmt.name)
        if self.skip_unchanged and existing is not None and self._same_source(existing, stmt):
            return self._unchanged(stmt, f"{stmt.kind.lower()} {stmt.name}")
        if stmt.or_replace and existing is not None:
            return self._replace_source(stmt)
        self._check_new_name(stmt.name, stmt)
        names = [c.name.lower() for c in stmt.columns]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise self._error(f"column {dup!r} is declared twice", stmt)
        if stmt.kind == "TABLE" and not any(c.key for c in stmt.columns):
            raise self._error(f"table {stmt.name} needs a PRIMARY KEY column", stmt)
        src = self._source(stmt, stmt.columns, writer=None)
        self.snapshot.sources[src.name] = src
        return Step(Result(stmt.text, f"Created {stmt.kind.lower()} {src.name} at {src.path}",
                           action="created"),
                    write=lambda conn: self.catalog.insert_source(conn, src),
                    files=None if src.kafka_topic else lambda: _make_folder(src.path))

    def _replace_source(self, stmt: st.CreateSource) -> Step:
        """``CREATE OR REPLACE STREAM s (...)`` of a declared source: columns may be appended
        (as with ALTER ... ADD COLUMN) and existing ones widened (INT to BIGINT or DOUBLE, ...),
        e.g. to read a record that held a query. Every query reading the source gets a new
        version that reads it with the new columns, validated like any CREATE OR REPLACE: if
        one cannot take it in place, nothing is replaced."""
        old = self._declared(stmt.name, stmt.kind, stmt, f"CREATE OR REPLACE {stmt.kind}")
        widened = []
        for was, now in zip(old.columns, stmt.columns):
            same = (was.name.lower(), was.key) == (now.name.lower(), now.key)
            if same and was.type != now.type and now.type.upper() in WIDENINGS.get(was.type.upper(), ()):
                widened.append((was, now))
            elif not same or was.type != now.type:
                raise self._error(f"CREATE OR REPLACE {stmt.kind} {stmt.name} may only append columns "
                                  f"to ({', '.join(f'{c.name} {c.type}' for c in old.columns)}) and widen "
                                  f"their types ({_widenings()}); {now.name} {now.type} does not fit", stmt)
        if len(stmt.columns) < len(old.columns):
            raise self._error(f"CREATE OR REPLACE {stmt.kind} {stmt.name} cannot remove columns "
                              f"({', '.join(c.name for c in old.columns[len(stmt.columns):])})", stmt)
        if stmt.properties and {**old.properties, **stmt.properties} != old.properties:
            raise self._error(f"CREATE OR REPLACE {stmt.kind} {stmt.name} cannot change its WITH "
                              f"properties {old.properties}", stmt)
        added = stmt.columns[len(old.columns):]
        if any(c.key for c in added):
            raise self._error("key columns cannot be added", stmt)
        new = replace(old, columns=list(stmt.columns))
        self.snapshot.sources[old.name] = new
        versions = [self._reread(reader, stmt, widened) for reader in self._readers(old.name)] if widened else []
        message = f"Replaced {stmt.kind.lower()} {old.name}: {len(added)} column(s) appended" + (
            f", {', '.join(f'{w.name} widened to {n.type}' for w, n in widened)}; new versions of "
            f"{', '.join(f'{q.id} (v{q.version})' for q, _s, _r in versions) or 'no query'}" if widened else "")

        def write(conn: Connection) -> None:
            self.catalog.update_source(conn, new)
            for query, sink, report in versions:
                self.catalog.add_version(conn, query, sink, report.to_dict())
        return Step(Result(stmt.text, message, action="replaced",
                           waits=[(q.id, q.desired_state) for q, _s, _r in versions]), write=write)

    def _readers(self, source: str) -> list[QueryInfo]:
        return sorted((q for q in self.snapshot.queries.values()
                       if source in q.sources and q.desired_state != "TERMINATED"), key=lambda q: q.seq)

    def _reread(self, reader: QueryInfo, stmt: st.CreateSource, widened) -> tuple[QueryInfo, SourceInfo, Report]:
        """A new version of ``reader`` over the widened source, or the reason it cannot be."""
        what = ", ".join(f"{stmt.name}.{w.name} {w.type} -> {n.type}" for w, n in widened)
        definition = parse_one(reader.sql)
        if not isinstance(definition, st.CreateAsSelect):
            raise self._error(f"cannot widen {what}: {reader.id} is an INSERT INTO query; "
                              f"TERMINATE it first", stmt)
        _current, report, new, sink = self.check_replace(definition)
        if report.verdict != "IN_PLACE":
            reasons = "; ".join(f"{f.code}: {f.message}" for f in report.findings if f.verdict != "IN_PLACE")
            raise self._error(f"cannot widen {what}: {reader.id} reads it and cannot take the change "
                              f"in place ({report.verdict}: {reasons})", stmt)
        report.findings.append(Finding("SOURCE_COLUMN_WIDENED", "FROM", "schema evolution", "IN_PLACE",
                                       f"{what}: records are read with the wider type"))
        self.snapshot.queries[new.id] = new
        self.snapshot.sources[sink.name] = sink
        return new, sink, report

    def _AlterSource(self, stmt: st.AlterSource) -> Step:
        src = self._declared(stmt.name, stmt.kind, stmt, "ALTER")
        if self.skip_unchanged and set(_column_tuples(stmt.add_columns)) <= set(_column_tuples(src.columns)):
            return self._unchanged(stmt, f"{src.kind.lower()} {src.name}")
        existing = {c.name.lower() for c in src.columns}
        for c in stmt.add_columns:
            if c.name.lower() in existing or c.key:
                raise self._error(f"cannot add column {c.name!r}: "
                                  + ("it exists" if c.name.lower() in existing else "keys cannot be added"), stmt)
            existing.add(c.name.lower())
        new = replace(src, columns=src.columns + list(stmt.add_columns))
        self.snapshot.sources[src.name] = new
        return Step(Result(stmt.text, f"Added {len(stmt.add_columns)} column(s) to {src.name}",
                           action="altered"),
                    write=lambda conn: self.catalog.update_source(conn, new))

    def _DropSource(self, stmt: st.DropSource) -> Step:
        src = self.snapshot.sources.get(stmt.name)
        if src is None:
            if stmt.if_exists:
                return Step(Result(stmt.text, f"{stmt.name} does not exist; nothing dropped"))
            raise NotFoundError(f"{stmt.kind.lower()} {stmt.name!r} does not exist",
                                line=stmt.line, col=stmt.col, text=stmt.text)
        if src.kind != stmt.kind:
            raise self._error(f"{stmt.name} is a {src.kind}, not a {stmt.kind}", stmt)
        users = [q.id for q in self.snapshot.queries.values() if q.desired_state != "TERMINATED"
                 and (q.sink == src.name or src.name in q.sources)]
        if users:
            raise StateError(f"cannot drop {src.name}: queries {', '.join(users)} use it; "
                             f"TERMINATE them first", line=stmt.line, col=stmt.col, text=stmt.text)
        if stmt.delete_topic and src.kafka_topic:
            raise self._error(f"DELETE TOPIC deletes file topics; streamql does not delete the "
                              f"Kafka topic {src.kafka_topic!r} (drop without it)", stmt)
        if stmt.delete_topic and not self.layout.may_delete(src.path):
            raise self._error(f"DELETE TOPIC deletes only topics under {self.layout.topics!r} or an "
                              f"allowed root; {src.path!r} is outside them (drop without DELETE TOPIC)", stmt)
        del self.snapshot.sources[src.name]
        # with its data go the checkpoints and snapshots of the (terminated) queries that wrote it
        folders = [src.path] + [path for q in self.snapshot.queries.values() if q.sink == src.name
                                for path in query_folders(q.checkpoint) if self.layout.may_delete(path)]
        moved: list[MovedAside] = []

        def move_aside() -> Callable[[], None]:
            # under the catalog lock: a statement committed after this one (CREATE x; INSERT
            # INTO x ...) finds the names free, and its data is never what gets deleted
            moved.append(MovedAside(folders))
            return moved[-1].restore
        return Step(Result(stmt.text, f"Dropped {src.kind.lower()} {src.name}"
                           + (" and deleted its data and checkpoints" if stmt.delete_topic else "")),
                    write=lambda conn: self.catalog.delete_source(conn, src.name),
                    files=move_aside if stmt.delete_topic else None,
                    after_commit=(lambda _r: [m.purge() for m in moved]) if stmt.delete_topic else None)

    # -- persistent queries ----------------------------------------------------------
    def _CreateAsSelect(self, stmt: st.CreateAsSelect) -> Step:
        existing = self.snapshot.sources.get(stmt.name)
        if self.skip_unchanged and existing is not None and existing.writer_query:
            current, _report, new, sink = self.check_replace(stmt)
            if _same_query(current, existing, new, sink):
                return self._unchanged(stmt, f"query {current.id}", current)
        if stmt.or_replace and existing is not None:
            return self._replace(stmt)
        self._check_new_name(stmt.name, stmt)
        analysis = self._analyze_as_select(stmt)
        seq = self.snapshot.next_seq
        query_id = f"{QUERY_PREFIX[stmt.kind]}_{stmt.name}_{seq}"
        sink = self._sink(stmt, analysis, query_id)
        query = self._query(query_id, seq, QUERY_PREFIX[stmt.kind], sink, analysis, stmt)
        self.snapshot.sources[sink.name] = sink

        def write(conn: Connection) -> None:
            self.catalog.insert_source(conn, sink)
            self.catalog.insert_query(conn, query, sink)
        return Step(Result(stmt.text, f"Created query {query_id} writing {sink.kind.lower()} "
                           f"{sink.name}", query_id=query_id, waits=[(query_id, "RUNNING")],
                           version=1, action="created"),
                    write=write)

    def check_replace(self, stmt: st.CreateAsSelect) -> tuple[QueryInfo, Report, QueryInfo, SourceInfo]:
        """Validate ``CREATE OR REPLACE`` of an existing query's sink against the query's last
        recorded version. Returns (current query, report, new version, new sink); writes nothing."""
        old_sink = self.snapshot.sources.get(stmt.name)
        if old_sink is None:
            raise self._unknown(stmt.name, stmt)
        if old_sink.writer_query is None:
            raise self._error(f"{stmt.name} is a declared {old_sink.kind.lower()}, not the output of "
                              f"a query; replace it with CREATE OR REPLACE {old_sink.kind} "
                              f"{stmt.name} (columns ...)", stmt)
        current = self.snapshot.queries[old_sink.writer_query]
        analysis = self._analyze_as_select(stmt)
        sink = self._sink(stmt, analysis, current.id, replacing=old_sink)
        version = max(self.catalog.next_version(self.conn, current.id), current.version + 1)
        new = self._query(current.id, current.seq, QUERY_PREFIX[stmt.kind], sink, analysis, stmt,
                          version=version, register=False)
        if "on_error" not in stmt.properties and "on_error" in current.settings:
            new.settings["on_error"] = current.settings["on_error"]
        # a paused query stays paused (RESUME it when ready); a terminated one restarts
        new.desired_state = "PAUSED" if current.desired_state == "PAUSED" else "RUNNING"
        readers = sorted(q.id for q in self.snapshot.queries.values()
                         if sink.name in q.sources and q.desired_state != "TERMINATED")
        report = validate_upgrade(current.id, current.shape, new.shape,
                                  downstream=readers)
        writers = [q.id for q in self.snapshot.queries.values() if q.sink == sink.name
                   and q.id != current.id and q.desired_state != "TERMINATED"]
        if writers:
            report.findings.append(Finding(
                "MULTIPLE_WRITERS", "INSERT INTO", "unsupported", "REJECTED",
                f"{sink.name} is also written by {', '.join(writers)}; replacing one writer of a "
                f"shared output is not supported"))
            report.verdict = "REJECTED"
        return current, report, new, sink

    def _replace(self, stmt: st.CreateAsSelect) -> Step:
        current, report, new, sink = self.check_replace(stmt)
        if report.verdict != "IN_PLACE":
            reasons = "; ".join(f"{f.code}: {f.message}" for f in report.findings
                                if f.verdict == report.verdict)
            error = ValidationError if report.verdict == "REJECTED" else StateError
            hint = "" if report.verdict == "REJECTED" else (
                " — this needs a new checkpoint: use Engine.replace(sql, start_from='earliest'), "
                "or TERMINATE, DROP and create it again")
            raise error(f"CREATE OR REPLACE of {current.id} is {report.verdict}: {reasons}{hint}",
                        line=stmt.line, col=stmt.col, text=stmt.text.strip()[:120])
        self.snapshot.queries[new.id] = new
        self.snapshot.sources[sink.name] = sink
        return Step(Result(stmt.text, f"Replaced {new.id} in place: version {new.version} "
                           f"({', '.join(report.kinds)})", query_id=new.id,
                           waits=[(new.id, new.desired_state)], report=report.to_dict(),
                           version=new.version, action="replaced"),
                    write=lambda conn: self.catalog.add_version(conn, new, sink, report.to_dict()))

    def _analyze_as_select(self, stmt: st.CreateAsSelect) -> SelectAnalysis:
        analysis = self._analyze(stmt, stmt.select)
        if stmt.kind == "STREAM" and analysis.aggregate:
            raise self._error("an aggregation makes a TABLE: use CREATE TABLE ... AS SELECT", stmt)
        if stmt.kind == "TABLE" and not analysis.group_by:
            raise self._error("CREATE TABLE ... AS SELECT needs a GROUP BY", stmt)
        return analysis

    def _sink(self, stmt: st.CreateAsSelect, analysis: SelectAnalysis, query_id: str,
              replacing: SourceInfo | None = None) -> SourceInfo:
        """The output a query writes. A replacement keeps the old sink's WITH properties unless
        it restates them."""
        if replacing is not None:
            stmt = replace(stmt, properties={**replacing.properties, **stmt.properties})
        # on_error belongs to the query, not to its output
        stmt = replace(stmt, properties={k: v for k, v in stmt.properties.items() if k != "on_error"})
        sink = self._source(stmt, analysis.columns, writer=query_id, replacing=replacing)
        inherited = self.snapshot.sources[analysis.sources[0]].timestamp_column
        if "timestamp" not in sink.properties and stmt.window is None and \
                any(c.name == inherited and c.type == "TIMESTAMP" for c in sink.columns):
            sink.properties["timestamp"] = inherited  # the event time passes through unchanged
        return sink

    def _InsertSelect(self, stmt: st.InsertSelect) -> Step:
        target = self._declared(stmt.target, "STREAM", stmt, "INSERT INTO")
        analysis = self._analyze(stmt, stmt.select)
        if analysis.aggregate:
            raise self._error("INSERT INTO ... SELECT cannot aggregate; write a TABLE instead", stmt)
        got = [(c.name.lower(), c.type) for c in analysis.columns]
        want = [(c.name.lower(), c.type) for c in target.columns]
        if got != want:
            raise self._error(f"the SELECT's columns {got} do not match {target.name}'s {want}", stmt)
        if self.skip_unchanged:
            for q in self.snapshot.queries.values():
                if q.kind == "INSERT" and q.sink == target.name and q.desired_state != "TERMINATED" and \
                        self._query(q.id, q.seq, "INSERT", target, analysis, stmt,
                                    register=False).select_sql == q.select_sql:
                    return self._unchanged(stmt, f"query {q.id}", q)
        seq = self.snapshot.next_seq
        query = self._query(f"INSERTQUERY_{seq}", seq, "INSERT", target, analysis, stmt)
        return Step(Result(stmt.text, f"Created query {query.id} writing stream {target.name}",
                           query_id=query.id, waits=[(query.id, "RUNNING")], version=1,
                           action="created"),
                    write=lambda conn: self.catalog.insert_query(conn, query, target))

    def _QueryControl(self, stmt: st.QueryControl) -> Step:
        target = CONTROL_TARGET[stmt.action]
        if stmt.query_id is None:
            chosen = [q for q in self.snapshot.queries.values()
                      if q.pipeline == self.pipeline and q.desired_state != "TERMINATED"]
        else:
            query = self.snapshot.queries.get(stmt.query_id)
            if query is None:
                known = ", ".join(sorted(self.snapshot.queries)) or "none"
                raise NotFoundError(f"no query {stmt.query_id!r} (known queries: {known})",
                                    line=stmt.line, col=stmt.col, text=stmt.text)
            if query.desired_state == "TERMINATED" and target != "TERMINATED":
                raise StateError(f"query {query.id} is terminated and cannot be "
                                 f"{'resumed' if target == 'RUNNING' else 'paused'}; "
                                 f"create a new query instead", line=stmt.line, col=stmt.col,
                                 text=stmt.text)
            chosen = [query]
        # records holding paused queries: a RESUME retries their batch, or skips them
        held = {q.id: self.catalog.bad_records(q.id, "PENDING", self.conn) for q in chosen} \
            if target == "RUNNING" else {}
        held = {q: records for q, records in held.items() if records}
        if stmt.skip_bad_records and not held:
            what = stmt.query_id or f"any query of pipeline {self.pipeline!r}"
            raise StateError(f"no bad records are holding {what}; nothing to skip (RESUME without "
                             f"SKIP BAD RECORDS)", line=stmt.line, col=stmt.col, text=stmt.text)
        changed = [q for q in chosen if q.desired_state != target]
        for q in changed:
            q.desired_state = target
        dead_letters = {q: dead_letter_source(self.snapshot.queries[q], self.home) for q in held} \
            if stmt.skip_bad_records else {}
        new_dead_letters = [d for d in dead_letters.values() if d.name not in self.snapshot.sources]
        for d in new_dead_letters:
            self.snapshot.sources[d.name] = d

        def write(conn: Connection) -> None:
            for q in changed:
                self.catalog.set_desired(conn, q.id, target)
            for d in new_dead_letters:
                self.catalog.insert_source(conn, d)
            for q in held:
                self.catalog.mark_bad_records(conn, q, "PENDING", "SKIPPED" if stmt.skip_bad_records
                                              else "RETRIED", handled_by=self.issuer)

        def files() -> Callable[[], None]:
            written = []
            for q, records in held.items():
                skipped = [replace(r, status="SKIPPED", handled_by=self.issuer, handled_at=time.time())
                           for r in records]
                target = self.snapshot.sources.get(dead_letters[q].name, dead_letters[q])
                written.append(append_dead_letters(target, skipped))
            return lambda: _remove_files(written)
        ids = ", ".join(q.id for q in chosen) or "no queries"
        verb = {"PAUSED": "Paused", "RUNNING": "Resumed", "TERMINATED": "Terminated"}[target]
        notes = [f"{q}: {len(r)} bad record(s) " + (f"skipped (sent to {dead_letters[q].name})"
                                                   if stmt.skip_bad_records else "retried")
                 for q, r in held.items()]
        return Step(Result(stmt.text, f"{verb} {ids}" + (f"; {'; '.join(notes)}" if notes else ""),
                           query_id=stmt.query_id, waits=[(q.id, target) for q in chosen]),
                    write=write, files=files if stmt.skip_bad_records else None)

    # -- records -------------------------------------------------------------------
    def _InsertValues(self, stmt: st.InsertValues) -> Step:
        src = self.snapshot.sources.get(stmt.target)
        if src is None:
            raise self._unknown(stmt.target, stmt)
        if src.writer_query:
            raise self._error(f"{src.name} is written by query {src.writer_query}; INSERT VALUES "
                              f"appends only to declared streams and tables", stmt)
        if src.kafka_topic:
            raise self._error(f"{src.name} is the Kafka topic {src.kafka_topic!r}: "
                              f"produce to it with a Kafka producer", stmt)
        by_lower = {c.name.lower(): c for c in src.columns}
        names = stmt.columns or [c.name for c in src.columns]
        if len(names) != len(stmt.values):
            raise self._error(f"{src.name} has {len(names)} columns but {len(stmt.values)} "
                              f"values were given", stmt)
        record: dict[str, Any] = {c.name: None for c in src.columns}
        for name, value in zip(names, stmt.values):
            column = by_lower.get(name.lower())
            if column is None:
                raise self._error(f"{src.name} has no column {name!r} (columns: "
                                  f"{', '.join(by_lower[k].name for k in by_lower)})", stmt)
            try:
                # Spark's reader applies the source's timestampFormat to its TIMESTAMP columns
                record[column.name] = topics.coerce(
                    value, column, timestamp_format=src.properties.get("timestamp_format"))
            except ValidationError as e:
                raise self._error(e.message, stmt) from None
        for key in src.key_columns if src.kind == "TABLE" else []:
            if record[key] is None:
                raise self._error(f"primary key column {key!r} of {src.name} cannot be NULL", stmt)

        def files() -> Callable[[], None]:
            written = topics.append(src.path, src.format, src.columns, [record])
            return lambda: _remove_files([written])
        return Step(Result(stmt.text, f"Inserted 1 record into {src.name}"), files=files)

    def _PullQuery(self, stmt: st.PullQuery) -> Step:
        analysis = self._analyze(stmt, stmt.select, persistent=False)
        sources = {name: self.snapshot.sources[name] for name in analysis.sources}
        on_kafka = [f"{s.name} (Kafka topic {s.kafka_topic!r})" for s in sources.values() if s.kafka_topic]
        if on_kafka:
            raise self._error(f"pull queries read file topics; {', '.join(on_kafka)} is read by "
                              f"persistent queries only", stmt)

        result = Result(stmt.text)

        def read() -> None:
            # inside the transaction, after the script's own records are written: a pull
            # query that fails fails the script, and nothing of it is applied
            from ..storage.pull import run_pull_query
            result.columns, result.rows = run_pull_query(stmt.select, sources, analysis)
        return Step(result, files=read)

    # -- session and introspection --------------------------------------------------
    def _SetProperty(self, stmt: st.SetProperty) -> Step:
        allowed = SESSION_PROPERTIES.get(stmt.key)
        if allowed is None:
            raise self._error(f"unknown property {stmt.key!r} (known: {', '.join(SESSION_PROPERTIES)})", stmt)
        if stmt.value.lower() not in allowed:
            raise self._error(f"{stmt.key} must be one of {', '.join(allowed)}, not {stmt.value!r}", stmt)
        self.settings[stmt.key] = stmt.value.lower()
        return Step(Result(stmt.text, f"Set {stmt.key} = {stmt.value.lower()}"))

    def _Show(self, stmt: st.Show) -> Step:
        from .introspection import show
        return Step(show(self.catalog, self.conn, self.snapshot, stmt))

    def _Describe(self, stmt: st.Describe) -> Step:
        from .introspection import describe, describe_query
        if stmt.name not in self.snapshot.sources and stmt.name in self.snapshot.queries:
            return Step(describe_query(self.catalog, self.conn, self.snapshot, stmt))
        if stmt.name not in self.snapshot.sources:
            raise self._unknown(stmt.name, stmt)
        return Step(describe(self.catalog, self.conn, self.snapshot, stmt))

    def _Explain(self, stmt: st.Explain) -> Step:
        from .introspection import explain
        if stmt.query_id not in self.snapshot.queries:
            raise NotFoundError(f"no query {stmt.query_id!r}", line=stmt.line, col=stmt.col, text=stmt.text)
        return Step(explain(self.catalog, self.conn, self.snapshot, stmt))

    # -- helpers -------------------------------------------------------------------
    def _same_source(self, existing: SourceInfo, stmt: st.CreateSource) -> bool:
        """``stmt`` declares ``existing``: same kind and properties, and its columns are the
        existing ones or their start (columns appended since, as by a later ALTER of the
        same script, are kept: columns are never removed)."""
        if existing.writer_query or existing.kind != stmt.kind:
            return False
        declared = self._source(stmt, stmt.columns, writer=None, replacing=existing)
        columns = _column_tuples(existing.columns)
        other = lambda props: {k: v for k, v in props.items() if k != "value_format"}
        return (_column_tuples(declared.columns), other(declared.properties), declared.path,
                declared.format) == (columns[:len(declared.columns)], other(existing.properties),
                                     existing.path, existing.format)

    @staticmethod
    def _unchanged(stmt: st.Statement, what: str, query: QueryInfo | None = None) -> Step:
        result = Result(stmt.text, f"Unchanged: {what} already exists as defined",
                        query_id=query.id if query else None,
                        version=query.version if query else None, action="unchanged")
        return Step(result)

    def _analyze(self, stmt: st.Statement, select, *, persistent: bool = True) -> SelectAnalysis:
        schemas = {name: src.columns for name, src in self.snapshot.sources.items()}
        if not persistent and (stmt.window or stmt.within):
            raise self._error("WINDOW and WITHIN belong in persistent queries, not pull queries", stmt)
        analysis = analyze_select(select, schemas, stmt, persistent=persistent)
        if persistent:
            self._check_streaming(stmt, analysis)
        return analysis

    def _check_streaming(self, stmt: st.Statement, analysis: SelectAnalysis) -> None:
        """What Structured Streaming can run, checked before anything is written."""
        sources = self.snapshot.sources
        kinds = {name: sources[name].kind for name in analysis.sources}
        if kinds[analysis.sources[0]] == "TABLE":
            raise self._error(f"a persistent query reads a STREAM first; {analysis.sources[0]} is "
                              f"a TABLE (join it to a stream instead)", stmt)
        for join_kind, name in analysis.joins:
            if join_kind not in ("INNER", "LEFT"):
                raise self._error(f"{join_kind} JOIN is not supported; use INNER or LEFT", stmt)
            if kinds[name] == "STREAM":
                if stmt.within is None:
                    raise self._error(f"a join between streams {analysis.sources[0]} and {name} needs "
                                      f"WITHIN (e.g. JOIN {name} WITHIN 5 MINUTES ON ...) so its "
                                      f"state can be bounded by event time", stmt)
                for side in (analysis.sources[0], name):
                    self._timestamp(side, stmt, "a stream-stream join")
            elif stmt.within is not None:
                raise self._error(f"WITHIN is for joins between streams; {name} is a TABLE", stmt)
        if len(analysis.joins) > 1:
            raise self._error("one JOIN per query is supported; chain queries for more", stmt)
        if analysis.joins and analysis.aggregate:
            raise self._error("aggregating the result of a join is not supported yet; write the "
                              "join to a stream and aggregate that", stmt)
        if stmt.window is not None:
            if not analysis.aggregate:
                raise self._error("WINDOW needs an aggregation: CREATE TABLE ... AS SELECT ... "
                                  "GROUP BY", stmt)
            self._timestamp(analysis.sources[0], stmt, "WINDOW")
            if stmt.window.kind == "SESSION" and getattr(stmt, "emit", None) != "FINAL":
                raise self._error("session windows support EMIT FINAL only: Spark has no update "
                                  "output mode for session windows", stmt)
        if getattr(stmt, "emit", None) == "FINAL" and stmt.window is None:
            raise self._error("EMIT FINAL needs a windowed aggregation (a WINDOW clause)", stmt)
        files = [n for n in analysis.sources if not sources[n].kafka_topic and sources[n].kind == "STREAM"]
        if self.settings.get("auto.offset.reset") == "latest" and files:
            raise self._error(f"auto.offset.reset = 'latest' is not supported for file topics "
                              f"({', '.join(files)}); they are read from the earliest file", stmt)

    def _timestamp(self, name: str, stmt: st.Statement, needed_by: str) -> str:
        column = self.snapshot.sources[name].timestamp_column
        if column is None:
            raise self._error(f"{needed_by} needs event time, and {name} has no timestamp column: "
                              f"declare it with WITH (timestamp='<column>')", stmt)
        return column

    def _source(self, stmt, columns, writer: str | None,
                replacing: SourceInfo | None = None) -> SourceInfo:
        props = dict(stmt.properties)
        for key, value in props.items():
            if key.startswith(KAFKA_CONNECTION_SETTINGS):
                raise self._error(f"property {key!r}: Kafka connection settings come from the "
                                  f"runtime's configuration (spark.streamql.kafka.*), never from SQL", stmt)
            if key not in SOURCE_PROPERTIES:
                raise self._error(f"unknown property {key!r} (known: {', '.join(SOURCE_PROPERTIES)})", stmt)
            problem = SOURCE_PROPERTIES[key](value) if SOURCE_PROPERTIES[key] else None
            if problem:
                raise self._error(f"property {key} = {value!r}: {problem}", stmt)
        if "kafka_topic" in props:
            if "path" in props:
                raise self._error("give either kafka_topic or path, not both", stmt)
            if str(props.get("value_format", "JSON")).upper() != "JSON":
                raise self._error("Kafka topics hold JSON values: value_format must be JSON", stmt)
            path = f"kafka:{props['kafka_topic']}"
        else:
            others = {s.name: s.path for s in self.snapshot.sources.values()
                      if s is not replacing and s.name != stmt.name and not s.kafka_topic}
            try:
                path = self.layout.source_path(props.get("path", stmt.name), others)
            except ValidationError as e:
                raise self._error(f"{stmt.name}: {e.message}", stmt) from None
        if "timestamp" in props:
            ts = next((c for c in columns if c.name.lower() == props["timestamp"].lower()), None)
            if ts is None or ts.type != "TIMESTAMP":
                raise self._error(f"timestamp = {props['timestamp']!r} must name a TIMESTAMP column "
                                  f"of {stmt.name}" + ("" if ts is None else f" ({ts.name} is {ts.type})"),
                                  stmt)
            props["timestamp"] = ts.name
        elif "timestamp_format" in props:
            raise self._error("timestamp_format needs timestamp = '<column>'", stmt)
        clash = next((s.name for s in self.snapshot.sources.values()
                      if s.path == path and s is not replacing), None)
        if clash:
            raise self._error(f"path {path!r} is already used by {clash}", stmt)
        return SourceInfo(stmt.name, stmt.kind, list(columns), props,
                          str(props.get("value_format", "JSON")).upper(), path, writer)

    def _query(self, query_id: str, seq: int, kind: str, sink: SourceInfo, analysis: SelectAnalysis,
               stmt, *, version: int = 1, register: bool = True) -> QueryInfo:
        now = time.time()
        sources = self.snapshot.sources
        static = {n for n in analysis.sources if sources[n].kind == "TABLE"}
        plan = plan_streaming(
            stmt.select, stmt, analysis, query_id, kind=kind,
            timestamps={n: sources[n].timestamp_column for n in analysis.sources},
            tables=static, schemas={n: sources[n].columns for n in analysis.sources})
        writer = ("kafka sink" if sink.kafka_topic else "file sink") if kind == "CSAS" and not static \
            else "batch files"
        settings = dict(self.settings)
        policy = getattr(stmt, "properties", {}).get("on_error")
        if policy is not None:
            if str(policy).upper() not in ERROR_POLICIES:
                raise self._error(f"on_error must be one of {', '.join(ERROR_POLICIES)}, not {policy!r}", stmt)
            settings["on_error"] = str(policy).upper()
        shape = {**analysis.shape, "kind": kind,
                 "sink": {"path": sink.path, "format": sink.format, "writer": writer},
                 "streams": [n for n in analysis.sources if n not in static]}
        query = QueryInfo(
            id=query_id, seq=seq, pipeline=self.pipeline, kind=kind, sink=sink.name,
            sources=analysis.sources, sql=stmt.text.strip(), select_sql=plan.spark_sql,
            settings=settings, plan=plan, shape=shape, version=version,
            checkpoint=self.layout.checkpoint(query_id),
            desired_state="RUNNING", observed_state="PENDING", created_at=now, updated_at=now)
        if register:
            self.snapshot.queries[query_id] = query
            self.snapshot.next_seq += 1
        return query

    def _check_new_name(self, name: str, stmt) -> None:
        if name in self.snapshot.sources:
            existing = self.snapshot.sources[name]
            raise self._error(f"a {existing.kind.lower()} named {name} already exists", stmt)

    def _declared(self, name: str, kind: str, stmt, verb: str) -> SourceInfo:
        src = self.snapshot.sources.get(name)
        if src is None:
            raise self._unknown(name, stmt)
        if src.kind != kind:
            raise self._error(f"{name} is a {src.kind}, not a {kind}", stmt)
        if src.writer_query:
            raise self._error(f"{verb} {name}: it is written by query {src.writer_query}; only "
                              f"declared streams and tables accept this", stmt)
        return src

    def _unknown(self, name: str, stmt) -> NotFoundError:
        known = ", ".join(sorted(self.snapshot.sources)) or "none"
        return NotFoundError(f"unknown stream or table {name!r} (known: {known})",
                             line=stmt.line, col=stmt.col, text=stmt.text)

    @staticmethod
    def _error(message: str, stmt: st.Statement) -> ValidationError:
        return ValidationError(message, line=stmt.line, col=stmt.col, text=stmt.text.strip()[:120])


def _column_tuples(columns: list[st.Column]) -> list[tuple[str, str, bool]]:
    return [(c.name.lower(), c.type.upper(), c.key) for c in columns]


def _same_query(current: QueryInfo, old_sink: SourceInfo, new: QueryInfo, sink: SourceInfo) -> bool:
    """The new definition runs exactly what ``current`` runs, with the same settings, and
    writes the same output. The shape is not compared: it is what the validator derives from
    these, and a trait added to it in a later release must not make every query look changed."""
    return (new.plan, new.settings, _column_tuples(sink.columns), sink.properties) == \
        (current.plan, current.settings, _column_tuples(old_sink.columns), old_sink.properties)


def _widenings() -> str:
    return ", ".join(f"{old} to {'/'.join(new)}" for old, new in WIDENINGS.items())


def _make_folder(path: str) -> Callable[[], None]:
    """Create a source's folder; the undo removes it again if it was created here (empty)."""
    existed = os.path.isdir(path)
    os.makedirs(path, exist_ok=True)
    return (lambda: None) if existed else (lambda: _remove_empty(path))


def _remove_empty(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _remove_files(paths) -> None:
    for path in paths:
        if path and os.path.isfile(path):
            os.remove(path)
