"""Shadow upgrades (blue/green): ``CREATE OR REPLACE ... WITH (shadow=true) AS SELECT``,
``DIFF``, ``PROMOTE`` and ``DISCARD``.

A shadow is version N+1 of a query run as a query of its own beside version N: it starts on
a copy of N's checkpoint (as of N's last committed batch) and writes a stream or table of its
own, ``<OUTPUT>_SHADOW``, while N keeps serving. ``DIFF`` compares the two outputs over the
input both have read since. ``PROMOTE`` replaces N by N+1 *in place*, on N's own checkpoint
(as ``CREATE OR REPLACE`` does: N stops after its in-flight batch and N+1 goes on from there,
nothing lost or read twice), and stops the shadow; ``DISCARD`` only stops the shadow. Either
way the shadow's output and checkpoint stay until ``DROP STREAM|TABLE <OUTPUT>_SHADOW DELETE
TOPIC`` (the operators do it once the shadow has stopped).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Connection

from ..catalog import QueryInfo
from ..catalog.states import DesiredState, QueryState
from ..errors import StreamQLError, ValidationError
from ..language import parse_one
from ..language import statements as st
from ..language.compiler import QUERY_KINDS
from ..results import Result
from ..storage.checkpoints import last_committed_batch
from ..storage.diff import Side, compare
from ..storage.snapshots import copy_committed, give_new_identity
from .planning import Planning, error_at, state_error_at
from .queries import PersistentQueries
from .step import Step

SHADOW_SUFFIX = "_SHADOW"
#: ``shadow = true`` in a WITH list, and the comma that joins it to the next property
SHADOW_PROPERTY = re.compile(r"\bshadow\s*=\s*(?:true|'true')\s*,?\s*", re.IGNORECASE)


def wants_shadow(stmt: st.CreateAsSelect) -> bool:
    """The statement asks for a shadow (``shadow`` = true); any other value is refused."""
    value = stmt.properties.get("shadow")
    if value is None or value is False or str(value).lower() == "false":
        return False
    if value is True or str(value).lower() == "true":
        return True
    raise ValidationError(f"shadow must be true or false, not {value!r}", line=stmt.line, col=stmt.col, text=stmt.text)


def without_shadow(stmt: st.CreateAsSelect) -> st.CreateAsSelect:
    """The statement as the version it proposes: no ``shadow`` property, and a text that does
    not say it. Only the part before the SELECT is cleaned, and the result must parse to the
    same statement (else the text stays as written): the text is only ever what the user
    wrote, less the property."""
    properties = {k: v for k, v in stmt.properties.items() if k != "shadow"}
    lines = stmt.text.split("\n")
    line, col = stmt.select_at[0] - stmt.line, stmt.select_at[1] - (stmt.col if stmt.select_at[0] == stmt.line else 1)
    cut = sum(len(x) + 1 for x in lines[:line]) + col
    head = SHADOW_PROPERTY.sub("", stmt.text[:cut])
    head = re.sub(r"\bWITH\s*\(\s*\)\s*", "", re.sub(r",\s*\)", ")", head), flags=re.IGNORECASE)
    text = head + stmt.text[cut:]
    try:
        again = parse_one(text)
    except StreamQLError:
        again = None
    same = isinstance(again, st.CreateAsSelect) and (
        again.properties,
        again.name,
        again.kind,
        again.select.sql(),
        again.emit,
        again.window,
        again.withins,
        again.partition_by,
    ) == (properties, stmt.name, stmt.kind, stmt.select.sql(), stmt.emit, stmt.window, stmt.withins, stmt.partition_by)
    return replace(
        stmt, text=text if same else stmt.text, properties=properties, or_replace=True, select=stmt.select.copy()
    )


class ShadowStatements:
    """``CREATE ... AS SELECT`` (a shadow when it asks for one) and the statements on a
    shadow, planned in ``planning``; ``queries`` checks, compiles and records the versions."""

    def __init__(self, planning: Planning, queries: PersistentQueries):
        self.planning = planning
        self.queries = queries

    def create_as_select_or_shadow(self, stmt: st.CreateAsSelect) -> Step:
        """``CREATE [OR REPLACE] ... AS SELECT``, or with ``WITH (shadow=true)`` a shadow."""
        if wants_shadow(stmt):
            return self._create_shadow(stmt)
        if "shadow" in stmt.properties:  # shadow=false: an ordinary statement
            stmt = replace(stmt, properties={k: v for k, v in stmt.properties.items() if k != "shadow"})
        writer = self._writer_of(stmt.name)
        if stmt.or_replace and writer is not None and writer.settings.get("shadow_of"):
            raise error_at(
                f"{stmt.name} is the output of {writer.id}, a shadow of {writer.settings['shadow_of']}: PROMOTE or "
                f"DISCARD it, then replace {writer.settings['shadow_of']}",
                stmt,
            )
        return self.queries.create_as_select(stmt)

    def _writer_of(self, name: str) -> QueryInfo | None:
        """The query writing stream or table ``name``, if any."""
        output = self.planning.snapshot.sources.get(name)
        return self.planning.snapshot.queries.get(output.writer_query) if output and output.writer_query else None

    def _shadow_of(self, query: QueryInfo) -> QueryInfo | None:
        """The query's live shadow (not terminated), if any."""
        return next(
            (
                q
                for q in self.planning.snapshot.queries.values()
                if q.settings.get("shadow_of") == query.id and q.desired_state != DesiredState.TERMINATED
            ),
            None,
        )

    def _pair(self, query_id: str, stmt: st.Statement) -> tuple[QueryInfo, QueryInfo]:
        """(live query, its shadow) from either's ID."""
        query = self.planning.query_named(query_id, stmt)
        live_id = query.settings.get("shadow_of")
        live = self.planning.snapshot.queries[live_id] if live_id in self.planning.snapshot.queries else query
        shadow = query if live_id else self._shadow_of(query)
        if shadow is None or shadow.desired_state == DesiredState.TERMINATED:
            ended = f" ({query.id} was promoted or discarded)" if live_id else ""
            raise state_error_at(
                f"query {live.id} has no shadow{ended}: create one with CREATE OR REPLACE {live.sink} "
                f"WITH (shadow=true) AS SELECT ...",
                stmt,
            )
        return live, shadow

    def _create_shadow(self, stmt: st.CreateAsSelect) -> Step:
        """Version N+1 as a query of its own, beside N, on a copy of N's checkpoint."""
        existing = self.planning.snapshot.sources.get(stmt.name)
        writer = self._writer_of(stmt.name)
        if writer is not None and writer.settings.get("shadow_of"):
            raise error_at(f"{stmt.name} is the output of {writer.id}, a shadow: PROMOTE or DISCARD it", stmt)
        if writer is not None and writer.desired_state != DesiredState.RUNNING:
            raise error_at(f"{writer.id} is {writer.desired_state}: a shadow runs beside a RUNNING query", stmt)
        if not stmt.or_replace or existing is None or not existing.writer_query:
            raise error_at(
                f"WITH (shadow=true) runs a new version beside a running query: it goes with CREATE OR REPLACE "
                f"of a query's output, and {stmt.name} is "
                + ("not one" if existing is None or not existing.writer_query else "not replaced here"),
                stmt,
            )
        proposed = without_shadow(stmt)
        shadow_stmt = replace(
            proposed, name=existing.name + SHADOW_SUFFIX, or_replace=False, select=proposed.select.copy()
        )
        current, report, new, _sink = self.queries.check_replace(proposed)
        if report.verdict != "IN_PLACE":
            reasons = "; ".join(f"{f.code}: {f.message}" for f in report.findings if f.verdict == report.verdict)
            raise error_at(
                f"a shadow of {current.id} runs the new version on a copy of its checkpoint, which needs an "
                f"IN_PLACE change; this one is {report.verdict}: {reasons}",
                stmt,
            )
        running = self._shadow_of(current)
        if running is not None:
            raise error_at(f"{current.id} already has a shadow, {running.id}: PROMOTE or DISCARD it first", stmt)
        kafka = [n for n in [*current.sources, current.sink] if self.planning.snapshot.sources[n].kafka_topic]
        if kafka:
            raise error_at(
                f"a shadow is compared with DIFF, which reads file topics; {current.id} reads or writes Kafka "
                f"({', '.join(kafka)})",
                stmt,
            )
        if shadow_stmt.name in self.planning.snapshot.sources:
            raise error_at(
                f"{shadow_stmt.name} exists (a shadow's output left behind?): DROP "
                f"{self.planning.snapshot.sources[shadow_stmt.name].kind} {shadow_stmt.name} DELETE TOPIC first",
                stmt,
            )
        self.planning.check_new_name(shadow_stmt.name, stmt)
        # the shadow's output: the format of the live one, in a folder of its own
        kept = {
            "value_format": existing.format,
            "value_delimiter": existing.properties.get("value_delimiter"),
            "on_error": proposed.properties.get("on_error"),  # the new version's, as PROMOTE applies it
        }
        shadow_stmt = replace(shadow_stmt, properties={k: v for k, v in kept.items() if v is not None})
        analysis = self.planning.analyze_query(shadow_stmt, spellings=existing.columns)  # spelled as the live output
        seq = self.planning.snapshot.next_seq
        shadow_id = f"{QUERY_KINDS[stmt.kind]}_{shadow_stmt.name}_{seq}"
        sink = self.queries.sink(shadow_stmt, analysis, shadow_id)
        # on a copy of the live checkpoint: its streams are named as the live query's are
        compiled = self.queries.compile(shadow_stmt, analysis, sink, shadow_id, named=current.shape.named)
        shadow = self.queries.query_info(shadow_id, seq, sink, compiled, shadow_stmt)
        batch = last_committed_batch(current.checkpoint)
        if "on_error" not in shadow.settings and "on_error" in current.settings:  # not restated: kept
            shadow.settings["on_error"] = current.settings["on_error"]
        shadow.settings.update(
            shadow_of=current.id,
            shadow_version=new.version,
            shadow_from_batch=batch,
            promote_sql=proposed.text.strip(),
        )
        self.planning.snapshot.sources[sink.name] = sink

        def write(conn: Connection) -> None:
            self.planning.catalog.insert_source(conn, sink)
            self.planning.catalog.insert_query(conn, shadow, sink)

        def files() -> Callable[[], None]:
            copy_committed(current.checkpoint, shadow.checkpoint, batch=batch)  # nothing left if it fails
            give_new_identity(shadow.checkpoint)
            return lambda: shutil.rmtree(shadow.checkpoint, ignore_errors=True)

        return Step(
            Result(
                stmt.text,
                f"Shadow {shadow_id} runs version {new.version} of {current.id} beside it from batch {batch}, "
                f"writing {sink.kind.lower()} {sink.name}; compare with DIFF {current.id}, then PROMOTE or "
                f"DISCARD {current.id}",
                query_id=shadow_id,
                waits=[(shadow_id, QueryState.RUNNING)],
                report=report.to_dict(),
                version=new.version,
                action="shadowed",
            ),
            write=write,
            files=files,
        )

    def shadow_action(self, stmt: st.ShadowAction) -> Step:
        if stmt.ready is not None:  # the engine waits for the gate, then plans PROMOTE without it
            raise error_at("PROMOTE ... WHEN READY waits for the shadow: run it, it cannot be planned ahead", stmt)
        live, shadow = self._pair(stmt.query_id, stmt)
        shadow.desired_state = DesiredState.TERMINATED
        drop = f"DROP {'TABLE' if shadow.kind == 'CTAS' else 'STREAM'} {shadow.sink} DELETE TOPIC"
        if stmt.action == "DISCARD":
            return Step(
                Result(
                    stmt.text,
                    f"Discarded shadow {shadow.id} of {live.id}, which keeps its version {live.version}; once "
                    f"{shadow.id} is TERMINATED, {drop} removes its output",
                    query_id=live.id,
                    waits=[(shadow.id, QueryState.TERMINATED)],
                ),
                write=lambda conn: self.planning.catalog.set_desired(conn, shadow.id, DesiredState.TERMINATED),
            )
        recorded = shadow.settings.get("promote_sql", "")
        proposed = parse_one(recorded) if recorded else None
        if not isinstance(proposed, st.CreateAsSelect):
            raise error_at(f"the shadow {shadow.id} records no statement to promote ({recorded[:80]!r})", stmt)
        proposed = without_shadow(proposed)
        if live.desired_state != DesiredState.RUNNING:
            raise error_at(f"{live.id} is {live.desired_state}: RESUME it before PROMOTE, or DISCARD", stmt)
        checked = self.queries.check_replace(proposed)  # checked again: N may have changed since
        if checked[0].id != live.id:
            raise error_at(
                f"{proposed.name} is now written by {checked[0].id}, not by {live.id}, which {shadow.id} "
                f"shadowed: DISCARD it",
                stmt,
            )
        step = self.queries.replace_in_place(proposed, checked)
        replaced = step.write

        def write(conn: Connection) -> None:
            if replaced is not None:
                replaced(conn)
            self.planning.catalog.set_desired(conn, shadow.id, DesiredState.TERMINATED)

        step.write = write
        step.result = replace(
            step.result,
            statement=stmt.text,
            message=f"Promoted: {step.result.message}, on its own checkpoint from its last batch (nothing lost "
            f"or read twice); shadow {shadow.id} stops; once it is TERMINATED, {drop} removes its output",
            waits=[*step.result.waits, (shadow.id, QueryState.TERMINATED)],
        )
        return step

    def diff(self, stmt: st.DiffShadow) -> Step:
        live, shadow = self._pair(stmt.query_id, stmt)
        live_sink = self.planning.snapshot.sources[live.sink]
        if live_sink.kind == "STREAM" and not live_sink.batch_files:
            raise error_at(
                f"DIFF reads the output batch by batch; {live.sink} is written by Spark's file sink (an output "
                f"created before per-batch files), whose files name no batch",
                stmt,
            )
        after = int(shadow.settings.get("shadow_from_batch", -1))
        diff = compare(
            Side(live.id, live.checkpoint, live_sink, after),
            Side(shadow.id, shadow.checkpoint, self.planning.snapshot.sources[shadow.sink], after),
        )
        rows = [[live.id, *r] for r in diff.only_live] + [[shadow.id, *r] for r in diff.only_shadow]
        behind = "; ".join(f"{q} has yet to read {n} file(s) the other read" for q, n in diff.behind.items() if n)
        return Step(
            Result(
                stmt.text,
                f"{live.id} (version {live.version}) and its shadow {shadow.id} (version "
                f"{shadow.settings.get('shadow_version')}) over the {diff.inputs} input file(s) both read since "
                f"batch {after}: {len(diff.only_live)} row(s) only in {live.sink}, {len(diff.only_shadow)} only in "
                f"{shadow.sink}" + (f" ({behind})" if behind else ""),
                query_id=live.id,
                columns=["written_by", *diff.columns],
                rows=rows,
                details={
                    "inputs": diff.inputs,
                    "only_live": len(diff.only_live),
                    "only_shadow": len(diff.only_shadow),
                    "behind": diff.behind,
                },
            )
        )
