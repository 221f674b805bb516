"""The runtime: a long-running Spark driver serving one pipeline.

Every ``interval`` seconds it heartbeats, takes or renews the lease of each query of its
pipeline, and reconciles desired state into StreamingQuery objects: start what should run,
stop (pause) what should not, and write back what it observes. Nothing about a query lives
only here: a restarted runtime reads desired state and resumes from checkpoints.

This module is the loop and the hands: leases (with epochs for fencing), starting and
stopping Spark queries with a back-off after failures, and reporting observed state. What
to do with each query is decided in :mod:`.reconcile`; in-place upgrades and their rollback
are :mod:`.rollout`; bad-record holds are :mod:`.holds`.
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
from pyspark.sql.streaming import StreamingQuery

from ..catalog import ERROR_POLICIES, Catalog, QueryInfo, SourceInfo
from ..errors import SPARK_ERROR_LIMIT, StateError, first_line
from ..storage.checkpoints import remove_interrupted_writes
from .connectors import Frames, start_query
from .holds import Holds
from .listener import ProgressListener
from .metrics import MetricsServer, exposition
from .reconcile import Reconciler, Running
from .rollout import Rollout

log = logging.getLogger("streamql.runtime")

MAX_RETRY_DELAY = 60.0
#: how the JVM says the driver's heap is exhausted (a start that planned too much: a hopping
#: window with millions of windows per record took the driver out of memory)
OUT_OF_MEMORY = "java.lang.OutOfMemoryError"
#: seconds between looks for a new statement while waiting for the next pass
WAKE_POLL = 0.05


class Runtime:
    """Reconciles the queries of ``pipeline`` on ``spark``.

    :param lease_ttl: seconds a lease lasts without renewal; after a crash, another runtime
        takes the pipeline's queries this long after the last heartbeat.
    :param readiness_window: seconds a new version has, after an in-place swap, to fail
        and be rolled back automatically; it is ready earlier once it commits a batch.
    :param on_error: the pipeline's error policy for records a query cannot read (FAIL,
        LOG_AND_CONTINUE or PAUSE), for queries whose statement sets none.
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
        on_error: str = "FAIL",
        workers: int = 8,
        metrics_port: int | None = None,
    ):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers!r}")
        if on_error.upper() not in ERROR_POLICIES:
            raise ValueError(f"on_error must be one of {', '.join(ERROR_POLICIES)}, not {on_error!r}")
        self.on_error = on_error.upper()
        self.catalog, self.pipeline, self.spark = catalog, pipeline, spark
        self.interval, self.lease_ttl = interval, lease_ttl
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.id = runtime_id or f"{pipeline}@{self.host}:{self.pid}:{uuid.uuid4().hex[:6]}"
        #: query id -> the Spark query this runtime runs for it
        self.active: dict[str, Running] = {}
        self.frames = Frames()  # each query's built streaming frame, reused when it restarts
        self._pass_sources: dict[str, SourceInfo] | None = None  # see _sources()
        self._sources_lock = threading.Lock()
        #: query id -> the epoch of the lease this runtime holds on it
        self.epochs: dict[str, int] = {}
        #: query id -> (failed attempts, time.monotonic() before which it is not restarted)
        self.retry_at: dict[str, tuple[int, float]] = {}
        #: query id -> the version whose start ran the driver out of memory (not retried)
        self.out_of_memory: dict[str, int] = {}
        self.readiness_window = readiness_window
        self.rollout = Rollout(
            catalog,
            readiness_window,
            start=self.start_query,
            stop=self.stop_query,
            report=self.report,
            clear_back_off=self.clear_back_off,
        )
        self.holds = Holds(
            catalog, spark, self.id, self.on_error, settle=self.rollout.settle, clear_back_off=self.clear_back_off
        )
        self.reconciler = Reconciler(self, self.rollout, self.holds)
        self.pending = self.rollout.pending  # query id -> new version in its readiness window
        self.retried = self.holds.retried  # query id -> last batch whose bad records are retried
        self.stopping = threading.Event()
        self.workers = ThreadPoolExecutor(workers, thread_name_prefix=f"streamql-{pipeline}")
        #: query id -> epoch of a lease found lost between passes (by the lease keeper)
        self.lost: dict[str, int] = {}
        context = spark.sparkContext  # recorded with the first heartbeat, for links to it
        self.spark_info = {
            "spark_app_id": context.applicationId,
            "spark_ui_url": context.uiWebUrl,
            "master": context.master,
        }
        # A query is ours from the moment we hold its lease: its first batch may report
        # progress before start() returns.
        self.listener = ProgressListener(catalog, lambda name: name in self.epochs)
        spark.streams.addListener(self.listener)
        self.metrics = None
        if metrics_port is not None:
            render = lambda: exposition(catalog, pipeline, self.listener.latest, self.id)
            self.metrics = MetricsServer(render, port=metrics_port)
            log.info("metrics at http://%s:%d/metrics", self.host, self.metrics.port)

    # -- loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Reconcile until :meth:`stop` is called (or SIGTERM in the CLI), then shut down."""
        log.info("runtime %s serving pipeline %r", self.id, self.pipeline)
        keeper = threading.Thread(target=self._keep_leases, name=f"streamql-leases-{self.pipeline}", daemon=True)
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
        after the last pass began (checked every :data:`WAKE_POLL` s, one small read): a
        PAUSE, RESUME or CREATE is acted on within that, not within a whole interval."""
        while not self.stopping.is_set():
            left = self.interval - (time.monotonic() - started)
            if left <= 0 or self.stopping.wait(min(WAKE_POLL, left)):
                return
            last = self._last_command()
            if last is not None and last != seen:
                return

    def _last_command(self) -> int | None:
        try:
            return self.catalog.last_command()
        except Exception:  # the catalog is unreachable: the pass will say so
            return None

    def stop(self) -> None:
        self.stopping.set()

    def tick(self) -> None:
        """One reconcile pass over the pipeline's queries: heartbeat and renew every lease
        held (one write each), then reconcile the queries, up to ``workers`` at once."""
        self.catalog.heartbeat(self.id, self.pipeline, self.host, self.pid, **self.spark_info)
        self._renew_leases()
        self._pass_sources = None  # read once, by the pass's first query start
        self._each("reconciling", self._reconcile_one, self.catalog.queries(self.pipeline))

    def _reconcile_one(self, query: QueryInfo) -> None:
        if not self.stopping.is_set():
            self.reconciler.reconcile(query)

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
        self.workers.shutdown()
        self.catalog.runtime_stopped(self.id)
        if self.metrics is not None:
            self.metrics.close()
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception:  # the session may already be gone
            pass
        log.info("runtime %s stopped", self.id)

    def _unassign(self, query_id: str) -> None:
        epoch = self.stop_query(query_id)
        self.catalog.set_observed(query_id, "UNASSIGNED", runtime_id=self.id, epoch=epoch)

    # -- leases ----------------------------------------------------------------------------
    def _keep_leases(self) -> None:
        """Renew the leases held every quarter TTL while the runtime runs, apart from the
        reconcile passes: a pass that starts many queries on a busy machine may outlast the
        TTL, and a lease must not expire (and its query start elsewhere) while it runs here.
        Lost leases are handled by the next pass."""
        while not self.stopping.wait(self.lease_ttl / 4):
            try:
                self.lost.update(self._renew_all())
            except Exception:
                log.exception("renewing leases failed; retrying")

    def _renew_all(self) -> dict[str, int]:
        """Renew every lease held, in one write; returns the lost ones with their epoch."""
        return self.catalog.renew_leases(self.id, dict(self.epochs), self.lease_ttl)

    def _renew_leases(self) -> None:
        """Renew every lease held; stop the queries whose lease was lost (now or found lost
        by the keeper since the last pass)."""
        found, self.lost = self.lost, {}  # swapped, not cleared: the keeper may add meanwhile
        lost = {**found, **self._renew_all()}
        for query_id, epoch in lost.items():
            if self.epochs.get(query_id) != epoch:
                continue  # released or taken anew since
            if query_id in self.active:
                log.warning("lost the lease on %s; stopping it", query_id)
                self.stop_query(query_id)
            self.epochs.pop(query_id, None)

    def take_lease(self, query: QueryInfo) -> int | None:
        """The query's lease: its epoch, or None if another runtime holds it. Leases held
        were renewed at the start of the pass, where a query whose lease was lost (expired
        and taken, or fenced by a newer epoch) is stopped; others are acquired here."""
        if query.id not in self.epochs:
            epoch = self.catalog.acquire_lease(query.id, self.id, self.lease_ttl)
            if epoch is None:  # another runtime holds it: never run it here
                return None
            self.epochs[query.id] = epoch
        return self.epochs[query.id]

    def release_lease(self, query_id: str) -> None:
        self.catalog.release_lease(query_id, self.id)
        self.epochs.pop(query_id, None)

    def _check_lease(self, query_id: str, epoch: int) -> None:
        if not self.catalog.renew_lease(query_id, self.id, epoch, self.lease_ttl):
            raise StateError(f"runtime {self.id} lost the lease on {query_id} (epoch {epoch}); not committing")

    # -- Spark queries ---------------------------------------------------------------------
    def running(self, query_id: str) -> Running | None:
        return self.active.get(query_id)

    def start_query(self, query: QueryInfo, epoch: int, note: str | None = None) -> None:
        """Start the query's current version under ``epoch`` (unless its back-off is not
        over); a failure to start a pending new version rolls it back."""
        _attempts, when = self.retry_at.get(query.id, (0, 0.0))
        if time.monotonic() < when or self.out_of_memory.get(query.id) == query.version:
            return
        self.rollout.resume_window(query)
        self.report(query, "STARTING", epoch)
        try:
            known = self._sources()
            sink = known.get(query.sink)
            sources = {name: known.get(name) for name in query.sources}
            missing = [n for n, s in [(query.sink, sink), *sources.items()] if s is None]
            if missing:
                raise StateError(f"{', '.join(missing)} no longer exist(s) in the catalog")
            fence = lambda: self._check_lease(query.id, epoch)
            for path in remove_interrupted_writes(query.checkpoint):  # it is stopped: ours alone
                log.warning("%s: removed %s, left by a write its last stop interrupted", query.id, path)
            plan = query.plan
            guard = self.holds.guard(query)
            stream = start_query(self.spark, query, plan, sources, sink, fence, guard, self.frames)
            dead_letters = self.holds.dead_letter_query(query, plan, sources, guard)
        except Exception as e:
            message, retry = start_failure(e, query.version)
            if self.rollout.is_pending(query.id):
                self.rollout.roll_back(query, epoch, message)
                return
            if retry:
                delay = self._back_off(query.id)
                log.error("query %s failed to start (retry in %.0fs): %s", query.id, delay, e)
            else:
                self.out_of_memory[query.id] = query.version
                log.error("query %s failed to start, not retried: %s", query.id, message)
            self.report(query, "ERROR", epoch, error=message)
            return
        self.active[query.id] = Running(stream, epoch, query.version, dead_letters)
        self.rollout.record_start(query)
        if self.catalog.set_observed(
            query.id,
            "RUNNING",
            note,
            runtime_id=self.id,
            epoch=epoch,
            running_version=query.version,
            run_id=stream.runId,
        ):
            query.observed_state, query.error = "RUNNING", note

    def _sources(self) -> dict[str, SourceInfo]:
        """The catalog's sources as this pass sees them: one read for all the queries a
        pass starts (RESUME ALL, a new pipeline), not two per query."""
        with self._sources_lock:
            if self._pass_sources is None:
                self._pass_sources = self.catalog.sources()
            return self._pass_sources

    def stop_query(self, query_id: str) -> int | None:
        """Stop a query (Spark lets its in-flight batch end or re-runs it from the
        checkpoint); it leaves ``active`` only once stopped. Returns the epoch it ran under
        (None if it was not running)."""
        running = self.active.get(query_id)
        if running is None:
            return None
        _stop_quietly(running.stream)
        if running.dead_letters is not None:
            _stop_quietly(running.dead_letters)
        del self.active[query_id]
        self.listener.latest.pop(query_id, None)  # its rates are no longer this runtime's to tell
        return running.epoch

    def failed(self, query: QueryInfo, epoch: int, message: str) -> None:
        """Spark stopped the query by itself: ERROR, and a restart after a back-off."""
        delay = self._back_off(query.id)
        log.error("query %s failed (retry in %.0fs): %s", query.id, delay, message)
        self.catalog.set_observed(query.id, "ERROR", message, runtime_id=self.id, epoch=epoch)
        query.observed_state, query.error = "ERROR", message

    def _back_off(self, query_id: str) -> float:
        """Schedule the next start attempt after a failure: 1 s, doubling up to 60 s."""
        attempts, _ = self.retry_at.get(query_id, (0, 0.0))
        delay = min(MAX_RETRY_DELAY, 2.0**attempts)
        self.retry_at[query_id] = (attempts + 1, time.monotonic() + delay)
        return delay

    def clear_back_off(self, query_id: str) -> None:
        self.retry_at.pop(query_id, None)
        self.out_of_memory.pop(query_id, None)

    def report(self, query: QueryInfo, state: str, epoch: int, error: str | None = None) -> None:
        """Write an observed state (unless unchanged)."""
        if query.observed_state == state and (error is None or query.error == error):
            return  # unchanged (a note such as a rollback's stays until the state changes)
        if self.catalog.set_observed(query.id, state, error, runtime_id=self.id, epoch=epoch):
            query.observed_state, query.error = state, error
            log.info("%s %s%s", query.id, state, f": {error}" if error else "")


def start_failure(error: BaseException, version: int) -> tuple[str, bool]:
    """The ERROR a start that raised ``error`` reports, and whether it is retried after the
    back-off. A start that ran the driver out of memory is not: it would again, each time
    starving the driver's other queries, and STARTING would hide why (PAUSE and RESUME, or
    a new version, start it again)."""
    message = first_line(error, SPARK_ERROR_LIMIT)
    if OUT_OF_MEMORY not in str(error):
        return message, True
    return (
        f"the Spark driver ran out of memory starting version {version} ({message}); not retried: "
        f"PAUSE and RESUME the query, or replace it with a version that needs less",
        False,
    )


def _stop_quietly(stream: StreamingQuery) -> None:
    """Stop a query even if the JVM is already going down (SIGTERM sent to the process group)."""
    try:
        stream.stop()
    except Exception as e:
        log.warning("stopping %s: %s", stream.name, first_line(e, SPARK_ERROR_LIMIT))
