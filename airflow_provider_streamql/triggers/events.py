"""QueryEventTrigger: query events as Airflow asset events, for an ``AssetWatcher``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from ..engine import Engine, QueryEvent
from ..language import check_object_name
from .streamql import check_seconds, engine_of

try:
    from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer
except ImportError:  # Airflow before 3.3: no acknowledged shared streams; run() acknowledges
    AdvanceItem = Any  # type: ignore[misc,assignment]
    SharedStreamProducer = object  # type: ignore[misc,assignment]

log = logging.getLogger(__name__)

#: longest back-off between attempts to read a catalog that cannot be reached
MAX_RETRY_DELAY = 60.0
#: a consumer name is stored in the catalog (event_cursors.consumer)
MAX_CONSUMER_LENGTH = 255


class QueryEventTrigger(BaseEventTrigger):
    """Fire on each event of ``events`` of query ``query_id``: ``caught_up``, ``held`` (a
    bad record paused it), ``error`` (it entered ERROR), ``upgraded`` (a runtime runs a new
    version). Attach it to an Asset with an ``AssetWatcher`` and schedule a DAG on that
    Asset: each event becomes an asset event whose ``extra["payload"]`` is the event
    (``event``, ``query_id``, ``key``, ``pipeline``, ``version``, ``state``, ``message``,
    ``details``).

    The trigger polls the catalog and never ends; a catalog it cannot reach is retried with
    a growing back-off. What it delivered is recorded in the catalog under ``consumer``
    (default: derived from its arguments, so watchers with the same arguments share it, as
    Airflow shares their trigger) once Airflow has saved the asset event (the triggerer's
    acknowledged shared stream, Airflow 3.3 and later), so each event is delivered at least
    once, and once as long as the catalog can be written. (Before Airflow 3.3, an event is
    recorded when the triggerer asks for the next one.)

    :param query_id: the query to watch (it may not exist yet).
    :param events: the kinds of events to fire on.
    :param streamql_conn_id: the ``streamql`` connection of its catalog.
    :param poll_interval: seconds between looks at the catalog.
    :param consumer: the name its delivered events are recorded under.
    """

    def __init__(
        self,
        *,
        query_id: str,
        events: list[str],
        streamql_conn_id: str = "streamql_default",
        poll_interval: float = 5.0,
        consumer: str | None = None,
    ):
        super().__init__()
        self.query_id = check_object_name(query_id, "query_id")
        self.events = Engine.check_events(events)
        check_seconds(poll_interval, "poll_interval")
        if consumer is not None and (not isinstance(consumer, str) or not 0 < len(consumer) <= MAX_CONSUMER_LENGTH):
            raise ValueError(f"consumer must be a name of 1 to {MAX_CONSUMER_LENGTH} characters, not {consumer!r}")
        self.streamql_conn_id = streamql_conn_id
        self.poll_interval = poll_interval
        self.consumer = consumer or self._default_consumer()

    def _default_consumer(self) -> str:
        arguments = json.dumps([self.streamql_conn_id, self.query_id, self.events, self.poll_interval])
        return f"airflow-watcher:{self.query_id}:{hashlib.sha256(arguments.encode()).hexdigest()[:12]}"

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "query_id": self.query_id,
                "events": self.events,
                "streamql_conn_id": self.streamql_conn_id,
                "poll_interval": self.poll_interval,
                "consumer": self.consumer,
            },
        )

    # -- in the triggerer: an acknowledged shared stream ------------------------------------
    def shared_stream_key(self) -> tuple[str, str]:
        """One poll per consumer; its events are recorded only once Airflow saved them."""
        return ("streamql-query-events", self.consumer)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> QueryEventProducer:
        return QueryEventProducer(cls(**kwargs))

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        async for payload in shared_stream:
            yield TriggerEvent(payload)

    # -- anywhere else (a triggerer without shared streams, a test) ------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Each event, recorded as delivered when the next one is asked for."""
        producer = QueryEventProducer(self)
        try:
            async for payload, event in producer.open_stream():
                yield TriggerEvent(payload)
                await producer.saved([event])
        finally:
            await producer.aclose()


class QueryEventProducer(SharedStreamProducer):
    """Polls the catalog for the trigger's events and records each one delivered once the
    triggerer says every subscriber's asset event is saved (``advance``); an event not yet
    recorded is not handed out twice by this poll, and is handed out again by the next
    (after a triggerer restart) if it never was."""

    def __init__(self, trigger: QueryEventTrigger):
        self.trigger = trigger
        self.engine: Engine | None = None
        self.in_flight: set[tuple[str, str]] = set()  # handed out, not yet recorded
        self.delivered: list[QueryEvent] = []  # saved by Airflow, not yet recorded

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        delay = self.trigger.poll_interval
        while True:
            try:
                if self.engine is None:
                    self.engine = await engine_of(self.trigger.streamql_conn_id)
                await self._record_delivered()
                events = await asyncio.to_thread(
                    self.engine.poll_events, self.trigger.consumer, self.trigger.query_id, self.trigger.events
                )
                delay = self.trigger.poll_interval
            except Exception as e:  # the catalog or connection is not there: try again later
                delay = min(MAX_RETRY_DELAY, delay * 2)
                log.warning("query events of %s: %s (retry in %gs)", self.trigger.query_id, e, delay)
                self._close()
                await asyncio.sleep(delay)
                continue
            for event in events:
                if (event.kind, event.key) not in self.in_flight:
                    self.in_flight.add((event.kind, event.key))
                    log.info("%s: %s", event.kind, event.message)
                    yield event.to_dict(), event
            await asyncio.sleep(self.trigger.poll_interval)

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        for item in batch:
            if not item.outcome.is_clean:  # not saved: the next poll hands it out again
                self.in_flight.discard((item.broker_payload.kind, item.broker_payload.key))
        await self.saved([item.broker_payload for item in batch if item.outcome.is_clean])

    async def saved(self, events: list[QueryEvent]) -> None:
        """Record ``events`` as delivered (Airflow saved their asset events)."""
        self.delivered += events
        try:
            await self._record_delivered()
        except Exception as e:  # kept, and recorded by the next poll
            log.warning("query events of %s: could not record delivery yet: %s", self.trigger.query_id, e)

    async def _record_delivered(self) -> None:
        while self.delivered and self.engine is not None:
            event = self.delivered[0]
            await asyncio.to_thread(self.engine.acknowledge_event, self.trigger.consumer, event)
            self.delivered.pop(0)
            self.in_flight.discard((event.kind, event.key))

    async def aclose(self) -> None:
        self._close()

    def _close(self) -> None:
        if self.engine is not None:
            engine, self.engine = self.engine, None
            engine.close()
