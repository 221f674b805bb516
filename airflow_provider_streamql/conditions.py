"""What a wait waits for, as data: a query reaching a state, a version becoming ready,
progress since a point, catching up with the input; how a wait ends; and which queries need
attention.

A condition is checked against an :class:`~airflow_provider_streamql.engine.Engine` (any
:class:`QueryView`) and
never blocks, so the same object serves ``Engine.wait``, the CLI, a sensor's poke and a
deferrable trigger. ``to_dict``/``from_dict`` carry it across a trigger's serialisation.

Every wait form ends the same way: each condition looks at its queries
(:func:`~.views.waits.look`) and asks the one decision, :func:`~.views.endings.stopped`,
whether they can no longer get there on their own; :func:`end_of` turns a check into the
wait's :class:`~.views.endings.WaitEnd` (:class:`~.views.endings.Ending`: REACHED,
FAILED_FAST or TIMED_OUT).
"""

# long module: the conditions a wait waits on are one idea, each a small class read beside
# the others; how a wait ends is decided apart (views/endings.py), on what views/waits.py
# observes.
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

from .catalog import Catalog, DesiredState, Progress, QueryInfo, QueryState
from .errors import StateError, StreamQLError, ValidationError
from .storage.checkpoints import last_committed_batch, processed_files
from .storage.kafka_topics import KafkaSettings
from .views import lag, readiness
from .views.endings import Ending, Stop, Stopped, WaitEnd, stopped
from .views.rows import shown_state
from .views.waits import doing, look, looks

__all__ = ["Condition", "Check", "QueriesInState", "VersionRunning", "ProgressSince", "CaughtUp", "ShadowReady"]
__all__ += ["AllOf"]
__all__ += ["Ending", "Stop", "Stopped", "WaitEnd", "end_of", "stopped", "unhealthy_queries"]
__all__ += ["unprocessed_files", "lag_files", "CONDITIONS", "QueryView"]


class QueryView(Protocol):
    """What a condition reads; :class:`~airflow_provider_streamql.engine.Engine` is one.
    (A protocol, so that the engine, which waits on conditions, is not imported here.)"""

    catalog: Catalog
    pipeline: str
    kafka: KafkaSettings

    def query(self, query_id: str) -> QueryInfo: ...

    def state(self, query_id: str) -> str: ...

    def progress(self, query_id: str) -> Progress | None: ...

    def queries(self, pipeline: str | None = None) -> list[dict[str, Any]]: ...


@dataclass
class Check:
    """One look at a condition: ``done``; or ``failed`` (it can no longer come true:
    ``stopped`` says why when a query is to blame); else still waiting. ``message`` says
    where things stand; ``details`` is for XCom."""

    done: bool
    message: str
    failed: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    stopped: Stopped | None = None

    @classmethod
    def stop(cls, stopped: Stopped, waiting_for: str, details: dict[str, Any]) -> Check:
        """The check of a wait that gives up on a query."""
        return cls(False, stopped.message(waiting_for), failed=True, details=details, stopped=stopped)


class Condition:
    """Base of every condition; subclasses are dataclasses with JSON-friendly fields."""

    kind: ClassVar[str]

    def check(self, engine: QueryView) -> Check:
        raise NotImplementedError

    def watched(self) -> list[str]:
        """The queries a timed-out wait says what they were doing (those it waited on)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}  # type: ignore[call-overload]  # every Condition is a dataclass

    def through_retries_too(self) -> Condition:
        """This condition, waiting through the runtime's retries of a query in ERROR."""
        return Condition.from_dict({**self.to_dict(), "through_retries": True})

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Condition:
        data = dict(data)
        kind = data.pop("kind", None)
        if kind not in CONDITIONS:
            raise ValidationError(f"unknown condition kind {kind!r} (known: {', '.join(CONDITIONS)})")
        return CONDITIONS[kind](**data)


