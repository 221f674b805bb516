"""Declared streams and tables: ``CREATE [OR REPLACE] STREAM|TABLE name (columns)``, ``ALTER
... ADD COLUMN`` and ``DROP``. A ``CREATE OR REPLACE`` may append columns and widen their types
(:data:`~..upgrades.sources.WIDENINGS`); every query reading a widened source gets a new
version, validated as a ``CREATE OR REPLACE`` of that query by the
:class:`.queries.PersistentQueries` this family holds. What may change is decided by the
validator's source rules (:mod:`..upgrades.sources`), which also answer ``Engine.validate``
and ``plan``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Connection

from ..catalog import QueryInfo, SourceInfo
from ..catalog.states import DesiredState
from ..errors import NotFoundError, StateError
from ..language import statements as st
from ..results import Result
from ..storage.layout import MovedAside, query_folders
from ..upgrades import Code, Finding, Report, UpgradeKind, Verdict
from ..upgrades.sources import Change, source_findings, source_report, widenings, widens
from .planning import Planning, column_tuples, error_at, placed, unchanged
from .queries import PersistentQueries
from .step import Step, make_folder


class SourceStatements:
    """The statements that declare, change and drop streams and tables, planned in
    ``planning``; ``queries`` validates the new versions of the queries reading a source."""

    def __init__(self, planning: Planning, queries: PersistentQueries):
        self.planning = planning
        self.queries = queries

    def create_source(self, stmt: st.CreateSource) -> Step:
        existing = self.planning.snapshot.sources.get(stmt.name)
        if (exists := self.planning.if_not_exists(stmt)) is not None:
            return exists
        if self.planning.skip_unchanged and existing is not None and self._same_source(existing, stmt):
            return unchanged(stmt, f"{stmt.kind.lower()} {stmt.name}")
        if stmt.or_replace and existing is not None:
            return self._replace_source(stmt)
        self.planning.check_new_name(stmt.name, stmt)
        names = [c.name.lower() for c in stmt.columns]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise error_at(declared_twice(dup, stmt.columns), stmt)
        if stmt.kind == "TABLE" and not any(c.key for c in stmt.columns):
            raise error_at(f"table {stmt.name} needs a PRIMARY KEY column", stmt)
        src = self.planning.source(stmt, stmt.columns, writer=None)
        self.planning.snapshot.sources[src.name] = src
        return Step(
            Result(stmt.text, f"Created {stmt.kind.lower()} {src.name} at {src.path}", action="created"),
            write=lambda conn: self.planning.catalog.insert_source(conn, src),
            files=None if src.kafka_topic else lambda: make_folder(src.path),
        )

    def check_replace_source(self, stmt: st.CreateSource) -> tuple[SourceInfo, Report, list]:
        """The validator's report on ``CREATE OR REPLACE STREAM|TABLE s (...)`` of a declared
        source (one finding per difference, see :mod:`..upgrades.sources`, and one per query
        reading a widened column), with the new versions of those queries when every one can
        take the change in place. The planner's snapshot gets the new source and versions;
        the catalog is not touched."""
        old = self.planning.declared(stmt.name, stmt.kind, stmt, f"CREATE OR REPLACE {stmt.kind}")
        names = [c.name.lower() for c in stmt.columns]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise error_at(declared_twice(dup, stmt.columns), stmt)
        readers = self.planning.readers(old.name)
        change = Change(old.name, old.columns, stmt.columns, old.properties, stmt.properties, [q.id for q in readers])
        report = source_report(change, source_findings(change))
        widened = [(was, now) for was, now in change.kept() if was.type != now.type and widens(was.type, now.type)]
        versions = []
        if report.verdict == "IN_PLACE" and widened:
            self.planning.snapshot.sources[old.name] = replace(old, columns=list(stmt.columns))
            for reader in readers:
                outcome = self._reread(reader, stmt, widened)
                if isinstance(outcome, Finding):
                    report.add(outcome)
                    continue
                versions.append(outcome)
                new, _sink, _report = outcome
                report.add(
                    Finding(
                        Code.SOURCE_READER_UPGRADED,
                        "FROM",
                        UpgradeKind.SCHEMA_EVOLUTION,
                        Verdict.IN_PLACE,
                        f"{new.id} reads {old.name}: version {new.version} reads the wider type in place",
                    )
                )
            self.planning.snapshot.sources[old.name] = old
        return old, report, versions

    def _replace_source(self, stmt: st.CreateSource) -> Step:
        """``CREATE OR REPLACE STREAM s (...)`` of a declared source: columns may be appended
        (as with ALTER ... ADD COLUMN) and existing ones widened (INT to BIGINT or DOUBLE, ...),
        e.g. to read a record that held a query. Every query reading the source gets a new
        version that reads it with the new columns, validated like any CREATE OR REPLACE: if
        one cannot take it in place, nothing is replaced."""
        old, report, versions = self.check_replace_source(stmt)
        if report.verdict != "IN_PLACE":
            raise error_at(
                f"CREATE OR REPLACE {stmt.kind} {stmt.name} may only append columns "
                f"to ({', '.join(f'{c.name} {c.type}' for c in old.columns)}) and widen "
                f"their types ({widenings()}): "
                + "; ".join(f"{f.code}: {f.message}" for f in report.findings if f.verdict != "IN_PLACE"),
                stmt,
            )
        new = replace(old, columns=list(stmt.columns))
        self.planning.snapshot.sources[old.name] = new
        added = len(stmt.columns) - len(old.columns)
        widened = [(was, now) for was, now in zip(old.columns, stmt.columns, strict=False) if was.type != now.type]
        message = f"Replaced {stmt.kind.lower()} {old.name}: {added} column(s) appended" + (
            f", {', '.join(f'{w.name} widened to {n.type}' for w, n in widened)}; new versions of "
            f"{', '.join(f'{q.id} (v{q.version})' for q, _s, _r in versions) or 'no query'}"
            if widened
            else ""
        )

        def write(conn: Connection) -> None:
            self.planning.catalog.update_source(conn, new)
            for query, sink, reader_report in versions:
                self.planning.catalog.add_version(conn, query, sink, reader_report.to_dict())

        return Step(
            Result(
                stmt.text,
                message,
                action="replaced",
                waits=[(q.id, q.desired_state) for q, _s, _r in versions],
                report=report.to_dict(),
            ),
            write=write,
        )

    def _reread(
        self, reader: QueryInfo, stmt: st.CreateSource, widened
    ) -> tuple[QueryInfo, SourceInfo, Report] | Finding:
        """A new version of ``reader`` over the widened source, or the finding that says why
        it cannot be."""
        what = ", ".join(f"{stmt.name}.{w.name} {w.type} -> {n.type}" for w, n in widened)
        definition = reader.statement()
        if not isinstance(definition, st.CreateAsSelect):
            return Finding(
                Code.SOURCE_READER_BLOCKS,
                "FROM",
                UpgradeKind.UNSUPPORTED,
                Verdict.REJECTED,
                f"cannot widen {what}: {reader.id} is an INSERT INTO query reading it; TERMINATE it first",
            )
        _current, report, new, sink = self.queries.check_replace(definition)
        if report.verdict != "IN_PLACE":
            reasons = "; ".join(f"{f.code}: {f.message}" for f in report.findings if f.verdict != "IN_PLACE")
            return Finding(
                Code.SOURCE_READER_BLOCKS,
                "FROM",
                UpgradeKind.UNSUPPORTED,
                Verdict.REJECTED,
                f"cannot widen {what}: {reader.id} reads it and cannot take the change in place "
                f"({report.verdict}: {reasons})",
            )
        report.add(
            Finding(
                Code.SOURCE_COLUMN_WIDENED,
                "FROM",
                UpgradeKind.SCHEMA_EVOLUTION,
                Verdict.IN_PLACE,
                f"{what}: records are read with the wider type",
            )
        )
        self.planning.snapshot.queries[new.id] = new
        self.planning.snapshot.sources[sink.name] = sink
        return new, sink, report

    def alter_source(self, stmt: st.AlterSource) -> Step:
        src = self.planning.declared(stmt.name, stmt.kind, stmt, "ALTER")
        if self.planning.skip_unchanged and set(column_tuples(stmt.add_columns)) <= set(column_tuples(src.columns)):
            return unchanged(stmt, f"{src.kind.lower()} {src.name}")
        existing = {c.name.lower() for c in src.columns}
        for c in stmt.add_columns:
            if c.name.lower() in existing or c.key:
                raise error_at(
                    f"cannot add column {c.name!r}: "
                    + ("it exists" if c.name.lower() in existing else "keys cannot be added"),
                    stmt,
                )
            existing.add(c.name.lower())
        new = replace(src, columns=src.columns + list(stmt.add_columns))
        self.planning.snapshot.sources[src.name] = new
        return Step(
            Result(stmt.text, f"Added {len(stmt.add_columns)} column(s) to {src.name}", action="altered"),
            write=lambda conn: self.planning.catalog.update_source(conn, new),
        )

    def drop_source(self, stmt: st.DropSource) -> Step:
        src = self.planning.snapshot.sources.get(stmt.name)
        if src is None:
            if stmt.if_exists:
                return Step(Result(stmt.text, f"{stmt.name} does not exist; nothing dropped"))
            raise NotFoundError(
                f"{stmt.kind.lower()} {stmt.name!r} does not exist", line=stmt.line, col=stmt.col, text=stmt.text
            )
        if src.kind != stmt.kind:
            raise error_at(f"{stmt.name} is a {src.kind}, not a {stmt.kind}", stmt)
        users = [
            q.id
            for q in self.planning.snapshot.queries.values()
            if q.desired_state != DesiredState.TERMINATED and (q.sink == src.name or src.name in q.sources)
        ]
        if users:
            raise StateError(
                f"cannot drop {src.name}: queries {', '.join(users)} use it; TERMINATE them first",
                line=stmt.line,
                col=stmt.col,
                text=stmt.text,
            )
        if stmt.delete_topic and src.kafka_topic:
            raise error_at(
                f"DELETE TOPIC deletes file topics; streamql does not delete the "
                f"Kafka topic {src.kafka_topic!r} (drop without it)",
                stmt,
            )
        if stmt.delete_topic:
            placed(src.path, stmt)  # checked again when it is moved aside
        if stmt.delete_topic and not self.planning.layout.may_delete(src.path):
            raise error_at(
                f"DELETE TOPIC deletes only topics under {self.planning.layout.topics!r} or an "
                f"allowed root; {src.path!r} is outside them (drop without DELETE TOPIC)",
                stmt,
            )
        del self.planning.snapshot.sources[src.name]
        # with its data go the checkpoints and snapshots of the (terminated) queries that wrote it
        folders = [src.path] + [
            path
            for q in self.planning.snapshot.queries.values()
            if q.sink == src.name
            for path in query_folders(q.checkpoint)
            if self.planning.layout.may_delete(path)
        ]
        writers = [q.id for q in self.planning.snapshot.queries.values() if q.sink == src.name]
        moved: list[MovedAside] = []

        def move_aside() -> Callable[[], None]:
            # under the catalog lock: a statement committed after this one (CREATE x; INSERT
            # INTO x ...) finds the names free, and its data is never what gets deleted
            moved.append(MovedAside(folders))
            return moved[-1].restore

        def purge(_result: Result) -> None:
            for m in moved:
                m.purge()

        return Step(
            Result(
                stmt.text,
                f"Dropped {src.kind.lower()} {src.name}"
                + (" and deleted its data and checkpoints" if stmt.delete_topic else ""),
            ),
            write=lambda conn: self._delete_source(conn, src.name, writers if stmt.delete_topic else []),
            files=move_aside if stmt.delete_topic else None,
            after_commit=purge if stmt.delete_topic else None,
        )

    def _delete_source(self, conn, name: str, writers: list[str]) -> None:
        """The source's row, and the snapshot records of its writers whose folders go."""
        self.planning.catalog.delete_source(conn, name)
        for query_id in writers:
            self.planning.catalog.snapshots.remove(
                query_id, [s.number for s in self.planning.catalog.snapshots.of(query_id, conn)], conn
            )

    def _same_source(self, existing: SourceInfo, stmt: st.CreateSource) -> bool:
        """``stmt`` declares ``existing``: same kind and properties, and its columns are the
        existing ones or their start (columns appended since, as by a later ALTER of the
        same script, are kept: columns are never removed)."""
        if existing.writer_query or existing.kind != stmt.kind:
            return False
        declared = self.planning.source(stmt, stmt.columns, writer=None, replacing=existing)
        columns = column_tuples(existing.columns)
        other = lambda props: {k: v for k, v in props.items() if k != "value_format"}
        return (column_tuples(declared.columns), other(declared.properties), declared.path, declared.format) == (
            columns[: len(declared.columns)],
            other(existing.properties),
            existing.path,
            existing.format,
        )


def declared_twice(name: str, columns: list[st.Column]) -> str:
    """Why a declaration with two columns named ``name`` (in any letter case) is refused."""
    spellings = list(dict.fromkeys(c.name for c in columns if c.name.lower() == name))
    if len(spellings) < 2:
        return f"column {name!r} is declared twice"
    return (
        f"column {name!r} is declared twice ({' and '.join(map(repr, spellings))}): names are matched "
        f"case-insensitively, as Spark resolves columns, so ksqlDB's quoted names that differ only in "
        f"case are one name here"
    )
