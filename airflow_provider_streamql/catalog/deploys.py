"""The catalog's record of deploys: each apply of a deploy file that changed something, with
its file's fingerprint, who applied it and when, and for each query it changed the version
before and after and the checkpoint snapshot taken before, so that the whole deploy can be
rolled back (:mod:`..planner.deploys`)."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, insert, select, update

from . import schema as s
from .connections import reading


class DeployAction(enum.StrEnum):
    """What a deploy did to a query (and so what rolling it back does)."""

    #: the deploy created it: a rollback terminates it (its output is kept)
    CREATED = "CREATED"
    #: the deploy made a new version of it: a rollback returns it to the version before
    UPGRADED = "UPGRADED"
    #: unchanged, it reads (maybe through others) what an upgraded query writes: a rollback
    #: returns it to the same moment, so it reads that output again as the old version writes it
    READER = "READER"


@dataclass(frozen=True)
class DeployChange:
    """One query a deploy changed."""

    query_id: str
    action: DeployAction
    version_before: int | None
    version_after: int
    #: the number of the snapshot of its checkpoint taken before (None: it had committed no
    #: batch then, or was between two versions)
    snapshot: int | None = None


@dataclass(frozen=True)
class Deploy:
    """One apply of a deploy file that changed something."""

    id: int
    pipeline: str
    fingerprint: str
    issuer: str
    applied_at: float
    changes: tuple[DeployChange, ...]
    rolled_back_at: float | None = None
    rolled_back_by: str | None = None

    @property
    def rolled_back(self) -> bool:
        return self.rolled_back_at is not None


class DeployRecords:
    """Which deploys a catalog has seen. Writes take the open transaction of the statement
    that records or rolls back the deploy; reads may pass ``conn`` to read inside one."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def add(self, conn: Connection, pipeline: str, fingerprint: str, issuer: str, changes: list[DeployChange]) -> int:
        """Record a deploy and its changes; its id."""
        result = conn.execute(
            insert(s.deploys).values(pipeline=pipeline, fingerprint=fingerprint, issuer=issuer, applied_at=time.time())
        )
        key = result.inserted_primary_key
        assert key is not None, "an insert has its primary key"
        deploy_id = int(key[0])
        for c in changes:
            conn.execute(
                insert(s.deploy_changes).values(
                    deploy_id=deploy_id,
                    query_id=c.query_id,
                    action=c.action.value,
                    version_before=c.version_before,
                    version_after=c.version_after,
                    snapshot=c.snapshot,
                )
            )
        return deploy_id

    def get(self, deploy_id: int, conn: Connection | None = None) -> Deploy | None:
        found = self._read(s.deploys.c.id == deploy_id, conn)
        return found[0] if found else None

    def of(self, pipeline: str, conn: Connection | None = None) -> list[Deploy]:
        """The pipeline's deploys, oldest first."""
        return self._read(s.deploys.c.pipeline == pipeline, conn)

    def mark_rolled_back(self, conn: Connection, deploy_id: int, issuer: str) -> None:
        conn.execute(
            update(s.deploys)
            .where(s.deploys.c.id == deploy_id)
            .values(rolled_back_at=time.time(), rolled_back_by=issuer)
        )

    def _read(self, where, conn: Connection | None) -> list[Deploy]:
        d, c = s.deploys, s.deploy_changes
        with reading(self.engine, conn) as conn:
            rows = conn.execute(select(d).where(where).order_by(d.c.id)).all()
            ids = [r.id for r in rows]
            changes: dict[int, list[DeployChange]] = {i: [] for i in ids}
            if ids:
                for r in conn.execute(select(c).where(c.c.deploy_id.in_(ids)).order_by(c.c.query_id)):
                    changes[r.deploy_id].append(
                        DeployChange(r.query_id, DeployAction(r.action), r.version_before, r.version_after, r.snapshot)
                    )
        return [
            Deploy(
                r.id,
                r.pipeline,
                r.fingerprint,
                r.issuer,
                r.applied_at,
                tuple(changes[r.id]),
                r.rolled_back_at,
                r.rolled_back_by,
            )
            for r in rows
        ]
