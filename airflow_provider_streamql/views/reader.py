"""The read model's face: :class:`Reader` answers what callers ask of one catalog without
changing it. :class:`~..engine.Engine` is a Reader (and adds the write side), so every
caller, the Airflow half included, reads through the engine."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..catalog import BadRecord, Catalog, Progress, QueryInfo
from ..errors import NotFoundError
from ..results import Result
from ..storage.kafka_topics import KafkaSettings
from ..storage.printing import Printed, print_records
from ..storage.push import Pushed, PushPlan, push_rows
from .events import EventFeed, QueryEvent
from .lag import LagPoint, lag_history
from .lineage import Dataset, QueryLineage, dataset_of, query_lineage
from .rows import STUCK_AFTER, query_rows, shown_state

#: a runtime that has not heartbeated for this many seconds is not live
RUNTIME_STALE_AFTER = 15.0


@dataclass(frozen=True)
class Names:
    """The names a shell completes: each stream and table with its columns (as the catalog
    spells them), and the query IDs."""

    sources: dict[str, tuple[str, ...]]
    queries: tuple[str, ...]


class Reader:
    """Read queries, their state and progress, lineage and events from ``catalog``.

    :param catalog: the catalog to read.
    :param pipeline: the pipeline the caller acts on.
    """

    def __init__(self, catalog: Catalog, pipeline: str):
        self.catalog = catalog
        self.pipeline = pipeline
        #: the Kafka client settings PRINT on a Kafka topic follows it with (the engine's)
        self.kafka = KafkaSettings()
        #: seconds after which a query making no progress is marked stuck (:func:`.rows.stuck`)
        self.stuck_after = STUCK_AFTER

    def query(self, query_id: str) -> QueryInfo:
        query = self.catalog.query(query_id.upper())
        if query is None:
            raise NotFoundError(f"no query {query_id!r}")
        return query

    def find_query(self, query_id: str) -> QueryInfo | None:
        """The query ``query_id``, or None if the catalog has none of that ID."""
        return self.catalog.query(query_id.upper())

    def query_infos(self, pipeline: str | None = None) -> list[QueryInfo]:
        """Every query (optionally of one pipeline) as the catalog records it, oldest first."""
        return self.catalog.queries(pipeline)

    def versions(self, query_id: str) -> list[dict[str, Any]]:
        """Each version of ``query_id``: its SQL, the validator's verdict and report, what
        became of it (outcome, started, ended, error)."""
        return self.catalog.versions(self.query(query_id).id)

    def commands(self) -> list[dict[str, Any]]:
        """The command log: every statement that changed the catalog, who issued it and when."""
        return self.catalog.commands.all()

    def state(self, query_id: str) -> str:
        """Observed state as SHOW QUERIES shows it (UNASSIGNED when its runtime is gone)."""
        query = self.query(query_id)
        return shown_state(query, self.catalog.leases.holders().get(query.id))

    def queries(self, pipeline: str | None = None, *, stuck_after: float | None = None) -> list[dict[str, Any]]:
        """Every query (optionally of one pipeline) with state, progress, lag and last error,
        marked stuck when input has waited ``stuck_after`` seconds (default
        :attr:`stuck_after`) with no batch committed."""
        after = self.stuck_after if stuck_after is None else stuck_after
        return query_rows(self.catalog, self.catalog.queries(pipeline), kafka=self.kafka, stuck_after=after)

    def query_rows(self, queries: list[QueryInfo]) -> list[dict[str, Any]]:
        """The rows of ``queries`` as :meth:`queries` gives them (the columns of ``SHOW
        QUERIES EXTENDED``), in their order: for a caller that holds the queries already."""
        return query_rows(self.catalog, queries, kafka=self.kafka, stuck_after=self.stuck_after)

    def lag_history(self, query_id: str) -> list[LagPoint]:
        """``query_id``'s lag after each of its last batches, then now (the page's chart):
        input files and records on file topics; on a Kafka topic, its present lag only."""
        return lag_history(self.catalog, self.query(query_id), self.kafka)

    def bad_records(self, query_id: str, status: str | None = None) -> list[BadRecord]:
        """The records ``query_id`` could not read: where each sits, its text, the error,
        the batch, and what became of it (``status``: PENDING, SKIPPED, LOGGED, ...)."""
        return self.catalog.bad_records.of(self.query(query_id).id, status.upper() if status else None)

    def progress(self, query_id: str) -> Progress | None:
        return self.catalog.observed.progress(self.query(query_id).id)

    def progress_history(self, query_id: str) -> list[dict[str, Any]]:
        """The progress of ``query_id``'s last batches, oldest first."""
        return self.catalog.observed.progress_history(self.query(query_id).id)

    def spark_ui_url(self, query_id: str) -> str | None:
        """The Spark UI of the runtime that holds ``query_id`` now; None when none does."""
        lease = self.catalog.leases.holders().get(query_id.upper())
        runtime = next((r for r in self.catalog.runtimes.all() if lease and r["id"] == lease["runtime_id"]), None)
        return runtime.get("spark_ui_url") if runtime else None

    def runtimes(self, pipeline: str | None = None, *, live: bool = True) -> list[dict[str, Any]]:
        """Runtimes (of one pipeline); ``live``: not stopped and heartbeating within
        :data:`RUNTIME_STALE_AFTER` seconds."""
        now = time.time()
        return [
            r
            for r in self.catalog.runtimes.all()
            if (pipeline is None or r["pipeline"] == pipeline)
            and (not live or (r["stopped_at"] is None and now - r["heartbeat_at"] <= RUNTIME_STALE_AFTER))
        ]

    def names(self) -> Names:
        """Every stream and table with its columns, and every query ID (of any pipeline)."""
        sources = {name: tuple(c.name for c in src.columns) for name, src in self.catalog.sources().items()}
        return Names(sources, tuple(q.id for q in self.catalog.queries()))

    # -- PRINT, followed -----------------------------------------------------------------
    def follow_print(self, printed: Result) -> Result:
        """The records written to a PRINT's topic since ``printed`` (a PRINT's result, or the
        result of this method): what ksqlDB's PRINT shows as it keeps reading, until its
        LIMIT. Its ``details["print"]`` says where it stands; ``done`` once LIMIT is shown."""
        where = printed.details["print"]
        src = self.catalog.source(where["source"])
        if src is None:
            raise NotFoundError(f"no stream or table {where['source']!r}: it was dropped while printed")
        since = Printed.from_dict(where)
        more = print_records(src, since, interval=where["interval"], limit=where["limit"], kafka=self.kafka)
        return Result(
            printed.statement,
            columns=list(printed.columns),
            rows=more.rows,
            details={"print": {**where, **more.to_dict()}},
        )

    # -- push queries, followed ----------------------------------------------------------
    def follow_push(self, pushed: Result) -> Result:
        """The rows a push query (``SELECT ... EMIT CHANGES``) finds in what was committed to
        its source since ``pushed`` (its result, or the result of this method), through its
        projection and WHERE, in order, until its LIMIT: what ksqlDB's push query streams.
        Its ``details["push"]`` says where it stands (``shown``, ``limit``); a row appears once
        the query writing the source commits it. Raises :class:`NotFoundError` once the
        source is dropped, ValueError for a result that is not a push query's."""
        plan: PushPlan | None = pushed.push_plan
        if plan is None or "push" not in pushed.details:
            raise ValueError(f"{pushed.statement.strip()[:80]!r} is not a push query")
        if self.catalog.source(plan.source.name) is None:
            raise NotFoundError(f"no stream or table {plan.source.name!r}: it was dropped while pushed")
        where = pushed.details["push"]
        more = push_rows(plan, Pushed.from_dict(where))
        return Result(
            pushed.statement,
            "; ".join(more.notes),
            columns=list(pushed.columns),
            rows=more.rows,
            details={"push": {**where, **more.to_dict()}},
            push_plan=plan,
        )

    # -- lineage -----------------------------------------------------------------------
    def lineage(self, query_id: str, *, version: int | None = None, kafka_bootstrap: str | None = None) -> QueryLineage:
        """What ``version`` of ``query_id`` (default its current one) reads and writes,
        column by column: its statement, verdict, input and output datasets (OpenLineage
        names; a Kafka topic's namespace needs ``kafka_bootstrap``, the cluster's servers).
        Raises :class:`NotFoundError` for an unknown query or version."""
        return query_lineage(self.catalog, query_id, version=version, kafka_bootstrap=kafka_bootstrap)

    def dataset(self, name: str, *, kafka_bootstrap: str | None = None) -> Dataset | None:
        """The lineage dataset of stream or table ``name`` (where it lives and its columns),
        None if the catalog has no such source."""
        source = self.catalog.source(name)
        return dataset_of(source, kafka_bootstrap) if source is not None else None

    # -- query events ------------------------------------------------------------------
    def poll_events(self, consumer: str, query_id: str, kinds: list[str]) -> list[QueryEvent]:
        """The events of ``kinds`` (see :data:`~.events.EVENTS`) of ``query_id`` that
        ``consumer`` has not acknowledged; none for a query that does not exist (yet)."""
        return EventFeed(consumer, query_id, kinds).poll(self)

    def acknowledge_event(self, consumer: str, event: QueryEvent) -> None:
        """Record ``event`` as delivered to ``consumer``: :meth:`poll_events` does not give
        it (nor an older one of its kind) to that consumer again."""
        EventFeed(consumer, event.query_id, [event.kind]).acknowledge(self, event)