@dataclass
class QueriesInState(Condition):
    """Each query (``query_ids=None``: ALL queries of ``pipeline``) is in one of ``states``;
    the state ``DESIRED`` means each query's own desired state (converged).

    ALL leaves out terminated queries unless TERMINATED is awaited. A query not in an awaited
    state that can no longer get there on its own (:func:`stopped`: in ERROR, held at a bad
    record, terminated) fails the wait; ``through_retries`` (or ``fail_on_error=False``, its
    older name) waits through the runtime's retries of a query in ERROR instead.
    """

    kind: ClassVar[str] = "state"
    query_ids: list[str] | None
    states: list[str]
    pipeline: str | None = None
    fail_on_error: bool = True
    through_retries: bool = False

    def __post_init__(self) -> None:
        self.states = [s.upper() for s in self.states]
        self.query_ids = [q.upper() for q in self.query_ids] if self.query_ids is not None else None
        self.through_retries = self.through_retries or not self.fail_on_error
        self._waiting: list[str] = []

    @classmethod
    def by_state(cls, waits: Iterable[tuple[str, str]], *, through_retries: bool = False) -> list[QueriesInState]:
        """One wait per awaited state for ``waits`` ((query id, state) pairs, as statements'
        results give them), each on all its queries: a look reads them together (a wait on
        PAUSE ALL's results polls every query)."""
        ids: dict[str, list[str]] = {}
        for query_id, state in waits:
            ids.setdefault(state, []).append(query_id)
        return [cls(queries, [state], through_retries=through_retries) for state, queries in ids.items()]

    def check(self, engine: QueryView) -> Check:
        if self.query_ids is None:
            queries = [
                q
                for q in engine.catalog.queries(self.pipeline or engine.pipeline)
                if q.desired_state != DesiredState.TERMINATED or QueryState.TERMINATED in self._wanted(q)
            ]
        else:  # one read, however many: a wait on 40 queries polls them all
            found = {q.id: q for q in engine.catalog.queries(ids=self.query_ids)}
            queries = [found.get(q) or engine.query(q) for q in self.query_ids]  # NotFoundError for a wrong ID
        leases = engine.catalog.leases.holders()
        states = {q.id: shown_state(q, leases.get(q.id)) for q in queries}
        waiting = {q.id: states[q.id] for q in queries if states[q.id] not in self._wanted(q)}
        self._waiting = list(waiting)
        wanted = " or ".join(self.states)
        seen = looks(engine.catalog, [q for q in queries if q.id in waiting], leases)
        for q in queries:
            if q.id in waiting:
                stop = stopped(seen[q.id], through_retries=self.through_retries, awaited=self._wanted(q))
                if stop is not None:
                    return Check.stop(stop, wanted, {"states": states})
        if waiting:
            shown = ", ".join(f"{q} is {s}" for q, s in waiting.items())
            return Check(False, f"{shown}; waiting for {wanted}", details={"states": states})
        what = ", ".join(states) if states else "no queries"
        return Check(True, f"{what}: {wanted}", details={"states": states})

    def watched(self) -> list[str]:
        return self._waiting if self.query_ids is None else self.query_ids

    def _wanted(self, query) -> set[str]:
        """The awaited states for ``query``: DESIRED stands for its own desired state."""
        return {query.desired_state if s == "DESIRED" else s for s in self.states}


@dataclass
class VersionRunning(Condition):
    """A runtime runs ``version`` of the query; with ``ready``, the version has also left its
    readiness window (committed a batch, or the window passed without a failure). A rolled
    back version fails the wait with the reason, and so does a query that can no longer
    run it on its own (:func:`stopped`)."""

    kind: ClassVar[str] = "version"
    query_id: str
    version: int
    ready: bool = False
    through_retries: bool = False

    def check(self, engine: QueryView) -> Check:
        query = engine.query(self.query_id)
        row = next((v for v in engine.catalog.versions(query.id) if v["version"] == self.version), None)
        if row is None:
            return Check(False, f"query {query.id} has no version {self.version}", failed=True)
        state = engine.state(query.id)
        details = {
            "query_id": query.id,
            "version": self.version,
            "outcome": row["outcome"],
            "running_version": query.running_version,
            "state": state,
        }
        # a version rolled back may still be the running one for a moment: never "reached"
        running = query.running_version == self.version and row["outcome"] != "ROLLED_BACK"
        if running and (not self.ready or row["outcome"] == "ACTIVE"):
            return Check(
                True, f"version {self.version} of {query.id} is {'ready' if self.ready else 'running'}", details=details
            )
        lease = engine.catalog.leases.holders().get(query.id)
        stop = stopped(look(engine.catalog, query, lease, self.version), through_retries=self.through_retries)
        if stop is not None:
            return Check.stop(stop, f"version {self.version} to {'be ready' if self.ready else 'run'}", details)
        return Check(
            False,
            f"version {self.version} of {query.id}: {row['outcome'] or 'not started'} ({state})",
            details=details,
        )

    def watched(self) -> list[str]:
        return [self.query_id.upper()]


