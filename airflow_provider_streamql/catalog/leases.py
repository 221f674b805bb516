"""Who runs what: the runtimes that heartbeat into the catalog (:class:`Runtimes`) and the
leases, with epochs, by which one runtime at a time runs a query (:class:`Leases`).

A lease is also the fence of what a runtime writes for a query: its observed state
(:mod:`.observed`) and a hold at a bad record (:mod:`.bad_records`) are written only while
the runtime holds the query's lease under the epoch it took, checked in the transaction of
the write (:meth:`Leases.held`)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from . import schema as s
from .connections import reading, write_connection


class Leases:
    """The lease on each query: which runtime holds it, under which epoch, until when."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def holders(self, conn: Connection | None = None) -> dict[str, dict[str, Any]]:
        """query id -> {runtime_id, epoch, expires_at, heartbeat_at} of its lease holder
        (pass ``conn`` to read inside an open transaction)."""
        stmt = select(s.leases, s.runtimes.c.heartbeat_at).join(
            s.runtimes, s.runtimes.c.id == s.leases.c.runtime_id, isouter=True
        )
        with reading(self.engine, conn) as conn:
            return {r.query_id: dict(r._mapping) for r in conn.execute(stmt)}

    def acquire(self, query_id: str, runtime_id: str, ttl: float) -> int | None:
        """Take or renew the lease on a query. Returns the epoch held, or None if another
        runtime holds a live lease. A take (not a renewal) increments the epoch."""
        now = time.time()
        with write_connection(self.engine) as conn:
            row = conn.execute(select(s.leases).where(s.leases.c.query_id == query_id)).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            insert(s.leases).values(
                                query_id=query_id, runtime_id=runtime_id, epoch=1, expires_at=now + ttl
                            )
                        )
                    return 1
                except IntegrityError:
                    return None
            if row.runtime_id == runtime_id:
                epoch = row.epoch
            elif row.expires_at < now:
                epoch = row.epoch + 1
            else:
                return None
            # The WHERE re-checks what was read, so two takers cannot both win.
            done = conn.execute(
                update(s.leases)
                .where(
                    s.leases.c.query_id == query_id,
                    s.leases.c.epoch == row.epoch,
                    s.leases.c.runtime_id == row.runtime_id,
                )
                .values(runtime_id=runtime_id, epoch=epoch, expires_at=now + ttl)
            ).rowcount
            return epoch if done else None

    def renew(self, query_id: str, runtime_id: str, epoch: int, ttl: float) -> bool:
        """Extend a held lease; False means it was lost (expired and taken, or released)."""
        with write_connection(self.engine) as conn:
            return bool(
                conn.execute(
                    update(s.leases)
                    .where(
                        s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id, s.leases.c.epoch == epoch
                    )
                    .values(expires_at=time.time() + ttl)
                ).rowcount
            )

    def renew_all(self, runtime_id: str, epochs: dict[str, int], ttl: float) -> dict[str, int]:
        """Extend every lease in ``epochs`` (query id -> epoch held) in one transaction.
        Returns the ones that were lost (expired and taken, or released), with their epoch."""
        if not epochs:
            return {}
        with write_connection(self.engine) as conn:
            renewed = conn.execute(
                update(s.leases)
                .where(s.leases.c.runtime_id == runtime_id, s.leases.c.query_id.in_(sorted(epochs)))
                .values(expires_at=time.time() + ttl)
                .returning(s.leases.c.query_id, s.leases.c.epoch)
            )
            held = {r.query_id for r in renewed if epochs[r.query_id] == r.epoch}
        return {q: e for q, e in epochs.items() if q not in held}

    def release(self, query_id: str, runtime_id: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(delete(s.leases).where(s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id))

    @staticmethod
    def release_all(conn: Connection, runtime_id: str) -> None:
        """Release every lease ``runtime_id`` holds, in the transaction of ``conn``."""
        conn.execute(delete(s.leases).where(s.leases.c.runtime_id == runtime_id))

    @staticmethod
    def held(conn: Connection, query_id: str, runtime_id: str, epoch: int | None) -> bool:
        """``runtime_id`` holds the lease on ``query_id`` under ``epoch``: the fence, checked
        in the transaction of the write it guards."""
        held = select(s.leases.c.query_id).where(
            s.leases.c.query_id == query_id, s.leases.c.runtime_id == runtime_id, s.leases.c.epoch == epoch
        )
        return conn.execute(held).first() is not None


class Runtimes:
    """The runtimes of every pipeline: where each runs, its Spark application, its last
    heartbeat; a runtime that stops gives up its ``leases``."""

    def __init__(self, engine: Engine, leases: Leases):
        self.engine = engine
        self.leases = leases

    def all(self, conn: Connection | None = None) -> list[dict[str, Any]]:
        """Every runtime that ever heartbeated, oldest first (stopped ones too)."""
        with reading(self.engine, conn) as conn:
            return [dict(r._mapping) for r in conn.execute(select(s.runtimes).order_by(s.runtimes.c.started_at))]

    def heartbeat(self, runtime_id: str, pipeline: str, host: str, pid: int, **spark: str | bool | None) -> None:
        """Record that a runtime is alive; the first beat registers it with ``spark``'s
        ``spark_app_id``, ``spark_ui_url`` and ``master``, and ``kafka`` (whether it has Kafka
        bootstrap servers: what a CREATE naming a topic is checked against)."""
        now = time.time()
        with write_connection(self.engine) as conn:
            done = conn.execute(
                update(s.runtimes).where(s.runtimes.c.id == runtime_id).values(heartbeat_at=now)
            ).rowcount
            if not done:
                conn.execute(
                    insert(s.runtimes).values(
                        id=runtime_id, pipeline=pipeline, host=host, pid=pid, started_at=now, heartbeat_at=now, **spark
                    )
                )

    def stopped(self, runtime_id: str) -> None:
        """Record that a runtime stopped; its leases are released with it."""
        with write_connection(self.engine) as conn:
            conn.execute(update(s.runtimes).where(s.runtimes.c.id == runtime_id).values(stopped_at=time.time()))
            self.leases.release_all(conn, runtime_id)
