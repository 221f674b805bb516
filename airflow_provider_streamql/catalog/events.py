"""How far each consumer of query events has read: one cursor per consumer, query and kind
of event. The events themselves are derived from the catalog's state by :mod:`..views.events`."""

from __future__ import annotations

import time

from sqlalchemy import Engine, delete, insert, select

from . import schema as s
from .connections import write_connection


class EventCursors:
    """The key of the last event of each kind delivered to a consumer, per query."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def of(self, consumer: str, query_id: str) -> dict[str, str | None]:
        """kind -> the last delivered event's key, for the kinds ``consumer`` has read."""
        t = s.event_cursors
        mine = select(t.c.kind, t.c.last_key).where(t.c.consumer == consumer, t.c.query_id == query_id)
        with self.engine.connect() as conn:
            return {kind: key for kind, key in conn.execute(mine)}

    def set(self, consumer: str, query_id: str, kind: str, key: str) -> None:
        """Record ``key`` as the last event of ``kind`` delivered to ``consumer``."""
        t = s.event_cursors
        where = (t.c.consumer == consumer, t.c.query_id == query_id, t.c.kind == kind)
        with write_connection(self.engine) as conn:
            conn.execute(delete(t).where(*where))
            conn.execute(
                insert(t).values(consumer=consumer, query_id=query_id, kind=kind, last_key=key, updated_at=time.time())
            )