@dataclass
class ProgressSince(Condition):
    """The query committed at least ``batches`` micro-batches after batch ``since_batch``
    and/or read at least ``rows`` input rows beyond ``since_rows`` (its running total).
    A query that can no longer make progress on its own (:func:`stopped`; ``version``: the
    one it ran when the wait started, if it is rolled back) fails it; ``through_retries`` (or
    ``fail_on_error=False``) waits through the runtime's retries of a query in ERROR."""

    kind: ClassVar[str] = "progress"
    query_id: str
    batches: int | None = None
    rows: int | None = None
    since_batch: int = -1
    since_rows: int = 0
    fail_on_error: bool = True
    through_retries: bool = False
    version: int | None = None

    def __post_init__(self) -> None:
        if self.batches is None and self.rows is None:
            raise ValidationError("progress needs batches or rows (or both)")
        self.through_retries = self.through_retries or not self.fail_on_error

    @classmethod
    def from_now(cls, engine: QueryView, query_id: str, **kw: Any) -> ProgressSince:
        """Progress counted from the query's last committed batch at this moment."""
        p = engine.progress(query_id)
        return cls(
            query_id.upper(), since_batch=p.batch_id if p else -1, since_rows=p.total_input_rows if p else 0, **kw
        )

    def check(self, engine: QueryView) -> Check:
        query = engine.query(self.query_id)
        if self.version is None:
            self.version = query.version
        lease = engine.catalog.leases.holders().get(query.id)
        seen = look(engine.catalog, query, lease, self.version)
        batches = (seen.last_batch - self.since_batch) if seen.last_batch is not None else 0
        p = engine.progress(query.id)
        rows = (p.total_input_rows - self.since_rows) if p else 0
        details = {
            "query_id": query.id,
            "batches": batches,
            "rows": rows,
            "state": str(seen.state),
            "batch_id": seen.last_batch,
        }
        stop = stopped(seen, through_retries=self.through_retries)
        if stop is not None and stop.stop is Stop.ROLLED_BACK:  # its progress was not the awaited version's
            return Check.stop(stop, "progress", details)
        if (self.batches is None or batches >= self.batches) and (self.rows is None or rows >= self.rows):
            return Check(True, f"{query.id} committed {batches} batches and {rows} rows", details=details)
        if stop is not None:
            return Check.stop(stop, "progress", details)
        return Check(
            False,
            f"{query.id} ({seen.state}) committed {batches}/{self.batches or '-'} "
            f"batches and {rows}/{self.rows or '-'} rows",
            details=details,
        )

    def watched(self) -> list[str]:
        return [self.query_id.upper()]


