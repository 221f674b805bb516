"""Observing a query: what this runtime holds for it, as one typed :class:`Observation`.

As the Flink Kubernetes Operator keeps its observer apart from its reconciler, the
:class:`Observer` only reads (Spark, the lease book, the rollout in flight, the checkpoint,
the schedule) and writes nothing; :mod:`.reconcile` decides from its observation and the
query's desired state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..catalog import QueryInfo
from ..storage.faults import full_disk_report
from ..storage.layout import allowed_roots_from_env, home_of_checkpoint
from ..views.rows import replaying
from . import kafka
from .holds import Holds
from .leases import Leases
from .rollout import Rollout
from .schedule import Schedule
from .spark_queries import Running, SparkQueries


class Lease(enum.Enum):
    """This runtime's lease on the query."""

    HELD = "held"
    #: none held here: it may be taken, unless another runtime holds it
    NOT_HELD = "not held"
    #: it was held and found lost (expired and taken, or released): another runtime may run it
    LOST = "lost"


class Run(enum.Enum):
    """The query's Spark query in this runtime."""

    NONE = "none"
    ACTIVE = "active"
    #: Spark stopped it by itself (see :attr:`Observation.failure`)
    STOPPED = "stopped"


class Upgrade(enum.Enum):
    """An in-place upgrade in flight (:mod:`.rollout`)."""

    NONE = "none"
    #: the new version is in its readiness window: a failure rolls it back
    PENDING = "pending"
    #: it committed a batch, or outlived its window: it is kept
    READY = "ready"


@dataclass(frozen=True)
class Failure:
    """Why Spark stopped a query by itself."""

    #: the error as reported (None: it stopped without one)
    message: str | None
    #: it failed on a record it cannot read: its guard's error or Spark's parse failure
    bad_records: bool = False


@dataclass(frozen=True)
class Observation:
    """What this runtime sees of one query at one look."""

    lease: Lease
    #: the observed state the catalog records (written by whoever ran it last)
    reported: str
    #: the epoch of the lease held (or lost)
    epoch: int | None = None
    run: Run = Run.NONE
    #: the version its Spark query runs
    version: int | None = None
    failure: Failure | None = None
    upgrade: Upgrade = Upgrade.NONE
    #: the batch a RESUME retried (after bad records) has committed
    retried_committed: bool = False
    #: failures in a row (:class:`~.schedule.Done`)
    failures: int = 0
    #: seconds until it may be started again after a failure (0: it may now)
    retry_in: float = 0.0
    #: the version whose start ran the driver out of memory (:class:`~.schedule.Stuck`)
    stuck: int | None = None
    #: records it failed on were skipped since its last start (RESUME ... SKIP BAD RECORDS
    #: under policy FAIL): its back-off is cut short
    skipped: bool = False
    #: RETRYING (started again after a failure) and the batch it failed in, which it runs
    #: again first, has not committed yet
    replaying: bool = False


class Observer:
    """Observes the queries of one runtime through the parts that hold them."""

    def __init__(
        self, queries: SparkQueries, leases: Leases, rollout: Rollout, holds: Holds, schedule: Schedule
    ) -> None:
        self.queries, self.leases, self.rollout, self.holds = queries, leases, rollout, holds
        self.schedule = schedule

    def observe(self, query: QueryInfo, now: float) -> Observation:
        """The query as this runtime holds it at ``now`` (a ``time.monotonic()`` reading)."""
        running = self.queries.running(query.id)
        epoch = self.leases.epoch(query.id)
        lease = Lease.NOT_HELD if epoch is None else Lease.LOST if self.leases.is_lost(query.id) else Lease.HELD
        run, failure = Run.NONE, None
        if running is not None:
            run, failure = (Run.STOPPED, self._failure(query, running)) if running.stopped else (Run.ACTIVE, None)
        upgrade = Upgrade.NONE
        if self.rollout.is_pending(query.id):
            upgrade = Upgrade.READY if self.rollout.is_ready(query, now) else Upgrade.PENDING
        retry_in = self.schedule.due_in(query.id, now)
        # read only while a failed query waits out its back-off, not at every look
        skipped = running is None and retry_in > 0 and self.holds.skipped_since_start(query)
        return Observation(
            lease=lease,
            reported=query.observed_state,
            epoch=epoch,
            run=run,
            version=running.version if running is not None else None,
            failure=failure,
            upgrade=upgrade,
            retried_committed=self.holds.retried_committed(query),
            failures=self.schedule.failures(query.id),
            retry_in=retry_in,
            stuck=self.schedule.stuck(query.id),
            skipped=skipped,
            replaying=run is Run.ACTIVE and replaying(query),
        )

    def _failure(self, query: QueryInfo, running: Running) -> Failure:
        error = running.exception()
        if error is None:
            return Failure(None)
        full = full_disk_report(
            query.id, _whole_text(error), [home_of_checkpoint(query.checkpoint), *allowed_roots_from_env()]
        )
        if full is not None:  # a full file system, not a bad record: its cause is deep in the stack
            return Failure(full)
        message = self.holds.guard_report(query, error) or kafka.error_report(error)
        return Failure(message, self.holds.is_bad_record_failure(query, message, error))


def _whole_text(error: object) -> str:
    """An error's message with the JVM's stack and causes (pyspark keeps them apart)."""
    return f"{getattr(error, 'desc', '')}\n{error}\n{getattr(error, '_stackTrace', '')}"
