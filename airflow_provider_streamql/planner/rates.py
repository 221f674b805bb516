"""``ALTER QUERY <query_id> SET max_records_per_batch|max_files_per_batch = n`` and ``ALTER
QUERY <query_id> UNSET ...``: a live query's rate limit (:mod:`..language.rates`), changed in
place. The change is a new version of the query with the same plan and the new setting, so
the runtime swaps it in as it swaps any in-place upgrade (the version that runs stops after
its in-flight batch, the checkpoint is snapshotted, the new one goes on from it with its
offsets and state) and a runtime that restarts reads it from the catalog. The validator
names it ``RATE_LIMIT_CHANGED`` (IN_PLACE)."""

from __future__ import annotations

import time
from dataclasses import replace

from ..catalog.states import DesiredState
from ..language import statements as st
from ..language.rates import RateLimits
from ..results import Result
from ..upgrades import validate_upgrade
from .planning import Planning, error_at, state_error_at
from .step import Step


class RateLimitStatements:
    """``ALTER QUERY``, planned in ``planning``."""

    def __init__(self, planning: Planning):
        self.planning = planning

    def alter_query(self, stmt: st.AlterQuery) -> Step:
        query = self.planning.query_named(stmt.query_id, stmt)
        if query.desired_state == DesiredState.TERMINATED:
            raise state_error_at(f"query {query.id} is terminated; its rate limit can no longer change", stmt)
        if stmt.value is not None and (
            problem := self.planning.rate_limit_problem(stmt.limit, query.plan, query.sources)
        ):
            raise error_at(f"ALTER QUERY {query.id}: {problem}", stmt)
        settings = {k: v for k, v in query.settings.items() if k != stmt.limit.value}
        if stmt.value is not None:
            settings[stmt.limit.value] = stmt.value
        old, new = RateLimits.of(query.settings), RateLimits.of(settings)
        if old == new:
            said = f"no {stmt.limit}" if stmt.value is None else f"{stmt.limit} = {stmt.value}"
            return Step(
                Result(
                    stmt.text,
                    f"Unchanged: {query.id} already has {said}",
                    query_id=query.id,
                    version=query.version,
                    action="unchanged",
                )
            )
        version = max(self.planning.catalog.next_version(self.planning.conn, query.id), query.version + 1)
        altered = replace(query, settings=settings, version=version, updated_at=time.time())
        policy = query.settings.get("on_error")
        report = validate_upgrade(query.id, query.shape, query.shape, policies=(policy, policy), rates=(old, new))
        sink = self.planning.snapshot.sources[query.sink]
        self.planning.snapshot.queries[query.id] = altered
        swap = (
            "it restarts from its checkpoint with its offsets and state"
            if query.desired_state == DesiredState.RUNNING
            else "it starts with it when resumed"
        )
        return Step(
            Result(
                stmt.text,
                f"Altered {query.id} in place: version {version}{report.policy_note} ({swap})",
                query_id=query.id,
                waits=[(query.id, altered.desired_state)],
                report=report.to_dict(),
                version=version,
                action="replaced",
            ),
            write=lambda conn: self.planning.catalog.add_version(conn, altered, sink, report.to_dict()),
        )
