"""Control statements: ``PAUSE|RESUME|TERMINATE <query_id>|ALL`` (with ``RESUME ... SKIP BAD
RECORDS``, which sends the records holding a query, paused at them or failing on them, to its
dead-letter stream: files it writes itself, a Kafka topic the runtime writes as it resumes the
query) and the session's
``SET 'key' = 'value'`` (:data:`SESSION_PROPERTIES`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Connection

from ..catalog import BadRecord, QueryInfo, SourceInfo
from ..catalog.states import BadRecordStatus, DesiredState, OnError, ProcessingGuarantee
from ..language import statements as st
from ..language.starting import timestamp_millis, timestamp_text
from ..results import Result
from ..storage.checkpoints import last_committed_batch
from ..storage.deadletter import append_dead_letters, dead_letter_source, dead_letter_topic
from .planning import Planning, error_at, state_error_at
from .step import Step, remove_files

# SET 'key' -> allowed values (as SHOW PROPERTIES lists them; each recorded with the queries the
# script creates after it)
SESSION_PROPERTIES = {
    "auto.offset.reset": ("earliest", "latest"),
    "starting.timestamp": ("an ISO-8601 time with its zone", "epoch milliseconds"),
    "processing.guarantee": tuple(ProcessingGuarantee),
    "on_error": tuple(OnError),  # the error policy of the queries created after it, as WITH (on_error=...)
}
#: a property whose value is not one of a few words: its value resolved once, at SET, to the
#: text recorded (a ValueError saying what is wrong with it otherwise)
SESSION_VALUES: dict[str, Callable[[str], str]] = {
    "starting.timestamp": lambda text: timestamp_text(timestamp_millis(text)),
    "on_error": lambda text: _policy(text),
}
#: values of a session property that are refused with a reason rather than as unknown
REFUSED_VALUES = {
    ("processing.guarantee", "exactly_once"): "exactly_once (v1) was removed in Kafka 4.0 (KIP-732)",
    ("processing.guarantee", "exactly_once_beta"): "exactly_once_beta was renamed exactly_once_v2 (KIP-732)",
}
#: ksqlDB's names of a session property streamql has
KSQL_ALIASES = {
    "ksql.streams.auto.offset.reset": "auto.offset.reset",
    "ksql.streams.processing.guarantee": "processing.guarantee",
    "ksql.fail.on.deserialization.error": "on_error",
}
#: ksqlDB's values of a setting :data:`KSQL_ALIASES` maps, as the values of streamql's property
KSQL_VALUES = {
    "ksql.fail.on.deserialization.error": {"true": OnError.FAIL, "false": OnError.LOG_AND_CONTINUE},
}
#: ksqlDB and Kafka Streams settings streamql accepts without effect, and why they have none
#: (each also under ksqlDB's ``ksql.streams.`` prefix); any other ``ksql.*`` setting is
#: accepted the same way with the general reason
KSQL_WITHOUT_EFFECT = {
    "cache.max.bytes.buffering": "a table's changes are written once per micro-batch, with no cache between",
    "commit.interval.ms": "a query commits once per micro-batch (its trigger)",
    "num.stream.threads": "a query's tasks run on the Spark cores of its runtime",
}
KSQL_GENERAL = "a ksqlDB server setting, which no streamql statement reads"
CONTROL_TARGET = {"PAUSE": DesiredState.PAUSED, "RESUME": DesiredState.RUNNING, "TERMINATE": DesiredState.TERMINATED}


class ControlStatements:
    """PAUSE, RESUME, TERMINATE and SET, planned in ``planning``."""

    def __init__(self, planning: Planning):
        self.planning = planning

    def query_control(self, stmt: st.QueryControl) -> Step:
        target = CONTROL_TARGET[stmt.action]
        if stmt.query_id is None:
            chosen = [
                q
                for q in self.planning.snapshot.queries.values()
                if q.pipeline == self.planning.pipeline and q.desired_state != DesiredState.TERMINATED
            ]
        else:
            query = self.planning.query_named(stmt.query_id, stmt)
            if query.desired_state == DesiredState.TERMINATED and target != DesiredState.TERMINATED:
                raise state_error_at(
                    f"query {query.id} is terminated and cannot be "
                    f"{'resumed' if target == DesiredState.RUNNING else 'paused'}; "
                    f"create a new query instead",
                    stmt,
                )
            chosen = [query]
        # records holding queries: a RESUME retries the batch of a paused one, or skips them
        held = {q.id: self._holding(q, stmt.skip_bad_records) for q in chosen} if target == DesiredState.RUNNING else {}
        held = {q: records for q, records in held.items() if records}
        if stmt.skip_bad_records and not held:
            what = stmt.query_id or f"any query of pipeline {self.planning.pipeline!r}"
            raise state_error_at(
                f"no bad records are holding {what} (none holds it paused under on_error='PAUSE' or fails "
                f"its next batch under on_error='FAIL'); nothing to skip (RESUME without SKIP BAD RECORDS)",
                stmt,
            )
        changed = [q for q in chosen if q.desired_state != target]
        for q in changed:
            q.desired_state = target
        dead_letters = (
            {q: self._dead_letters(self.planning.snapshot.queries[q]) for q in held} if stmt.skip_bad_records else {}
        )
        new_dead_letters = [d for d in dead_letters.values() if d.name not in self.planning.snapshot.sources]
        for d in new_dead_letters:
            self.planning.snapshot.sources[d.name] = d

        def write(conn: Connection) -> None:
            for q in changed:
                self.planning.catalog.set_desired(conn, q.id, target)
            for d in new_dead_letters:
                self.planning.catalog.insert_source(conn, d)
            for query_id, records in held.items():
                for status in sorted({r.status for r in records}):
                    self.planning.catalog.bad_records.mark(
                        conn,
                        query_id,
                        status,
                        BadRecordStatus.SKIPPED if stmt.skip_bad_records else BadRecordStatus.RETRIED,
                        handled_by=self.planning.issuer,
                        after_batch=min(r.batch_id for r in records if r.status == status) - 1,
                    )

        def files() -> Callable[[], None]:
            written = []
            for q, records in held.items():
                skipped = [
                    replace(r, status=BadRecordStatus.SKIPPED, handled_by=self.planning.issuer, handled_at=time.time())
                    for r in records
                ]
                letters = self.planning.snapshot.sources.get(dead_letters[q].name, dead_letters[q])
                if not letters.kafka_topic:  # a topic's: the runtime sends them as it resumes the query
                    written.append(append_dead_letters(letters, skipped))
            return lambda: remove_files(written)

        ids = ", ".join(q.id for q in chosen) or "no queries"
        verb = {DesiredState.PAUSED: "Paused", DesiredState.RUNNING: "Resumed", DesiredState.TERMINATED: "Terminated"}[
            target
        ]
        notes = [
            f"{q}: {len(r)} bad record(s) "
            + (f"skipped (sent to {dead_letters[q].name})" if stmt.skip_bad_records else "retried")
            for q, r in held.items()
        ]
        return Step(
            Result(
                stmt.text,
                f"{verb} {ids}" + (f"; {'; '.join(notes)}" if notes else ""),
                query_id=stmt.query_id,
                waits=[(q.id, target) for q in chosen],
            ),
            write=write,
            files=files if stmt.skip_bad_records else None,
        )

    def _holding(self, query: QueryInfo, skip: bool) -> list[BadRecord]:
        """The bad records holding ``query``: those it is paused at (policy PAUSE) and, to be
        skipped, those its next batch fails on (policy FAIL: recorded for a batch its
        checkpoint has not committed, so every retry fails on them again)."""
        records = self.planning.catalog.bad_records.of(query.id, BadRecordStatus.PENDING, self.planning.conn)
        if skip:
            committed = last_committed_batch(query.checkpoint)
            failed = self.planning.catalog.bad_records.of(query.id, BadRecordStatus.FAILED, self.planning.conn)
            records += [r for r in failed if r.batch_id > committed]
        return records

    def _dead_letters(self, query: QueryInfo) -> SourceInfo:
        """The dead-letter stream of ``query`` (the catalog's, if it has one already)."""
        sources = self.planning.snapshot.sources
        made = dead_letter_source(query, self.planning.home, dead_letter_topic(query, sources))
        return sources.get(made.name, made)

    def set_property(self, stmt: st.SetProperty) -> Step:
        if stmt.key in KSQL_VALUES and stmt.value is not None:
            values = KSQL_VALUES[stmt.key]
            if stmt.value.lower() not in values:
                raise error_at(f"{stmt.key} must be one of {', '.join(values)}, not {stmt.value!r}", stmt)
            stmt = replace(stmt, value=str(values[stmt.value.lower()]))
        if stmt.key in KSQL_ALIASES:
            stmt = replace(stmt, key=KSQL_ALIASES[stmt.key])
        if (reason := _without_effect(stmt.key)) is not None:
            # accepted, so that a pasted script runs, and said: nothing is recorded
            note = f"{stmt.key} has no effect in streamql: {reason}"
            return Step(Result(stmt.text, note, details={"notes": [note]}))
        allowed = SESSION_PROPERTIES.get(stmt.key)
        if allowed is None:
            raise error_at(f"unknown property {stmt.key!r} (known: {', '.join(SESSION_PROPERTIES)})", stmt)
        if stmt.value is None:
            self.planning.settings.pop(stmt.key, None)
            return Step(Result(stmt.text, f"Unset {stmt.key}", details={"set": {stmt.key: None}}))
        if stmt.key in SESSION_VALUES:
            try:
                value = SESSION_VALUES[stmt.key](stmt.value)
            except ValueError as e:
                raise error_at(f"{stmt.key} {stmt.value!r} is {e}", stmt) from None
            self.planning.settings[stmt.key] = value
            return Step(Result(stmt.text, f"Set {stmt.key} = {value}", details={"set": {stmt.key: value}}))
        if (reason := REFUSED_VALUES.get((stmt.key, stmt.value.lower()))) is not None:
            raise error_at(f"{stmt.key} = {stmt.value!r} is refused: {reason}; use {', '.join(allowed)}", stmt)
        if stmt.value.lower() not in allowed:
            raise error_at(f"{stmt.key} must be one of {', '.join(allowed)}, not {stmt.value!r}", stmt)
        self.planning.settings[stmt.key] = stmt.value.lower()
        set_to = {stmt.key: stmt.value.lower()}  # what a shell carries into its next request
        return Step(Result(stmt.text, f"Set {stmt.key} = {stmt.value.lower()}", details={"set": set_to}))


def _policy(text: str) -> str:
    """``SET 'on_error'``'s value as the policy recorded (a ValueError saying why not)."""
    if text.upper() not in tuple(OnError):
        raise ValueError(f"not one of {', '.join(OnError)}")
    return str(OnError(text.upper()))


def _without_effect(key: str) -> str | None:
    """Why ksqlDB's setting ``key`` has no effect here; None for any other key."""
    bare = key.removeprefix("ksql.streams.")
    if bare in KSQL_WITHOUT_EFFECT:
        return KSQL_WITHOUT_EFFECT[bare]
    return KSQL_GENERAL if key.startswith("ksql.") else None
