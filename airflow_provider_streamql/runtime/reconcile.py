"""Reconciling one query: what to do given its desired state and what this runtime observes.

Each pass, for each query of the pipeline, :class:`Reconciler` first *observes*: did Spark
stop a query this runtime runs? (Its guard's error is a bad-record hold, a pending new
version's failure a rollback, anything else an ERROR retried after a back-off.) Then it
*reconciles*: with the query's lease, start what should run, upgrade what runs an older
version, pause or terminate what should not run, and report the observed state.

It is apart from the driver (the loop, leases, starting and stopping Spark queries) and
from the upgrade and bad-record machinery, so that the decisions can be read in one place;
it acts only through the :class:`Driver` protocol, a :class:`~.rollout.Rollout` and a
:class:`~.holds.Holds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pyspark.sql.streaming import StreamingQuery

from ..catalog import QueryInfo
from . import kafka
from .holds import Holds
from .rollout import Rollout


@dataclass
class Running:
    """A query this runtime runs: its Spark query, the lease epoch and version it runs under."""

    stream: StreamingQuery
    epoch: int
    version: int
    #: LOG_AND_CONTINUE: the companion query sending bad records to the dead-letter stream
    dead_letters: StreamingQuery | None = None

    @property
    def stopped(self) -> bool:
        """Spark stopped it (or its companion) by itself."""
        return not self.stream.isActive or (self.dead_letters is not None and not self.dead_letters.isActive)

    def exception(self):
        """Why Spark stopped it, if it failed."""
        return self.stream.exception() or (self.dead_letters.exception() if self.dead_letters is not None else None)


class Driver(Protocol):
    """What the reconciler acts through: the runtime's leases and Spark queries."""

    def running(self, query_id: str) -> Running | None: ...

    def take_lease(self, query: QueryInfo) -> int | None:
        """The query's lease, held or acquired: its epoch, or None if another runtime holds
        it (a query whose lease was lost is stopped before the pass reconciles it)."""

    def release_lease(self, query_id: str) -> None: ...

    def start_query(self, query: QueryInfo, epoch: int, note: str | None = None) -> None: ...

    def stop_query(self, query_id: str) -> int | None: ...

    def report(self, query: QueryInfo, state: str, epoch: int, error: str | None = None) -> None: ...

    def failed(self, query: QueryInfo, epoch: int, message: str) -> None:
        """Report the query's ERROR and schedule its restart after a back-off."""

    def clear_back_off(self, query_id: str) -> None: ...


class Reconciler:
    """Brings one query at a time to its desired state."""

    def __init__(self, driver: Driver, rollout: Rollout, holds: Holds):
        self.driver, self.rollout, self.holds = driver, rollout, holds

    def reconcile(self, query: QueryInfo) -> None:
        driver = self.driver
        if (
            query.desired_state == "TERMINATED"
            and query.observed_state == "TERMINATED"
            and driver.running(query.id) is None
        ):
            return
        if self.observe(query):
            return  # rolled back or held: the next pass sees the restored version
        epoch = driver.take_lease(query)
        if epoch is None:  # another runtime holds it: never run it here
            return
        running = driver.running(query.id)
        desired = query.desired_state
        if desired == "RUNNING":
            if running is None:
                driver.start_query(query, epoch)
            elif running.version != query.version:
                self.rollout.upgrade(query, epoch, running.version)
            else:
                self.rollout.check_readiness(query)
                self.holds.check_retried(query)
                driver.report(query, "RUNNING", epoch)
        elif desired == "PAUSED":
            driver.clear_back_off(query.id)
            if running is not None:
                driver.report(query, "PAUSING", epoch)
                driver.stop_query(query.id)
            driver.report(query, "PAUSED", epoch)
        else:
            if running is not None:
                driver.stop_query(query.id)
            driver.report(query, "TERMINATED", epoch)
            driver.release_lease(query.id)

    def observe(self, query: QueryInfo) -> bool:
        """Handle a query Spark stopped by itself; True if that rolled back an upgrade or
        held the query on bad records."""
        running = self.driver.running(query.id)
        if running is None or not running.stopped:
            return False
        self.driver.stop_query(query.id)  # both of its streaming queries
        error = running.exception()
        message = kafka.error_report(error) if error is not None else None
        if message is not None and self.holds.is_bad_record_failure(query, message, error):
            held, message = self.holds.hold(query, running.epoch, message)
            if held:
                return True
        if self.rollout.is_pending(query.id):  # the new version failed before it was ready
            self.rollout.roll_back(query, running.epoch, message or "stopped")
            return True
        self.driver.failed(query, running.epoch, message or "the streaming query stopped unexpectedly")
        return False
