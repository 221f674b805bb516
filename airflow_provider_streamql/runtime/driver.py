"""The runtime: a long-running Spark driver serving one pipeline.

Every ``interval`` seconds it heartbeats, renews the leases it holds, and reconciles
desired state into StreamingQuery objects: start what should run, stop (pause) what should
not, and write back what it observes. Nothing about a query lives only here: a restarted
runtime reads desired state and resumes from checkpoints.

This module is the loop and the wiring of the parts. For each query of the pipeline, each
pass goes observe -> reconcile -> schedule:

- :class:`~.observe.Observer` reads what the runtime holds for the query (its Spark query,
  its lease, a rollout in flight, its back-off) into an :class:`~.observe.Observation`;
- :class:`~.reconcile.Reconciler` decides from it and the desired state, acts through the
  parts below, and returns when to act on the query again;
- the loop keeps that decision in its :class:`~.schedule.Schedule`, which the next
  observation reads.

The parts: :mod:`.leases` (epochs, fencing), :mod:`.spark_queries` (starting and stopping
Spark queries), :mod:`.status` (writing observed state), :mod:`.rollout` (in-place upgrades
and their rollback), :mod:`.holds` (bad-record holds).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import SparkSession

from ..catalog import ERROR_POLICIES, Catalog, QueryInfo
from ..catalog.states import DEFAULT_ON_ERROR, OnError
from . import kafka
from .holds import Holds
from .leases import Leases
from .listener import ProgressListener
from .metrics import MetricsServer, exposition
from .observe import Observer
from .reconcile import Reconciler
from .rollout import Rollout
from .schedule import Schedule
from .spark_queries import SparkQueries
from .status import Status

log = logging.getLogger("streamql.runtime")

#: seconds between looks for a new statement while a runtime waits for its next pass, when a
#: look costs no round trip to a server (LastCommandWatch.local): on SQLite it reads a local
#: file (about 25 µs); on PostgreSQL through psycopg it asks the held connection whether a
#: statement was announced (NOTIFY). A statement is then acted on within 5 ms.
WAKE_POLL_LOCAL = 0.005
#: ... and when each look is a round trip (another database or driver): 20 a second per idle
#: runtime; also the wait after a look that failed, whatever the catalog
WAKE_POLL = 0.05


class Runtime:
    """Reconciles the queries of ``pipeline`` on ``spark``.

    :param lease_ttl: seconds a lease lasts without renewal; after a crash, another runtime
        takes the pipeline's queries this long after the last heartbeat.
    :param readiness_window: seconds a new version has, after an in-place swap, to fail
        and be rolled back automatically; it is ready earlier once it commits a batch.
    :param on_error: the pipeline's error policy for records a query cannot read (FAIL,
        LOG_AND_CONTINUE or PAUSE), for queries whose statement sets none; None:
        LOG_AND_CONTINUE (:data:`~..catalog.states.DEFAULT_ON_ERROR`, ksqlDB's default).
    :param metrics_port: serve the pipeline's queries in Prometheus' format at
        ``http://<host>:<port>/metrics`` (:mod:`.metrics`; 0: any free port, see
        ``metrics.port``); None: no endpoint.
    :param workers: how many queries a pass reconciles at once. Queries are independent,
        and starting or stopping one is mostly waiting on Spark, so a pass that starts,
        stops or swaps many queries (PAUSE ALL, RESUME ALL, a new pipeline) takes about as
        long as its slowest query, not the sum of them.
    """

    def __init__(
        self,
        catalog: Catalog,
        pipeline: str,
        spark: SparkSession,
        *,
        interval: float = 0.5,
        lease_ttl: float = 10.0,
        runtime_id: str | None = None,
        readiness_window: float = 30.0,
        on_error: OnError | str | None = None,
        workers: int = 8,
        metrics_port: int | None = None,
    ):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers!r}")
        on_error = DEFAULT_ON_ERROR if on_error is None else on_error
        if on_error.upper() not in ERROR_POLICIES:
            raise ValueError(f"on_error must be one of {', '.join(ERROR_POLICIES)}, not {on_error!r}")
        self.on_error = OnError(on_error.upper())
        self.catalog, self.pipeline, self.spark = catalog, pipeline, spark
        self.interval, self.lease_ttl = interval, lease_ttl
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.id = runtime_id or f"{pipeline}@{self.host}:{self.pid}:{uuid.uuid4().hex[:6]}"
        self.readiness_window = readiness_window
        self.leases = Leases(catalog, self.id, lease_ttl)
        self.listener = ProgressListener(catalog, self.leases.owns)
        spark.streams.addListener(self.listener)
        self.holds = Holds(catalog, spark, self.id, self.on_error, self.listener.violations)
        self.queries = SparkQueries(spark, catalog, self.leases, self.holds, self.listener)
        self.active = self.queries.active  # query id -> the Spark query this runtime runs for it
        self.status = Status(catalog, self.id)
        self.rollout = Rollout(catalog, readiness_window, self.queries, self.status)
        self.schedule = Schedule()
        self.observer = Observer(self.queries, self.leases, self.rollout, self.holds, self.schedule)
        self.reconciler = Reconciler(self.queries, self.leases, self.status, self.rollout, self.holds)
        self.stopping = threading.Event()
        self.newest_statement = catalog.commands.watch()  # looked at between passes
        self.wake_poll = WAKE_POLL_LOCAL if self.newest_statement.local else WAKE_POLL
        self.workers = ThreadPoolExecutor(workers, thread_name_prefix=f"streamql-{pipeline}")
        context = spark.sparkContext  # recorded with the first heartbeat, for links to it
        self.spark_info = {
            "spark_app_id": context.applicationId,
            "spark_ui_url": context.uiWebUrl,
            "master": context.master,
            # whether it can run a query on a Kafka topic (a CREATE naming one is refused when
            # no live runtime of the pipeline can); never the settings themselves
            "kafka": "kafka.bootstrap.servers" in kafka.settings(spark),
        }
        self.metrics = None
        if metrics_port is not None:
            render = lambda: exposition(catalog, pipeline, self.listener.latest, self.id)
            self.metrics = MetricsServer(render, port=metrics_port)
            log.info("metrics at http://%s:%d/metrics", self.host, self.metrics.port)

    # -- loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Reconcile until :meth:`stop` is called (or SIGTERM in the CLI), then shut down."""
        log.info("runtime %s serving pipeline %r", self.id, self.pipeline)
        keeper = threading.Thread(
            target=self.leases.keep, args=(self.stopping,), name=f"streamql-leases-{self.pipeline}", daemon=True
        )
        keeper.start()
        try:
            while not self.stopping.is_set():
                started, seen = time.monotonic(), self._last_command()
                try:
                    self.tick()
                except Exception:
                    log.exception("reconcile failed; retrying")
                self._wait_for_next_pass(started, seen)
        finally:
            self.shutdown()

    def _wait_for_next_pass(self, started: float, seen: int | None) -> None:
        """Sleep out the interval, but start the next pass as soon as a statement is logged
        after the last pass began (looked for every ``wake_poll`` s: one small read or, on
        PostgreSQL, a look for its announcement, see :data:`WAKE_POLL_LOCAL`): a PAUSE,
        RESUME or CREATE is acted on within that, not within a whole interval. After a look
        that failed, the next waits :data:`WAKE_POLL` (a catalog that cannot be reached is
        not asked 200 times a second)."""
        poll = self.wake_poll
        while not self.stopping.is_set():
            left = self.interval - (time.monotonic() - started)
            if left <= 0 or self.stopping.wait(min(poll, left)):
                return
            try:
                if seen is None:  # the pass's own read failed: a look that reads starts the next pass
                    self.newest_statement.last()
                    return
                if self.newest_statement.newer_than(seen):
                    return
                poll = self.wake_poll
            except Exception:  # the catalog is unreachable: the pass will say so
                poll = max(self.wake_poll, WAKE_POLL)

    def _last_command(self) -> int | None:
        try:
            return self.newest_statement.last()
        except Exception:  # the catalog is unreachable: the pass will say so
            return None

    def stop(self) -> None:
        self.stopping.set()

    def tick(self) -> None:
        """One reconcile pass over the pipeline's queries: heartbeat and renew every lease
        held (one write each), then observe and reconcile the queries, up to ``workers`` at
        once, and send the dead letters of the batches whose file reads left records out."""
        self.catalog.runtimes.heartbeat(self.id, self.pipeline, self.host, self.pid, **self.spark_info)
        self.leases.renew()  # a lease found lost is acted on at its query's look
        self.queries.new_pass()
        self._each("reconciling", self._reconcile_one, self.catalog.queries(self.pipeline))
        self._each("sending the dead letters of", self.queries.send_dead_letters_of, self.queries.dead_letters_due())

    def _reconcile_one(self, query: QueryInfo) -> None:
        if self.stopping.is_set():
            return
        decision = self.reconciler.reconcile(query, self.observer.observe(query, time.monotonic()))
        self.schedule.record(query.id, decision, time.monotonic())  # a back-off counts from now

    def _each(self, what: str, action, items) -> None:
        """``action`` on every item (a query or query id) on the worker threads; one failing
        is logged and does not keep the others from their turn."""
        for item, future in [(item, self.workers.submit(action, item)) for item in items]:
            try:
                future.result()
            except Exception:
                log.exception("%s %s failed", what, getattr(item, "id", item))

    def shutdown(self) -> None:
        """Stop every query after its in-flight batch, mark running ones UNASSIGNED (their
        checkpoints are kept; the next runtime resumes them) and release all leases."""
        self._each("stopping", self._unassign, list(self.active))
        self._each("sending the dead letters of", self.queries.send_dead_letters_of, self.queries.dead_letters_due())
        self.workers.shutdown()
        self.newest_statement.close()
        self.catalog.runtimes.stopped(self.id)
        if self.metrics is not None:
            self.metrics.close()
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception:  # the session may already be gone
            pass
        log.info("runtime %s stopped", self.id)

    def _unassign(self, query_id: str) -> None:
        self.status.unassigned(query_id, self.queries.stop(query_id))
