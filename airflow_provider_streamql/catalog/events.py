"""How far each consumer of query events has read: one cursor per consumer, query and kind
of event. Mixed into :class:`~.store.Catalog`; the events themselves are derived from the
catalog's state by :mod:`..views.events`."""

from __future__ import annotations

import time

from sqlalchemy import Engine, delete, func, insert, select

from . import schema as s
from .connections import write_connection
from .model import HOLD_ISSUER


class EventCursors:
    """The key of the last event of each kind delivered to a consumer, per query."""

    engine: Engine

    def event_cursors(self, consumer: str, query_id: str) -> dict[str, str | None]:
        """kind -> the last delivered event's key, for the kinds ``consumer`` has read."""
        t = s.event_cursors
        mine = select(t.c.kind, t.c.last_key).where(t.c.consumer == consumer, t.c.query_id == query_id)
        with self.engine.connect() as conn:
            return {kind: key for kind, key in conn.execute(mine)}

    def set_event_cursor(self, consumer: str, query_id: str, kind: str, key: str) -> None:
        """Record ``key`` as the last event of ``kind`` delivered to ``consumer``."""
        t = s.event_cursors
        where = (t.c.consumer == consumer, t.c.query_id == query_id, t.c.kind == kind)
        with write_connection(self.engine) as conn:
            conn.execute(delete(t).where(*where))
            conn.execute(
                insert(t).values(consumer=consumer, query_id=query_id, kind=kind, last_key=key, updated_at=time.time())
            )

    def last_hold(self, query_id: str) -> int | None:
        """The command-log number of the runtime's last PAUSE of ``query_id`` at a bad
        record (policy PAUSE), None if it never held it: one per hold."""
        c = s.commands
        holds = c.c.issuer.like(HOLD_ISSUER.format(runtime_id="%"))
        with self.engine.connect() as conn:
            return conn.execute(select(func.max(c.c.seq)).where(c.c.statement == f"PAUSE {query_id}", holds)).scalar()
