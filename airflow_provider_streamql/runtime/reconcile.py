"""Reconciling one query: from its desired state and an :class:`~.observe.Observation`, what
to do now (a :class:`Step`) and when to act on it again (a :data:`~.schedule.Next`).

:func:`plan` decides from its two arguments alone (the tests hold it to a table).
:class:`Reconciler` takes the step through the runtime's parts (its Spark queries, leases,
the observed state it reports, the rollout in flight and the bad-record holds) and returns
the decision about the next look, which the loop keeps in its schedule.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, replace

from ..catalog import QueryInfo
from ..catalog.states import DesiredState, QueryState
from ..errors import CheckpointDamaged
from . import kafka
from .holds import Holds
from .leases import Leases
from .observe import Failure, Lease, Observation, Run, Upgrade
from .rollout import Rollout
from .schedule import BackOff, Done, Next, Stuck
from .spark_queries import SparkQueries
from .status import Status

log = logging.getLogger("streamql.runtime")


@dataclass(frozen=True)
class Desired:
    """What the catalog says a query should be: its state and current version."""

    state: DesiredState
    version: int

    @classmethod
    def of(cls, query: QueryInfo) -> Desired:
        return cls(DesiredState(query.desired_state), query.version)


class Step(enum.Enum):
    """What reconciling a query does now."""

    #: the lease was lost: stop it here if it runs, and forget the lease
    DROP = "drop"
    #: Spark stopped it on bad records: find them; hold it under PAUSE, else a failure
    FIND_BAD_RECORDS = "find bad records"
    #: Spark stopped the new version before it was ready: roll back to the previous one
    ROLL_BACK = "roll back"
    #: Spark stopped it: ERROR, and a start again after a back-off
    BACK_OFF = "back off"
    #: terminated and stopped: nothing to do
    LEAVE = "leave"
    TAKE_LEASE = "take lease"
    #: stop it after its in-flight batch (its checkpoint kept), or just say it is paused
    PAUSE = "pause"
    TERMINATE = "terminate"
    #: it should run and does not, but its back-off after a failure is not over (and no
    #: record it failed on was skipped since)
    WAIT = "wait"
    #: its start ran the driver out of memory, or its checkpoint is damaged: it stays in
    #: ERROR until paused or replaced
    STAY_FAILED = "stay failed"
    START = "start"
    #: it runs an older version: swap in the current one (:mod:`.rollout`)
    UPGRADE = "upgrade"
    #: it runs its current version: keep a ready upgrade, resolve retried bad records
    KEEP = "keep"


def plan(desired: Desired, seen: Observation) -> Step:
    """The step for a query that should be ``desired`` and is ``seen`` so."""
    if seen.lease is Lease.LOST:
        return Step.DROP
    if seen.run is Run.STOPPED:  # handled before anything else: whatever is desired
        if seen.failure is not None and seen.failure.bad_records:
            return Step.FIND_BAD_RECORDS
        return Step.ROLL_BACK if seen.upgrade is not Upgrade.NONE else Step.BACK_OFF
    if desired.state is DesiredState.TERMINATED and seen.reported == QueryState.TERMINATED and seen.run is Run.NONE:
        return Step.LEAVE
    if seen.lease is Lease.NOT_HELD:
        return Step.TAKE_LEASE
    if desired.state is DesiredState.PAUSED:
        return Step.PAUSE
    if desired.state is DesiredState.TERMINATED:
        return Step.TERMINATE
    if seen.run is Run.NONE:
        if seen.stuck == desired.version:
            return Step.STAY_FAILED
        return Step.WAIT if seen.retry_in > 0 and not seen.skipped else Step.START
    return Step.UPGRADE if seen.version != desired.version else Step.KEEP


class Reconciler:
    """Brings one query at a time to its desired state."""

    def __init__(self, queries: SparkQueries, leases: Leases, status: Status, rollout: Rollout, holds: Holds):
        self.queries, self.leases, self.status, self.rollout, self.holds = queries, leases, status, rollout, holds

    def reconcile(self, query: QueryInfo, seen: Observation) -> Next:
        desired = Desired.of(query)
        step = plan(desired, seen)
        if step is Step.TAKE_LEASE:
            epoch = self.leases.acquire(query.id)
            if epoch is None:  # another runtime holds it: never run it here
                return _as_before(seen)
            seen = replace(seen, lease=Lease.HELD, epoch=epoch)
            step = plan(desired, seen)
        if step is Step.LEAVE:
            return _as_before(seen)
        if step is Step.DROP:
            if self.queries.running(query.id) is not None:
                log.warning("lost the lease on %s; stopping it", query.id)
                self.queries.stop(query.id)
            self.leases.forget(query.id)
            self.queries.forget(query.id)
            return _as_before(seen)
        epoch = seen.epoch
        assert epoch is not None, "every step from here acts under the lease held"
        if step in (Step.FIND_BAD_RECORDS, Step.ROLL_BACK, Step.BACK_OFF):
            self.queries.stop(query.id)  # and its dead-letter companion, if it has one
            return self._failed(query, desired, seen, step, epoch)
        if step is Step.WAIT:
            return BackOff(seen.failures, seen.retry_in)
        if step is Step.STAY_FAILED:
            return _as_before(seen)
        if step is Step.START:
            return self._start(query, epoch, seen.failures)
        if step is Step.UPGRADE:
            assert seen.version is not None, "an upgrade swaps the version that runs"
            self.rollout.upgrade(query, epoch, seen.version)
            return self._start(query, epoch, seen.failures)
        if step is Step.KEEP:
            if seen.upgrade is Upgrade.READY:
                self.rollout.mark_ready(query)
            if seen.retried_committed:
                self.holds.resolve_retried(query)
            if seen.replaying:  # RETRYING until the batch it failed in commits
                return Done(seen.failures)
            self.status.report(query, QueryState.RUNNING, epoch)
            # a retry that ran the batch it failed in ends its failures in a row
            return Done(0 if seen.reported == QueryState.RETRYING else seen.failures)
        if step is Step.PAUSE:
            if seen.run is not Run.NONE:
                self.status.report(query, QueryState.PAUSING, epoch)
                self.queries.stop(query.id)
            self.status.report(query, QueryState.PAUSED, epoch)
            return Done()
        if seen.run is not Run.NONE:  # TERMINATE
            self.queries.stop(query.id)
        self.queries.forget(query.id)
        self.status.report(query, QueryState.TERMINATED, epoch)
        self.leases.release(query.id)
        return Done()

    def _failed(self, query: QueryInfo, desired: Desired, seen: Observation, step: Step, epoch: int) -> Next:
        """Spark stopped the query by itself (it is stopped here now)."""
        message = seen.failure.message if seen.failure is not None else None
        if step is Step.FIND_BAD_RECORDS:
            bad = self.holds.find(query, message) if message else None
            if bad is not None and bad.policy == "PAUSE":
                self.rollout.settle(query)  # the new version did not fail: the record is bad for it too
                self.holds.hold(query, epoch, bad)
                return Done()
            if bad is not None:
                self.holds.record(bad)
                message = bad.error
            # not held: a failure like any other from here
            step = plan(desired, replace(seen, failure=Failure(message)))
        if step is Step.ROLL_BACK:
            return self._roll_back(query, epoch, message or "stopped")
        message = message or "the streaming query stopped unexpectedly"
        back_off = BackOff.after_failure(seen.failures)
        log.error("query %s failed (retry in %.0fs): %s", query.id, back_off.after, message)
        self.status.failed(query, epoch, message, back_off.failures, back_off.after)
        return back_off

    def _start(self, query: QueryInfo, epoch: int, failures: int, note: str | None = None) -> Next:
        """Start the query's current version; a failure to start a pending new version
        rolls it back, any other backs off."""
        self.rollout.resume_window(query)
        self.status.report(query, QueryState.STARTING, epoch)
        try:
            running = self.queries.start(query, epoch)
        except Exception as e:
            message, retried = start_failure(e, query.version)
            if self.rollout.is_pending(query.id):
                return self._roll_back(query, epoch, message)
            if not retried:
                self.status.failed(query, epoch, message, failures + 1, None)
                log.error("query %s failed to start, not retried: %s", query.id, message)
                return Stuck(query.version, failures)
            back_off = BackOff.after_failure(failures)
            self.status.failed(query, epoch, message, back_off.failures, back_off.after)
            log.error("query %s failed to start (retry in %.0fs): %s", query.id, back_off.after, e)
            return back_off
        self.rollout.record_start(query)
        replays = running.replays if failures > 0 else None
        self.status.running(query, epoch, running.stream.runId, note, replays)
        return Done(failures)

    def _roll_back(self, query: QueryInfo, epoch: int, error: str) -> Next:
        failed = query.version
        restored = self.rollout.roll_back(query, epoch, error)
        # the restored version starts afresh: the failures were the new version's
        note = f"version {failed} failed and was rolled back: {error}"
        return self._start(restored, epoch, 0, note=note)


def _as_before(seen: Observation) -> Next:
    """Nothing done: the query's failures, back-off and terminal error stay as they were."""
    if seen.stuck is not None:
        return Stuck(seen.stuck, seen.failures)
    return BackOff(seen.failures, seen.retry_in) if seen.retry_in > 0 else Done(seen.failures)


#: how the JVM says the driver's heap is exhausted (a start that planned too much: a hopping
#: window with millions of windows per record took the driver out of memory)
OUT_OF_MEMORY = "java.lang.OutOfMemoryError"


def start_failure(error: BaseException, version: int) -> tuple[str, bool]:
    """The ERROR a start that raised ``error`` reports, and whether it is retried after the
    back-off. A start that ran the driver out of memory is not: it would again, each time
    starving the driver's other queries, and STARTING would hide why (PAUSE and RESUME, or
    a new version, start it again). Nor is a start refused on a damaged checkpoint: it
    needs a RESTORE (or a repair) first, which needs the query PAUSED."""
    if isinstance(error, CheckpointDamaged):
        return error.message, False
    message = kafka.error_report(error)
    if OUT_OF_MEMORY not in str(error):
        return message, True
    return (
        f"the Spark driver ran out of memory starting version {version} ({message}); not retried: "
        f"PAUSE and RESUME the query, or replace it with a version that needs less",
        False,
    )
