"""QueryEventTrigger: query events as Airflow asset events, for an ``AssetWatcher``."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from ..language.names import check_object_name
from ..planner.events import EventFeed, check_events
from .streamql import engine_of


class QueryEventTrigger(BaseEventTrigger):
    """Fire on each event of ``events`` of query ``query_id``: ``caught_up``, ``held`` (a
    bad record paused it), ``error`` (it entered ERROR), ``upgraded`` (a runtime runs a new
    version). Attach it to an Asset with an ``AssetWatcher`` and schedule a DAG on that
    Asset: each event becomes an asset event whose ``extra["payload"]`` is the event
    (``event``, ``query_id``, ``key``, ``pipeline``, ``version``, ``state``, ``message``,
    ``details``).

    The trigger polls the catalog and never ends. What it delivered is recorded in the
    catalog under ``consumer`` (default: one derived from its arguments, so watchers with
    the same arguments share it, as Airflow shares their trigger), so an event is delivered
    once, also across triggerer restarts (at least once: a triggerer that dies between
    handing an event on and recording it hands it on again).

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
        self.events = check_events(events)
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)) or not poll_interval > 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, not {poll_interval!r}")
        self.streamql_conn_id = streamql_conn_id
        self.poll_interval = poll_interval
        self.consumer = consumer or self._default_consumer()

    def _default_consumer(self) -> str:
        arguments = json.dumps([self.streamql_conn_id, self.query_id, self.events])
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

    async def run(self) -> AsyncIterator[TriggerEvent]:
        feed = EventFeed(self.consumer, self.query_id, self.events)
        engine = await engine_of(self.streamql_conn_id)
        try:
            while True:
                for event in await asyncio.to_thread(feed.poll, engine):
                    self.log.info("%s: %s", event.kind, event.message)
                    yield TriggerEvent(event.to_dict())
                    await asyncio.to_thread(feed.acknowledge, engine, event)
                await asyncio.sleep(self.poll_interval)
        finally:
            engine.close()
