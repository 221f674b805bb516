"""When the runtime may act on a query again: what reconciling it decides, and the schedule
the loop keeps of those decisions.

Reconciling a query returns :class:`Done` (nothing is due before the next pass, which looks
again: only a look sees Spark stop a query), :class:`BackOff` (it failed: its next start
waits) or :class:`Stuck` (a terminal error: its version is not started again). The loop
records each decision in its :class:`Schedule`; the next observation of the query reads from
it how many failures in a row it has had, how long its back-off lasts and whether it is stuck.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the longest wait before a failed query is started again (seconds)
MAX_RETRY_DELAY = 60.0


@dataclass(frozen=True)
class Done:
    """Nothing is due before the next pass.

    ``failures``: the failures in a row the query keeps. A start that succeeds keeps them,
    so that a query failing at every first batch backs off further each time instead of
    being restarted every second; they are forgotten (0) once it is paused, held on bad
    records or rolled back."""

    failures: int = 0


@dataclass(frozen=True)
class BackOff:
    """The query failed (its start, or Spark stopped it): it is started again no sooner than
    ``after`` seconds from now, unless it should no longer run by then."""

    failures: int
    after: float

    @classmethod
    def after_failure(cls, failures: int) -> BackOff:
        """The back-off after one more failure than ``failures``: 1 s after the first,
        doubling up to :data:`MAX_RETRY_DELAY`."""
        return cls(failures + 1, min(MAX_RETRY_DELAY, 2.0**failures))


@dataclass(frozen=True)
class Stuck:
    """A terminal error: starting ``version`` ran the Spark driver out of memory, and would
    again, each time starving the driver's other queries; or its checkpoint is damaged. It
    stays in ERROR, and is not started again until it is paused (then resumed) or gets a new
    version."""

    version: int
    failures: int = 0


Next = Done | BackOff | Stuck


class Schedule:
    """The last decision about each query: its failures in a row and when it may be started
    again (a clock reading, ``time.monotonic()`` in the runtime)."""

    def __init__(self) -> None:
        self._due: dict[str, tuple[int, float]] = {}
        self._stuck: dict[str, int] = {}  # query id -> the version not started again

    def record(self, query_id: str, decision: Next, now: float) -> None:
        if isinstance(decision, Stuck):
            self._stuck[query_id] = decision.version
        else:
            self._stuck.pop(query_id, None)
        after = decision.after if isinstance(decision, BackOff) else 0.0
        if decision.failures or after:
            self._due[query_id] = (decision.failures, now + after)
        else:
            self._due.pop(query_id, None)

    def stuck(self, query_id: str) -> int | None:
        """The version of the query that is not started again (:class:`Stuck`), if any."""
        return self._stuck.get(query_id)

    def failures(self, query_id: str) -> int:
        return self._due.get(query_id, (0, 0.0))[0]

    def due_in(self, query_id: str, now: float) -> float:
        """Seconds until the query may be started again (0 when it may now)."""
        return max(0.0, self._due.get(query_id, (0, 0.0))[1] - now)