@dataclass
class CaughtUp(Condition):
    """Every input record written by ``as_of`` (epoch seconds, default now) has been
    processed and its output committed. File topics: each committed input file whose
    modification time is not after ``as_of`` appears in a committed batch. Kafka topics:
    each partition's next offset at the first look (``read_committed``, asked of the broker
    with the engine's Kafka settings) has been read by a committed batch. A query that can
    no longer catch up on its own (:func:`stopped`; ``version``: the one it ran when the wait
    started, if it is rolled back) fails it; ``through_retries`` waits through the runtime's
    retries of a query in ERROR."""

    kind: ClassVar[str] = "caught_up"
    query_id: str
    as_of: float = 0.0
    through_retries: bool = False
    version: int | None = None

    def __post_init__(self) -> None:
        self.as_of = self.as_of or time.time()
        self._wanted: set[str] | None = None
        self._committed: int | None = None  # the last committed batch looked at
        self._missing: set[str] = set()
        self._ends: dict[str, lag.Ranges] = {}  # Kafka topic -> its offsets at the first look
        self._behind: int | None = None  # Kafka records not read yet (None: no Kafka topic)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "query_id": self.query_id,
            "as_of": self.as_of,
            "through_retries": self.through_retries,
            "version": self.version,
        }

    def check(self, engine: QueryView) -> Check:
        query = engine.query(self.query_id)
        # the input files are listed once; later looks read the checkpoint's logs again
        # only when a new batch has committed (waits poll often)
        if self._wanted is None:
            # a Kafka topic's input is what it holds at the first look (its end offsets then)
            try:
                self._ends = lag.kafka_ends(engine.catalog, query, engine.kafka)
            except StreamQLError as e:  # no Kafka settings, the broker unreachable
                return Check(False, e.message, failed=True)
            self._query_id, self._checkpoint = query.id, query.checkpoint
            self._wanted = lag.input_files(engine.catalog, query, self.as_of)
            self.version = query.version if self.version is None else self.version
        committed = last_committed_batch(self._checkpoint)
        if committed != self._committed:
            self._committed, self._missing = committed, self._wanted - processed_files(self._checkpoint)
            self._behind = lag.kafka_behind(self._checkpoint, self._ends) if self._ends else None
        missing = self._missing
        details = {"query_id": self._query_id, "input_files": len(self._wanted), "missing": len(missing)}
        if self._behind is not None:
            details["records_behind"] = self._behind
        lease = engine.catalog.leases.holders().get(query.id)
        stop = stopped(look(engine.catalog, query, lease, self.version), through_retries=self.through_retries)
        behind = self._behind or 0
        if stop is not None and (missing or behind or stop.stop is Stop.ROLLED_BACK):  # not by the awaited version
            return Check.stop(stop, "it to catch up", {**details, "state": stop.state})
        if not missing and not behind:
            return Check(True, lag.caught_up_message(self._query_id, len(self._wanted), self._behind), details=details)
        if not missing:
            return Check(False, f"query {self._query_id} has {behind:,} Kafka records to read", details=details)
        return Check(
            False,
            f"query {self._query_id} has not processed {len(missing)} of {len(self._wanted)} input files",
            details=details,
        )

    def watched(self) -> list[str]:
        return [self.query_id.upper()]


@dataclass
class ShadowReady(Condition):
    """The shadow of ``query_id`` (or ``query_id`` itself, a shadow) is ready to be promoted
    (:mod:`.views.readiness`): it has read every input file the live version has read, its
    lag is at most ``max_lag`` input files, both run, and all of that has held for ``window``
    seconds (``ready_since``: when it began to, as last seen). A live query or shadow that can
    no longer run on its own (:func:`stopped`), or a shadow promoted or discarded meanwhile,
    fails the wait."""

    kind: ClassVar[str] = "shadow_ready"
    query_id: str
    max_lag: int = 0
    window: float = 3.0
    ready_since: float | None = None
    through_retries: bool = False

    def check(self, engine: QueryView) -> Check:
        try:
            live, shadow = readiness.shadow_pair(engine.catalog, self.query_id)
        except StateError as e:
            return Check(False, str(e), failed=True)
        seen = readiness.readiness(engine.catalog, live, shadow)
        details: dict[str, Any] = {"query_id": live.id, **seen.to_dict(), "max_lag": self.max_lag}
        leases = engine.catalog.leases.holders()
        for q in (shadow, live):
            stop = stopped(look(engine.catalog, q, leases.get(q.id)), through_retries=self.through_retries)
            if stop is not None:
                return Check.stop(stop, f"shadow {shadow.id} to be ready", details)
        now = time.time()
        if not seen.ready(self.max_lag):
            self.ready_since = None
            return Check(False, f"not ready: {seen.figures(self.max_lag)}", details=details)
        self.ready_since = self.ready_since or now
        details["ready_for"] = round(now - self.ready_since, 3)
        if now - self.ready_since >= self.window:
            return Check(True, f"shadow {shadow.id} is ready: {seen.figures(self.max_lag)}", details=details)
        return Check(
            False,
            f"ready for {now - self.ready_since:.1f}s of {self.window:g}s: {seen.figures(self.max_lag)}",
            details=details,
        )

    def watched(self) -> list[str]:
        return [self.query_id.upper()]


