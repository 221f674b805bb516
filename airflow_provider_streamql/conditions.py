"""What a wait waits for, as data: a query reaching a state, a version becoming ready,
progress since a point, catching up with the input; and which queries need attention.

A condition is checked against an :class:`~airflow_provider_streamql.engine.Engine` (any
:class:`QueryView`) and
never blocks, so the same object serves ``Engine.wait``, the CLI, a sensor's poke and a
deferrable trigger. ``to_dict``/``from_dict`` carry it across a trigger's serialisation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

from .catalog import Catalog, DesiredState, Progress, QueryInfo, QueryState
from .errors import ValidationError
from .storage.checkpoints import last_committed_batch, processed_files
from .views import lag
from .views.rows import shown_state


class QueryView(Protocol):
    """What a condition reads; :class:`~airflow_provider_streamql.engine.Engine` is one.
    (A protocol, so that the engine, which waits on conditions, is not imported here.)"""

    catalog: Catalog
    pipeline: str

    def query(self, query_id: str) -> QueryInfo: ...

    def state(self, query_id: str) -> str: ...

    def progress(self, query_id: str) -> Progress | None: ...

    def queries(self, pipeline: str | None = None) -> list[dict[str, Any]]: ...


@dataclass
class Check:
    """One look at a condition: ``done``; or ``failed`` (it can no longer come true);
    else still waiting. ``message`` says where things stand; ``details`` is for XCom."""

    done: bool
    message: str
    failed: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class Condition:
    """Base of every condition; subclasses are dataclasses with JSON-friendly fields."""

    kind: ClassVar[str]

    def check(self, engine: QueryView) -> Check:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}  # type: ignore[call-overload]  # every Condition is a dataclass

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

    ALL leaves out terminated queries unless TERMINATED is awaited. A query in ERROR fails
    the wait unless ERROR is awaited or ``fail_on_error`` is off; one terminated while
    another state is awaited fails it too.
    """

    kind: ClassVar[str] = "state"
    query_ids: list[str] | None
    states: list[str]
    pipeline: str | None = None
    fail_on_error: bool = True

    def __post_init__(self) -> None:
        self.states = [s.upper() for s in self.states]
        self.query_ids = [q.upper() for q in self.query_ids] if self.query_ids is not None else None

    def check(self, engine: QueryView) -> Check:
        if self.query_ids is None:
            queries = [
                q
                for q in engine.catalog.queries(self.pipeline or engine.pipeline)
                if q.desired_state != DesiredState.TERMINATED or QueryState.TERMINATED in self._wanted(q)
            ]
        else:
            queries = [engine.query(q) for q in self.query_ids]  # NotFoundError for a wrong ID
        leases = engine.catalog.leases.holders()
        states = {q.id: shown_state(q, leases.get(q.id)) for q in queries}
        waiting = {q.id: states[q.id] for q in queries if states[q.id] not in self._wanted(q)}
        wanted = " or ".join(self.states)
        for q in queries:
            state = states[q.id]
            if state == QueryState.ERROR and QueryState.ERROR not in self._wanted(q) and self.fail_on_error:
                return Check(
                    False,
                    f"query {q.id} is in ERROR while waiting for {wanted}: {q.error}",
                    failed=True,
                    details={"states": states},
                )
            if (
                q.desired_state == DesiredState.TERMINATED
                and QueryState.TERMINATED not in self._wanted(q)
                and self.query_ids is not None
            ):
                return Check(
                    False,
                    f"query {q.id} was terminated while waiting for {wanted}",
                    failed=True,
                    details={"states": states},
                )
        if waiting:
            shown = ", ".join(f"{q} is {s}" for q, s in waiting.items())
            return Check(False, f"{shown}; waiting for {wanted}", details={"states": states})
        what = ", ".join(states) if states else "no queries"
        return Check(True, f"{what}: {wanted}", details={"states": states})

    def _wanted(self, query) -> set[str]:
        """The awaited states for ``query``: DESIRED stands for its own desired state."""
        return {query.desired_state if s == "DESIRED" else s for s in self.states}


@dataclass
class VersionRunning(Condition):
    """A runtime runs ``version`` of the query; with ``ready``, the version has also left its
    readiness window (committed a batch, or the window passed without a failure). A rolled
    back version fails the wait with the reason."""

    kind: ClassVar[str] = "version"
    query_id: str
    version: int
    ready: bool = False

    def check(self, engine: QueryView) -> Check:
        query = engine.query(self.query_id)
        row = next((v for v in engine.catalog.versions(query.id) if v["version"] == self.version), None)
        if row is None:
            return Check(False, f"query {query.id} has no version {self.version}", failed=True)
        details = {
            "query_id": query.id,
            "version": self.version,
            "outcome": row["outcome"],
            "running_version": query.running_version,
            "state": engine.state(query.id),
        }
        if row["outcome"] == "ROLLED_BACK":
            return Check(
                False,
                f"version {self.version} of {query.id} was rolled back: {row['error']}",
                failed=True,
                details=details,
            )
        running = query.running_version == self.version
        if running and (not self.ready or row["outcome"] == "ACTIVE"):
            return Check(
                True, f"version {self.version} of {query.id} is {'ready' if self.ready else 'running'}", details=details
            )
        return Check(
            False,
            f"version {self.version} of {query.id}: {row['outcome'] or 'not started'} ({details['state']})",
            details=details,
        )


