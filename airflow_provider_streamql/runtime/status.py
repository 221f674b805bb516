"""Writing a query's observed state to the catalog, only while this runtime's lease on it is
held at the epoch it acts under (a fenced runtime's writes change nothing).

The :class:`~airflow_provider_streamql.catalog.QueryInfo` a pass reads is kept in step with
what was written, so that a state written once is not written again by the same pass.
"""

from __future__ import annotations

import logging
import time

from ..catalog import Catalog, QueryInfo
from ..catalog.states import QueryState

log = logging.getLogger("streamql.runtime")


class Status:
    """The observed state ``runtime_id`` reports of its queries."""

    def __init__(self, catalog: Catalog, runtime_id: str):
        self.catalog, self.runtime_id = catalog, runtime_id

    def report(self, query: QueryInfo, state: QueryState, epoch: int, error: str | None = None) -> None:
        """Write an observed state (unless unchanged)."""
        if query.observed_state == state and (error is None or query.error == error):
            return  # unchanged (a note such as a rollback's stays until the state changes)
        if self.catalog.observed.set(query.id, state, error, runtime_id=self.runtime_id, epoch=epoch):
            query.observed_state, query.error = state, error
            if state in (QueryState.RUNNING, QueryState.PAUSED, QueryState.TERMINATED):
                query.failures = query.retry_at = None
            log.info("%s %s%s", query.id, state, f": {error}" if error else "")

    def running(
        self, query: QueryInfo, epoch: int, run_id: str, note: str | None = None, replays: int | None = None
    ) -> None:
        """The query's current version started as Spark run ``run_id``; ``note`` is shown
        as its error until the state changes (why it runs this version). ``replays``: it was
        started again after it failed, and runs that batch again first; it is RETRYING, its
        last error and failures kept, until that batch commits."""
        retrying = replays is not None
        state = QueryState.RETRYING if retrying else QueryState.RUNNING
        if self.catalog.observed.set(
            query.id,
            state,
            note,
            runtime_id=self.runtime_id,
            epoch=epoch,
            running_version=query.version,
            run_id=run_id,
            retry_batch=replays,
        ):
            query.observed_state, query.retry_batch = state, replays
            if not retrying:
                query.error, query.failures = note, None
            query.retry_at = None

    def failed(self, query: QueryInfo, epoch: int, message: str, failures: int, retry_in: float | None) -> None:
        """The query failed with ``message`` (Spark stopped it, or it failed to start), for the
        ``failures``-th time in a row; it is started again in ``retry_in`` seconds (None: not
        again on its own). Written even if the same as before: the retry it waits for is not."""
        retry_at = None if retry_in is None else time.time() + retry_in
        self.catalog.observed.set(
            query.id,
            QueryState.ERROR,
            message,
            runtime_id=self.runtime_id,
            epoch=epoch,
            failures=failures,
            retry_at=retry_at,
        )
        query.observed_state, query.error = QueryState.ERROR, message
        query.failures, query.retry_at = failures, retry_at

    def unassigned(self, query_id: str, epoch: int | None) -> None:
        """The runtime is stopping: the query waits for the next runtime."""
        self.catalog.observed.set(query_id, QueryState.UNASSIGNED, runtime_id=self.runtime_id, epoch=epoch)
