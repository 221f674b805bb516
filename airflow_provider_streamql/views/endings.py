"""How a wait ends, decided once for every wait form (``Engine.wait``, the CLI, the
operators, the sensors, the trigger): :func:`stopped` says, from what a wait sees of a query
(:class:`~.waits.QueryLook`), whether it can no longer get where the wait waits for it on its
own, and why; :class:`WaitEnd` is the ending a wait reports (:class:`Ending`)."""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..catalog import DesiredState, QueryState
from .waits import QueryLook


class Ending(enum.StrEnum):
    """How a wait ended: the CLI's exit code (0, 1, 3), the ``wait`` XCom's ``ending``."""

    #: what it waited for came true (the state reached, caught up, the version ready, ...)
    REACHED = "REACHED"
    #: it can no longer come true on its own (:class:`Stop`), or cannot be waited for
    FAILED_FAST = "FAILED_FAST"
    #: the timeout ran out first
    TIMED_OUT = "TIMED_OUT"


class Stop(enum.StrEnum):
    """Why a query can no longer get where a wait waits for it on its own."""

    ERROR = "ERROR"  # in ERROR, between the runtime's retries too
    TERMINATED = "TERMINATED"
    HELD = "HELD"  # paused by its runtime at a bad record (policy PAUSE)
    ROLLED_BACK = "ROLLED_BACK"  # the version waited on failed and was rolled back


@dataclass(frozen=True)
class Stopped:
    """A query a wait gives up on: why, its state, its last error (first line), where the
    bad record sits (``file:line``, or ``topic/partition@offset``) and what to do next."""

    query_id: str
    stop: Stop
    state: str
    error: str | None
    position: str | None
    advice: str
    #: the version rolled back (ROLLED_BACK)
    version: int | None = None

    #: what each stop says of the query ({q}: its ID, {v}: the version rolled back)
    SAID: ClassVar[dict[Stop, str]] = {
        Stop.ERROR: "query {q} is in ERROR",
        Stop.TERMINATED: "query {q} was terminated",
        Stop.HELD: "query {q} is held (PAUSED) at a bad record",
        Stop.ROLLED_BACK: "version {v} of {q} was rolled back",
    }
    #: what to do next ({q}: the query's ID, {running}: the version it runs)
    ADVICE: ClassVar[dict[Stop, str]] = {
        Stop.ERROR: (
            "the runtime retries it after a back-off: see its log, fix it with CREATE OR REPLACE, "
            "or PAUSE {q} (to wait through its retries: --through-retries, wait_through_retries=True)"
        ),
        Stop.TERMINATED: "a terminated query does not run again: create it anew",
        Stop.HELD: (
            "RESUME {q} SKIP BAD RECORDS sends the record to the dead-letter stream; or fix the "
            "definition with CREATE OR REPLACE, then RESUME {q}"
        ),
        Stop.ROLLED_BACK: "the runtime runs version {running} again: fix the statement and CREATE OR REPLACE again",
    }
    #: what to do next for an ERROR on a record the query cannot read (policy FAIL): every
    #: retry fails on it again
    ON_RECORD: ClassVar[str] = (
        "every retry fails on it again: RESUME {q} SKIP BAD RECORDS sends it to the dead-letter "
        "stream and runs the query on; CREATE OR REPLACE the query WITH (on_error='LOG_AND_CONTINUE') "
        "to send such records there from now on, or on_error='PAUSE' to hold at them"
    )

    def message(self, waiting_for: str) -> str:
        said = self.SAID[self.stop].format(q=self.query_id, v=self.version)
        error = f": {self.error}" if self.error else ""
        at = f" (at {self.position})" if self.position else ""
        return f"{said} while waiting for {waiting_for}{error}{at}; {self.advice}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "stop": str(self.stop),
            "state": self.state,
            "error": self.error,
            "position": self.position,
            "advice": self.advice,
        }


def stopped(seen: QueryLook, *, through_retries: bool = False, awaited: Collection[str] = ()) -> Stopped | None:
    """The one decision every wait takes about a query not (yet) where it waits for it:
    whether it can no longer get there on its own, and why. In order: the version waited on
    was rolled back, the query was terminated (unless TERMINATED is among the ``awaited``
    states), it is held at a bad record, it is in ERROR (unless the wait goes on
    ``through_retries``: the runtime starts it again after a back-off). A query someone
    paused may be resumed: waits go on."""
    record = seen.bad_record
    running = seen.running_version if seen.running_version is not None else seen.version
    if seen.rolled_back is not None:
        version, why = seen.rolled_back
        stop, error, record = Stop.ROLLED_BACK, why, None
    elif seen.desired == DesiredState.TERMINATED and QueryState.TERMINATED not in awaited:
        stop, error, record, version = Stop.TERMINATED, None, None, None
    elif seen.held:
        stop, error, version = Stop.HELD, None, None
    elif seen.failing and not through_retries:
        stop, error, version = Stop.ERROR, seen.error, None
    else:
        return None
    if record is not None:
        error = record.error.splitlines()[0] if record.error else error
    advice = Stopped.ON_RECORD if stop is Stop.ERROR and record is not None else Stopped.ADVICE[stop]
    return Stopped(
        seen.query_id,
        stop,
        str(seen.state),
        error,
        record.position if record is not None else None,
        advice.format(q=seen.query_id, running=running),
        version,
    )


@dataclass(frozen=True)
class WaitEnd:
    """How a wait ended: its :class:`Ending`, what it says, what it observed (``details``)
    and, when it failed fast on a query, why (``stopped``). ``to_dict`` is what the Airflow
    tasks push as their ``wait`` XCom."""

    ending: Ending
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    stopped: Stopped | None = None

    def to_dict(self) -> dict[str, Any]:
        stopped = self.stopped.to_dict() if self.stopped is not None else {}
        return {"ending": str(self.ending), "message": self.message, **stopped}