@dataclass
class ProgressSince(Condition):
    """The query committed at least ``batches`` micro-batches after batch ``since_batch``
    and/or read at least ``rows`` input rows beyond ``since_rows`` (its running total)."""

    kind: ClassVar[str] = "progress"
    query_id: str
    batches: int | None = None
    rows: int | None = None
    since_batch: int = -1
    since_rows: int = 0
    fail_on_error: bool = True

    def __post_init__(self) -> None:
        if self.batches is None and self.rows is None:
            raise ValidationError("progress needs batches or rows (or both)")

    @classmethod
    def from_now(cls, engine: QueryView, query_id: str, **kw: Any) -> ProgressSince:
        """Progress counted from the query's last committed batch at this moment."""
        p = engine.progress(query_id)
        return cls(
            query_id.upper(), since_batch=p.batch_id if p else -1, since_rows=p.total_input_rows if p else 0, **kw
        )

    def check(self, engine: QueryView) -> Check:
        query = engine.query(self.query_id)
        state = engine.state(query.id)
        p = engine.progress(query.id)
        batches = (p.batch_id - self.since_batch) if p else 0
        rows = (p.total_input_rows - self.since_rows) if p else 0
        details = {
            "query_id": query.id,
            "batches": batches,
            "rows": rows,
            "state": state,
            "batch_id": p.batch_id if p else None,
        }
        if (self.batches is None or batches >= self.batches) and (self.rows is None or rows >= self.rows):
            return Check(True, f"{query.id} committed {batches} batches and {rows} rows", details=details)
        if state == QueryState.ERROR and self.fail_on_error:
            return Check(False, f"query {query.id} is in ERROR: {query.error}", failed=True, details=details)
        if query.desired_state == DesiredState.TERMINATED:
            return Check(False, f"query {query.id} was terminated", failed=True, details=details)
        return Check(
            False,
            f"{query.id} ({state}) committed {batches}/{self.batches or '-'} "
            f"batches and {rows}/{self.rows or '-'} rows",
            details=details,
        )


@dataclass
class CaughtUp(Condition):
    """Every input record written by ``as_of`` (epoch seconds, default now) has been
    processed and its output committed. File topics: each committed input file whose
    modification time is not after ``as_of`` appears in a committed batch."""

    kind: ClassVar[str] = "caught_up"
    query_id: str
    as_of: float = 0.0

    def __post_init__(self) -> None:
        self.as_of = self.as_of or time.time()
        self._wanted: set[str] | None = None
        self._committed: int | None = None  # the last committed batch looked at
        self._missing: set[str] = set()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "query_id": self.query_id, "as_of": self.as_of}

    def check(self, engine: QueryView) -> Check:
        # the catalog is read once; later looks read only the checkpoint (waits poll often)
        if self._wanted is None:
            query = engine.query(self.query_id)
            on_kafka = lag.kafka_sources(engine.catalog, query)
            if on_kafka:
                return Check(
                    False,
                    f"catching up is measured on file topics; {query.id} reads the Kafka "
                    f"topic(s) of {', '.join(on_kafka)}: wait for batches or rows instead",
                    failed=True,
                )
            self._query_id, self._checkpoint = query.id, query.checkpoint
            self._wanted = lag.input_files(engine.catalog, query, self.as_of)
        # the checkpoint's logs are parsed again only when a new batch has committed
        committed = last_committed_batch(self._checkpoint)
        if committed != self._committed:
            self._committed, self._missing = committed, self._wanted - processed_files(self._checkpoint)
        missing = self._missing
        details = {"query_id": self._query_id, "input_files": len(self._wanted), "missing": len(missing)}
        if not missing:
            return Check(True, lag.caught_up_message(self._query_id, len(self._wanted)), details=details)
        return Check(
            False,
            f"query {self._query_id} has not processed {len(missing)} of {len(self._wanted)} input files",
            details=details,
        )


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
                return Check(False, c.message, failed=True, details=details)
        waiting = [c.message for c in checks if not c.done]
        if waiting:
            return Check(False, "; ".join(waiting), details=details)
        return Check(True, "; ".join(c.message for c in checks), details=details)


def unprocessed_files(engine: QueryView, query) -> int:
    """How many committed input files the query has not processed yet (its lag, in files)."""
    return lag.unprocessed_files(engine.catalog, query)


def lag_files(engine: QueryView, query) -> int | None:
    """:func:`unprocessed_files`, for a query that may still read (None once terminated)."""
    return lag.lag_files(engine.catalog, query)


CONDITIONS: dict[str, type[Condition]] = {
    c.kind: c for c in (QueriesInState, VersionRunning, ProgressSince, CaughtUp, AllOf)
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
            if not check.done:
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
