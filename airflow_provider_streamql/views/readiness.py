"""Whether a shadow version is ready to be promoted (``PROMOTE ... WHEN READY``, the readiness
sensor, ``PromoteShadowOperator(when_ready=True)``), read from the two queries' checkpoints
and file topics: its input position has reached the live version's (it has read every input
file the live version has read) and its lag (input files it has not read) is within a
threshold. Materialize's ``deploy_await`` waits for the same: hydrated, lag under a bound.
How long it must stay so is the wait's (:class:`~..conditions.ShadowReady`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..catalog import Catalog, DesiredState, QueryInfo, QueryState
from ..errors import NotFoundError, StateError
from ..storage.checkpoints import processed_files
from . import lag
from .rows import shown_state


@dataclass(frozen=True)
class Readiness:
    """One look at a shadow and the live query it shadows: the input files the live version
    has read (``live_files``), how many of those the shadow has not (``behind``), the shadow's
    lag in input files, and both queries' shown states."""

    live: str
    shadow: str
    live_files: int
    behind: int
    lag: int
    live_state: str
    shadow_state: str

    def ready(self, max_lag: int) -> bool:
        """Caught up with the live version, its lag at most ``max_lag``, both running."""
        running = self.live_state == QueryState.RUNNING and self.shadow_state == QueryState.RUNNING
        return running and self.behind == 0 and self.lag <= max_lag

    def figures(self, max_lag: int) -> str:
        """Where the shadow stands, in the figures a user judges readiness by."""
        read = self.live_files - self.behind
        states = (
            ""
            if self.live_state == self.shadow_state == QueryState.RUNNING
            else f"; {self.shadow} is {self.shadow_state}, {self.live} is {self.live_state}"
        )
        return (
            f"{self.shadow} has read {read} of the {self.live_files} input file(s) {self.live} has read "
            f"({self.behind} behind), lag {self.lag} file(s) (at most {max_lag} wanted){states}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shadow_pair(catalog: Catalog, query_id: str) -> tuple[QueryInfo, QueryInfo]:
    """(live query, its running shadow) from either's ID; NotFoundError for an unknown ID,
    StateError when there is no shadow (any more)."""
    query = catalog.query(query_id)
    if query is None:
        raise NotFoundError(f"no query {query_id!r}")
    live_id = query.settings.get("shadow_of")
    live = catalog.query(live_id) if live_id else query
    shadow = (
        query
        if live_id
        else next(
            (
                q
                for q in catalog.queries()
                if q.settings.get("shadow_of") == query.id and q.desired_state != DesiredState.TERMINATED
            ),
            None,
        )
    )
    if live is None or shadow is None or shadow.desired_state == DesiredState.TERMINATED:
        ended = f" ({query.id} was promoted or discarded)" if live_id else ""
        raise StateError(f"query {live_id or query.id} has no shadow{ended}")
    return live, shadow


def readiness(catalog: Catalog, live: QueryInfo, shadow: QueryInfo) -> Readiness:
    """How far ``shadow`` is from being ready to replace ``live``."""
    leases = catalog.leases.holders()
    live_read = processed_files(live.checkpoint)
    return Readiness(
        live=live.id,
        shadow=shadow.id,
        live_files=len(live_read),
        behind=len(live_read - processed_files(shadow.checkpoint)),
        lag=lag.unprocessed_files(catalog, shadow),
        live_state=shown_state(live, leases.get(live.id)),
        shadow_state=shown_state(shadow, leases.get(shadow.id)),
    )
