"""Query events, derived from the catalog: a query caught up with its input, held at a bad
record, entered ERROR, or runs a new version. Each occurrence has a key of its own, and a
consumer's cursor in the catalog (:class:`~..catalog.events.EventCursors`) says which it has
been given, so an event reaches each consumer once however often it looks, across restarts.

``EventFeed`` is what an Airflow asset watcher's trigger polls (``triggers/events.py``,
through :meth:`~..engine.Engine.poll_events`); it is plain catalog reading, so any other
scheduler can poll it. It reads through anything that has the catalog (:class:`HasCatalog`:
an engine, a :class:`~.reader.Reader`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..catalog import BadRecordStatus, Catalog, DesiredState, QueryState
from ..errors import NotFoundError, ValidationError
from ..storage.checkpoints import processed_files
from .lag import caught_up_message, input_files, kafka_sources
from .rows import shown_state

#: the kinds of query events, and what each means
EVENTS = {
    "caught_up": "every input record written so far is processed and committed (file topics)",
    "held": "a bad record paused the query (WITH (on_error='PAUSE'))",
    "error": "the query entered ERROR",
    "upgraded": "a runtime runs a new version of the query",
}


class HasCatalog(Protocol):
    """What events are read through: the catalog (an engine has it)."""

    catalog: Catalog


@dataclass(frozen=True)
class QueryEvent:
    """One occurrence of an event: ``key`` tells it from every other of its kind."""

    kind: str
    query_id: str
    key: str
    pipeline: str
    version: int
    state: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, **{k: v for k, v in asdict(self).items() if k != "kind"}}


def check_events(kinds: object) -> list[str]:
    """``kinds`` as a list of known event kinds, or ValidationError naming the unknown."""
    if isinstance(kinds, str) or not isinstance(kinds, (list, tuple)) or not kinds:
        raise ValidationError(f"events must be a non-empty list of {', '.join(EVENTS)}, not {kinds!r}")
    unknown = [k for k in kinds if k not in EVENTS]
    if unknown:
        raise ValidationError(f"unknown query event(s) {unknown!r} (known: {', '.join(EVENTS)})")
    return list(dict.fromkeys(kinds))


@dataclass(frozen=True)
class Now:
    """A query's shown state and the events whose condition holds, by kind."""

    state: str
    events: dict[str, QueryEvent]


def current_events(reader: HasCatalog, query_id: str, kinds: tuple[str, ...] | list[str] = tuple(EVENTS)) -> Now:
    """The events of ``kinds`` whose condition holds for ``query_id`` now (each kind is
    looked at only when asked for: catching up lists the input files)."""
    catalog = reader.catalog
    query = catalog.query(query_id.upper())
    if query is None:
        raise NotFoundError(f"no query {query_id!r}")
    state = shown_state(query, catalog.leases.holders().get(query.id))
    common: dict[str, Any] = {
        "query_id": query.id,
        "pipeline": query.pipeline,
        "version": query.version,
        "state": state,
    }
    found: dict[str, QueryEvent] = {}
    if state == QueryState.ERROR and "error" in kinds:
        # the runtime retries with a back-off: the same failure again is the same event
        key = hashlib.sha256((query.error or "").encode()).hexdigest()[:16]
        found["error"] = QueryEvent("error", key=key, message=query.error or "", **common)
    held = "held" in kinds and query.desired_state == DesiredState.PAUSED
    pending = catalog.bad_records.of(query.id, status=BadRecordStatus.PENDING) if held else []
    if pending:
        hold = catalog.commands.last_hold(query.id)
        if hold is not None:
            first = pending[0]
            details = {
                "bad_records": len(pending),
                "batch_id": first.batch_id,
                "source": first.source,
                "error": first.error,
            }
            message = f"{query.id} is held at {len(pending)} bad record(s) of {first.source}: {first.error}"
            found["held"] = QueryEvent("held", key=str(hold), message=message, details=details, **common)
    if query.running_version == query.version > 1 and state == QueryState.RUNNING and "upgraded" in kinds:
        message = f"{query.id} runs version {query.version}"
        found["upgraded"] = QueryEvent("upgraded", key=f"v{query.version}", message=message, **common)
    progress = catalog.observed.progress(query.id) if "caught_up" in kinds and state == QueryState.RUNNING else None
    if progress is not None and not kafka_sources(catalog, query):  # caught up is measured on file topics
        wanted = input_files(catalog, query, time.time())
        if not wanted - processed_files(query.checkpoint):
            key = str(progress.batch_id)
            message = caught_up_message(query.id, len(wanted))
            found["caught_up"] = QueryEvent(
                "caught_up", key=key, message=message, details={"batch_id": progress.batch_id}, **common
            )
    return Now(state, found)


@dataclass
class EventFeed:
    """The events of ``kinds`` for ``query_id`` that ``consumer`` has not been given.

    ``poll`` returns them; ``acknowledge`` records one as given (after it was handed on, so
    a consumer that dies in between gets it again: at least once). A caught-up event is
    keyed by its batch and a hold by its PAUSE in the command log, which never repeat. An
    upgrade is a version above the last one given (a rollback to an older one is not). An
    ERROR is keyed by its error: the runtime's retries failing alike are one event, and the
    query running again re-arms it.
    """

    consumer: str
    query_id: str
    kinds: list[str]

    def poll(self, reader: HasCatalog) -> list[QueryEvent]:
        try:
            now = current_events(reader, self.query_id, self.kinds)
        except NotFoundError:  # not created yet, or dropped: nothing to tell
            return []
        query_id = self.query_id.upper()
        given = reader.catalog.event_cursors.of(self.consumer, query_id)
        if now.state == QueryState.RUNNING and given.get("error"):
            reader.catalog.event_cursors.set(self.consumer, query_id, "error", REARMED)
        return [e for k, e in now.events.items() if k in self.kinds and _is_new(e, given.get(k))]

    def acknowledge(self, reader: HasCatalog, event: QueryEvent) -> None:
        reader.catalog.event_cursors.set(self.consumer, event.query_id, event.kind, event.key)


#: the cursor of a kind whose next event is new whatever its key
REARMED = ""


def _is_new(event: QueryEvent, given: str | None) -> bool:
    if given is None or given == REARMED:
        return True
    if event.kind == "upgraded":  # "v<N>": only a later version
        return int(event.key[1:]) > int(given[1:])
    return event.key != given