@dataclass
class AllOf(Condition):
    """Every one of ``conditions`` (as dicts) holds; fails as soon as one cannot."""

    kind: ClassVar[str] = "all_of"
    conditions: list[dict[str, Any]]

    def __post_init__(self) -> None:
        self._parts = [Condition.from_dict(c) for c in self.conditions]

    @classmethod
    def of(cls, *conditions: Condition) -> AllOf:
        return cls([c.to_dict() for c in conditions])

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "conditions": self.conditions}

    def check(self, engine: QueryView) -> Check:
        checks = [c.check(engine) for c in self._parts]
        details = {"states": {k: v for c in checks for k, v in c.details.get("states", {}).items()}}
        for c in checks:
            if c.failed:
                return Check(False, c.message, failed=True, details=details, stopped=c.stopped)
        waiting = [c.message for c in checks if not c.done]
        if waiting:
            return Check(False, "; ".join(waiting), details=details)
        return Check(True, "; ".join(c.message for c in checks), details=details)

    def watched(self) -> list[str]:
        return list(dict.fromkeys(q for c in self._parts for q in c.watched()))

    def through_retries_too(self) -> Condition:
        return AllOf.of(*(c.through_retries_too() for c in self._parts))


def end_of(condition: Condition, check: Check, engine: QueryView, *, expired: bool, timeout: float) -> WaitEnd | None:
    """How a wait on ``condition`` ends at this ``check`` (None: it goes on), for every wait
    form alike: REACHED when done, FAILED_FAST when it can no longer come true, TIMED_OUT once
    ``expired`` (after ``timeout`` seconds), saying what each query waited on was doing."""
    if check.done:
        return WaitEnd(Ending.REACHED, check.message, check.details)
    if check.failed:
        return WaitEnd(Ending.FAILED_FAST, check.message, check.details, check.stopped)
    if not expired:
        return None
    leases = engine.catalog.leases.holders()
    doings = []
    for query_id in condition.watched():
        query = engine.catalog.query(query_id)
        if query is not None:
            doings.append(doing(engine.catalog, query, leases.get(query_id)))
    said = f"; {'; '.join(doings)}" if doings else ""
    return WaitEnd(Ending.TIMED_OUT, f"{check.message} after {timeout:g}s{said}", check.details)


def unprocessed_files(engine: QueryView, query) -> int:
    """How many committed input files the query has not processed yet (its lag, in files)."""
    return lag.unprocessed_files(engine.catalog, query)


def lag_files(engine: QueryView, query) -> int | None:
    """:func:`unprocessed_files`, for a query that may still read (None once terminated)."""
    return lag.lag_files(engine.catalog, query)


CONDITIONS: dict[str, type[Condition]] = {
    c.kind: c for c in (QueriesInState, VersionRunning, ProgressSince, CaughtUp, ShadowReady, AllOf)
}


def unhealthy_queries(engine: QueryView, *, stale_after: float, pipeline: str | None = None) -> list[dict[str, Any]]:
    """One ``{query_id, pipeline, state, problem}`` per query that needs attention.

    Paused and terminated queries are left alone (someone chose that). A query that should
    run is flagged in ERROR or UNASSIGNED, or when input written more than ``stale_after``
    seconds ago has not been processed: an idle query with no new input is healthy.
    """
    now = time.time()
    problems = []
    for row in engine.queries(pipeline):
        if row["desired"] != DesiredState.RUNNING:
            continue
        problem = None
        if row["state"] == QueryState.ERROR:
            problem = f"in ERROR: {row['error']}"
        elif row["state"] == QueryState.UNASSIGNED:
            problem = "UNASSIGNED: its runtime stopped heartbeating"
        else:
            check = CaughtUp(row["query_id"], as_of=now - stale_after).check(engine)
            if check.failed:  # it cannot catch up on its own (what stopped it), or lag is not counted (Kafka)
                problem = check.message if check.stopped is not None else None
            elif not check.done:
                progress = engine.progress(row["query_id"])
                last = (
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(progress.last_batch_at)) if progress else "never"
                )
                problem = (
                    f"no progress for {stale_after:g}s: {check.details['missing']} input "
                    f"file(s) older than that not processed (state {row['state']}, last "
                    f"batch {last})"
                )
        if problem:
            problems.append(
                {"query_id": row["query_id"], "pipeline": row["pipeline"], "state": row["state"], "problem": problem}
            )
    return problems
