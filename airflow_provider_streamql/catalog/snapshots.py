"""The catalog's record of each query's checkpoint snapshots; the copies themselves are
:mod:`..storage.snapshots`."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, replace

from sqlalchemy import Connection, Engine, delete, func, insert, select

from . import schema as s
from .connections import reading, write_connection
from .model import CheckpointSnapshot


class SnapshotRecords:
    """Which snapshots each query has: number, kind, version, batch and input position.
    Pass ``conn`` to read or write inside an open transaction."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def of(self, query_id: str, conn: Connection | None = None) -> list[CheckpointSnapshot]:
        """The query's snapshots, oldest first."""
        t = s.checkpoint_snapshots
        with reading(self.engine, conn) as c:
            rows = c.execute(select(t).where(t.c.query_id == query_id).order_by(t.c.number))
            return [CheckpointSnapshot.from_row(r) for r in rows]

    def add(self, snap: CheckpointSnapshot, conn: Connection | None = None) -> CheckpointSnapshot:
        """Record ``snap`` under the query's next number (its folder, if not given, is
        ``s<number>``); returns it numbered. An older record of the same folder (a version
        snapshotted again before another upgrade) is replaced: a folder holds one copy."""
        t = s.checkpoint_snapshots
        with self._writing(conn) as c:
            last = c.execute(select(func.max(t.c.number)).where(t.c.query_id == snap.query_id)).scalar()
            number = (last or 0) + 1
            snap = replace(snap, number=number, folder=snap.folder or f"s{number:04d}")
            c.execute(delete(t).where(t.c.query_id == snap.query_id, t.c.folder == snap.folder))
            c.execute(insert(t).values(**{**asdict(snap), "position": json.dumps(snap.position)}))
            return snap

    def remove(self, query_id: str, numbers: list[int], conn: Connection | None = None) -> None:
        t = s.checkpoint_snapshots
        with self._writing(conn) as c:
            c.execute(delete(t).where(t.c.query_id == query_id, t.c.number.in_(numbers)))

    def _writing(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        # exclusive: numbering (max + 1) must not race a statement's SNAPSHOT (PostgreSQL)
        return nullcontext(conn) if conn is not None else write_connection(self.engine, exclusive=True)
