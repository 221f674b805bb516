"""The runtime: a long-running Spark driver serving one pipeline.

Every ``interval`` seconds it heartbeats, takes or renews the lease of each query of its
pipeline, and reconciles desired state into StreamingQuery objects: start what should run,
stop (pause) what should not, and write back what it observes. Nothing about a query lives
only here: a restarted runtime reads desired state and resumes from checkpoints.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..catalog import ERROR_POLICIES, Catalog, QueryInfo
from ..catalog.connections import write_connection
from ..storage.checkpoints import batch_files, last_committed_batch, last_planned_batch
from ..errors import StateError
from .badrecords import MARKER, DeadLetterWriter, RecordGuard, records_in_error, scan_files
from .connectors import start_dead_letter_query, start_query
from .listener import ProgressListener
from .upgrade import PendingUpgrade, discard_output, restore_snapshot, take_snapshot

log = logging.getLogger("streamql.runtime")

MAX_RETRY_DELAY = 60.0


@dataclass
class _Running:
    stream: StreamingQuery
    epoch: int
    version: int
    #: LOG_AND_CONTINUE: the companion query sending bad records to the dead-letter stream
    dead_letters: StreamingQuery | None = None


class Runtime:
    """Reconciles the queries of ``pipeline`` on ``spark``.

    :param lease_ttl: seconds a lease lasts without renewal; after a crash, another runtime
        takes the pipeline's queries this long after the last heartbeat.
    :param readiness_window: seconds a new version has, after an in-place swap, to fail
        and be rolled back automatically; it is ready earlier once it commits a batch.
    :param on_error: the pipeline's error policy for records a query cannot read (FAIL,
        LOG_AND_CONTINUE or PAUSE), for queries whose statement sets none.
    """

    def __init__(self, catalog: Catalog, pipeline: str, spark: SparkSession, *,
                 interval: float = 0.5, lease_ttl: float = 10.0, runtime_id: str | None = None,
                 readiness_window: float = 30.0, on_error: str = "FAIL"):
        if on_error.upper() not in ERROR_POLICIES:
            raise ValueError(f"on_error must be one of {', '.join(ERROR_POLICIES)}, not {on_error!r}")
        self.on_error = on_error.upper()
        #: query id -> last batch whose bad records a RESUME retries
        self.retried: dict[str, int] = {}
        self.catalog, self.pipeline, self.spark = catalog, pipeline, spark
        self.interval, self.lease_ttl = interval, lease_ttl
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.id = runtime_id or f"{pipeline}@{self.host}:{self.pid}:{uuid.uuid4().hex[:6]}"
        self.active: dict[str, _Running] = {}
        self.epochs: dict[str, int] = {}
        self.retry_at: dict[str, tuple[int, float]] = {}
        self.readiness_window = readiness_window
        self.pending: dict[str, PendingUpgrade] = {}
        self.stopping = threading.Event()
        context = spark.sparkContext  # recorded with the first heartbeat, for links to it
        self.spark_info = {"spark_app_id": context.applicationId,
                           "spark_ui_url": context.uiWebUrl, "master": context.master}
        # A query is ours from the moment we hold its lease: its first batch may report
        # progress before start() returns.
        self.listener = ProgressListener(catalog, lambda name: name in self.epochs)
        spark.streams.addListener(self.listener)

    # -- loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Reconcile until :meth:`stop` is called (or SIGTERM in the CLI), then shut down."""
        log.info("runtime %s serving pipeline %r", self.id, self.pipeline)
        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    self.tick()
                except Exception:
                    log.exception("reconcile failed; retrying")
                self.stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))
        finally:
            self.shutdown()

    def stop(self) -> None:
        self.stopping.set()

    def tick(self) -> None:
        """One reconcile pass over the pipeline's queries."""
        self.catalog.heartbeat(self.id, self.pipeline, self.host, self.pid, **self.spark_info)
        for query in self.catalog.queries(self.pipeline):
            if self.stopping.is_set():
                return
            self._reconcile(query)

    def shutdown(self) -> None:
        """Stop every query after its in-flight batch, mark running ones UNASSIGNED (their
        checkpoints are kept; the next runtime resumes them) and release all leases."""
        for query_id in list(self.active):
            epoch = self._stop(query_id)
            self.catalog.set_observed(query_id, "UNASSIGNED", runtime_id=self.id, epoch=epoch)
        self.catalog.runtime_stopped(self.id)
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception:  # the session may already be gone
            pass
        log.info("runtime %s stopped", self.id)

    # -- one query ---------------------------------------------------------------------------
    def _reconcile(self, query: QueryInfo) -> None:
        if (query.desired_state == "TERMINATED" and query.observed_state == "TERMINATED"
                and query.id not in self.active):
            return
        if self._notice_failure(query):
            return  # rolled back: the next pass sees the restored version
        epoch = self.catalog.acquire_lease(query.id, self.id, self.lease_ttl)
        if epoch is None:  # another runtime holds it: never run it here
            if query.id in self.active:
                log.warning("lost the lease on %s; stopping it", query.id)
                self._stop(query.id)
            self.epochs.pop(query.id, None)
            return
        if self.epochs.get(query.id) != epoch and query.id in self.active:
            self._stop(query.id)  # fenced by a newer epoch
        self.epochs[query.id] = epoch
        desired = query.desired_state
        if desired == "RUNNING":
            if query.id not in self.active:
                self._start(query, epoch)
            elif self.active[query.id].version != query.version:
                self._upgrade(query, epoch)
            else:
                self._check_readiness(query)
                self._check_retried(query)
                self._report(query, "RUNNING", epoch)
        elif desired == "PAUSED":
            self.retry_at.pop(query.id, None)
            if query.id in self.active:
                self._report(query, "PAUSING", epoch)
                self._stop(query.id)
            self._report(query, "PAUSED", epoch)
        else:
            if query.id in self.active:
                self._stop(query.id)
            self._report(query, "TERMINATED", epoch)
            self.catalog.release_lease(query.id, self.id)
            self.epochs.pop(query.id, None)

    def _stop(self, query_id: str) -> int:
        """Stop a query (Spark lets its in-flight batch end or re-runs it from the
        checkpoint); it leaves ``active`` only once stopped. Returns the epoch it ran under."""
        running = self.active[query_id]
        _stop_quietly(running.stream)
        if running.dead_letters is not None:
            _stop_quietly(running.dead_letters)
        del self.active[query_id]
        return running.epoch

    # -- in-place upgrades -----------------------------------------------------------------
    def _upgrade(self, query: QueryInfo, epoch: int) -> None:
        """Swap version N for N+1 on the same checkpoint: stop N after its in-flight batch,
        snapshot the checkpoint, start N+1; a failure before N+1 is ready rolls back to N."""
        previous = self.active[query.id].version
        self._report(query, "UPGRADING", epoch)
        self._stop(query.id)
        snapshot = take_snapshot(query.checkpoint, previous)
        self.catalog.mark_version(query.id, previous, ended_at=time.time(), outcome="REPLACED")
        self.pending[query.id] = PendingUpgrade(
            previous, snapshot, last_committed_batch(query.checkpoint),
            time.monotonic() + self.readiness_window)
        log.info("%s: upgrading from version %d to %d", query.id, previous, query.version)
        self._start(query, epoch)

    def _check_readiness(self, query: QueryInfo) -> None:
        pending = self.pending.get(query.id)
        if pending and (last_committed_batch(query.checkpoint) > pending.committed_before
                        or time.monotonic() > pending.deadline):
            del self.pending[query.id]
            self.catalog.mark_version(query.id, query.version, outcome="ACTIVE")
            log.info("%s: version %d is ready", query.id, query.version)

    def _roll_back(self, query: QueryInfo, epoch: int, error: str) -> None:
        pending = self.pending.pop(query.id)
        failed = query.version
        log.error("%s: version %d failed (%s); rolling back to %d", query.id, failed, error,
                  pending.previous_version)
        self._report(query, "ROLLING_BACK", epoch)
        if query.id in self.active:
            self._stop(query.id)
        restore_snapshot(query.checkpoint, pending.snapshot)
        sink = self.catalog.source(query.sink)
        if sink is not None:
            discard_output(sink.path, failed)
        self.catalog.roll_back(query.id, pending.previous_version, failed, error)
        restored = self.catalog.query(query.id)
        restored.observed_state = "ROLLING_BACK"
        self.retry_at.pop(query.id, None)
        self._start(restored, epoch, note=f"version {failed} failed and was rolled back: {error}")

    def _start(self, query: QueryInfo, epoch: int, note: str | None = None) -> None:
        _attempts, when = self.retry_at.get(query.id, (0, 0.0))
        if time.monotonic() < when:
            return
        self._report(query, "STARTING", epoch)
        try:
            sink = self.catalog.source(query.sink)
            sources = {name: self.catalog.source(name) for name in query.sources}
            missing = [n for n, s in [(query.sink, sink), *sources.items()] if s is None]
            if missing:
                raise StateError(f"{', '.join(missing)} no longer exist(s) in the catalog")
            fence = lambda: self._check_lease(query.id, epoch)
            plan = query.plan
            guard = self._record_guard(query)
            stream = start_query(self.spark, query, plan, sources, sink, fence, guard)
            dead_letters = None
            if guard.policy == "LOG_AND_CONTINUE":
                dead_letters = start_dead_letter_query(self.spark, query, plan, sources,
                                                       DeadLetterWriter(self.catalog, query, sources))
        except Exception as e:
            if query.id in self.pending:
                self._roll_back(query, epoch, _short(e))
                return
            delay = self._back_off(query.id)
            log.error("query %s failed to start (retry in %.0fs): %s", query.id, delay, e)
            self._report(query, "ERROR", epoch, error=_short(e))
            return
        self.active[query.id] = _Running(stream, epoch, query.version, dead_letters)
        if query.running_version not in (None, query.version) and query.id not in self.pending:
            earlier = next((v for v in self.catalog.versions(query.id)
                            if v["version"] == query.running_version), None)
            if earlier is not None and earlier["outcome"] == "ACTIVE":
                # replaced while it did not run (paused): the earlier version ended then
                self.catalog.mark_version(query.id, query.running_version, outcome="REPLACED",
                                          ended_at=time.time())
        # the version's record first, so whoever sees RUNNING also sees its outcome
        self.catalog.mark_version(query.id, query.version, started_at=time.time(),
                                  **({} if query.id in self.pending else {"outcome": "ACTIVE"}))
        if self.catalog.set_observed(query.id, "RUNNING", note, runtime_id=self.id, epoch=epoch,
                                     running_version=query.version, run_id=stream.runId):
            query.observed_state, query.error = "RUNNING", note

    def _notice_failure(self, query: QueryInfo) -> bool:
        """Handle a query Spark stopped by itself; True if that rolled back an upgrade."""
        running = self.active.get(query.id)
        if running is None or (running.stream.isActive and
                               (running.dead_letters is None or running.dead_letters.isActive)):
            return False
        self._stop(query.id)  # both of its streaming queries
        error = running.stream.exception() or (running.dead_letters.exception()
                                                if running.dead_letters is not None else None)
        # the guard's own error (a plan dump in another error may quote its expression)
        if error is not None and f"{MARKER} {query.id} " in _short(error) and \
                self._hold(query, running, _short(error)):
            return True
        if query.id in self.pending:  # the new version failed before it was ready
            self._roll_back(query, running.epoch, _short(error) if error else "stopped")
            return True
        delay = self._back_off(query.id)
        message = _short(error) if error else "the streaming query stopped unexpectedly"
        log.error("query %s failed (retry in %.0fs): %s", query.id, delay, message)
        self.catalog.set_observed(query.id, "ERROR", message, runtime_id=self.id, epoch=running.epoch)
        query.observed_state, query.error = "ERROR", message
        return False

    # -- bad records -------------------------------------------------------------------------
    def _record_guard(self, query: QueryInfo) -> RecordGuard:
        """The query's error policy, and the skipped records its next batches must leave out
        (those of batches not committed yet)."""
        committed = last_committed_batch(query.checkpoint)
        records = self.catalog.bad_records(query.id)
        skipped = frozenset(r.record_id for r in records if r.status == "SKIPPED" and r.batch_id > committed)
        retried = [r.batch_id for r in records if r.status == "RETRIED"]
        if retried:
            self.retried[query.id] = max(retried)
        return RecordGuard(query.id, self._policy(query), skipped)

    def _policy(self, query: QueryInfo) -> str:
        """The query's own on_error, else the pipeline's default (this runtime's)."""
        return query.settings.get("on_error") or self.on_error

    def _check_retried(self, query: QueryInfo) -> None:
        """A retried batch that committed resolved its bad records (the fix worked)."""
        batch = self.retried.get(query.id)
        if batch is not None and last_committed_batch(query.checkpoint) >= batch:
            del self.retried[query.id]
            with write_connection(self.catalog.engine) as conn:
                self.catalog.mark_bad_records(conn, query.id, "RETRIED", "RESOLVED", upto_batch=batch)
            log.info("%s: the batch that held it committed; its bad records are resolved", query.id)

    def _hold(self, query: QueryInfo, running: _Running, error: str) -> bool:
        """A batch failed on bad records: find them all; under PAUSE record them and pause the
        query (True); under FAIL record them and let it fail (False)."""
        policy = self._policy(query)
        status = "PENDING" if policy == "PAUSE" else "FAILED"
        batch = last_planned_batch(query.checkpoint)
        files = batch_files(query.checkpoint, batch)
        records = []
        for name in query.sources:
            src = self.catalog.source(name)
            if src is not None:
                mine = {f for f in files if f.startswith(os.path.realpath(src.path) + os.sep)}
                records += scan_files(self.spark, src, mine, query_id=query.id, batch_id=batch,
                                      status=status)
        if not records:  # a Kafka record (or a file gone since): what the error says of it
            records = records_in_error(error, query.id, batch, status)
        first = records[0] if records else None
        where = f"first at {first.position}: {first.error}" if first else error[:300]
        log.error("%s: batch %d holds %d bad record(s); %s (policy %s)", query.id, batch,
                  len(records), where, policy)
        if policy != "PAUSE":
            self.catalog.record_bad_records(records)
            return False
        if query.id in self.pending:  # the new version did not fail: the record is bad for it too
            self.pending.pop(query.id)
            self.catalog.mark_version(query.id, query.version, outcome="ACTIVE")
        reason = (f"BAD_RECORD: {len(records)} bad record(s) in batch {batch}, {where}; fix the "
                  f"definition and RESUME, or RESUME {query.id} SKIP BAD RECORDS")
        self.retry_at.pop(query.id, None)
        if self.catalog.hold_on_bad_records(query.id, records, reason, runtime_id=self.id,
                                            epoch=running.epoch):
            query.desired_state, query.observed_state, query.error = "PAUSED", "PAUSED", reason
        return True

    def _back_off(self, query_id: str) -> float:
        """Schedule the next start attempt after a failure: 1 s, doubling up to 60 s."""
        attempts, _ = self.retry_at.get(query_id, (0, 0.0))
        delay = min(MAX_RETRY_DELAY, 2.0 ** attempts)
        self.retry_at[query_id] = (attempts + 1, time.monotonic() + delay)
        return delay

    def _check_lease(self, query_id: str, epoch: int) -> None:
        if not self.catalog.renew_lease(query_id, self.id, epoch, self.lease_ttl):
            raise StateError(f"runtime {self.id} lost the lease on {query_id} (epoch {epoch}); "
                             f"not committing")

    def _report(self, query: QueryInfo, state: str, epoch: int, error: str | None = None) -> None:
        if query.observed_state == state and (error is None or query.error == error):
            return  # unchanged (a note such as a rollback's stays until the state changes)
        if self.catalog.set_observed(query.id, state, error, runtime_id=self.id, epoch=epoch):
            query.observed_state, query.error = state, error
            log.info("%s %s%s", query.id, state, f": {error}" if error else "")


def _stop_quietly(stream: StreamingQuery) -> None:
    """Stop a query even if the JVM is already going down (SIGTERM sent to the process group)."""
    try:
        stream.stop()
    except Exception as e:
        log.warning("stopping %s: %s", stream.name, _short(e))


def _short(error: BaseException | object) -> str:
    text = str(getattr(error, "desc", None) or error)
    return text.strip().splitlines()[0][:2000] if text.strip() else type(error).__name__
