"""The Spark streaming queries a runtime runs: starting one for a query's current version
(with its lease's fence, its bad-record guard and, under LOG_AND_CONTINUE, its dead-letter
companion) and stopping it after its in-flight batch.

This is the runtime's hands on Spark; what to start or stop, and what to report, is
decided by :mod:`.reconcile`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..catalog import Catalog, QueryInfo, SourceInfo
from ..errors import CheckpointDamaged, StateError
from ..storage.checkpoints import last_committed_batch, last_planned_batch, remove_interrupted_writes
from ..storage.faults import damage_report, dead_letter_damage_report, find_damage, newest_whole_snapshot
from ..storage.layout import dead_letter_checkpoint
from . import kafka
from .companion import companion_reads, dead_letter_offsets
from .connectors import Frames, ready_folders, start_query
from .file_dead_letters import FileDeadLetters
from .holds import Holds
from .leases import Leases
from .listener import ProgressListener

log = logging.getLogger("streamql.runtime")


@dataclass
class Running:
    """A query this runtime runs: its Spark query, the lease epoch and version it runs under."""

    stream: StreamingQuery
    epoch: int
    version: int
    #: LOG_AND_CONTINUE on a Kafka topic: the companion query sending bad records to the
    #: dead-letter stream (a query reading files has none: :mod:`.file_dead_letters`)
    dead_letters: StreamingQuery | None = None
    #: the last batch its checkpoint had planned when it started (-1: none): the batch it
    #: runs again first, when it had failed in it
    replays: int = -1

    @property
    def stopped(self) -> bool:
        """Spark stopped it (or its companion) by itself."""
        return not self.stream.isActive or (self.dead_letters is not None and not self.dead_letters.isActive)

    def exception(self):
        """Why Spark stopped it, if it failed."""
        return self.stream.exception() or (self.dead_letters.exception() if self.dead_letters is not None else None)


class SparkQueries:
    """The Spark queries of one runtime, by query id."""

    def __init__(self, spark: SparkSession, catalog: Catalog, leases: Leases, holds: Holds, listener: ProgressListener):
        self.spark, self.catalog, self.leases, self.holds, self.listener = spark, catalog, leases, holds, listener
        #: query id -> the Spark query this runtime runs for it
        self.active: dict[str, Running] = {}
        self.frames = Frames()  # each query's built streaming frame, reused when it restarts
        #: the dead letters of queries' file reads, sent after their batches
        self.file_dead_letters = FileDeadLetters(catalog, spark, listener.bad_counts)
        self._pass_sources: dict[str, SourceInfo] | None = None  # see _sources()
        self._sources_lock = threading.Lock()

    def running(self, query_id: str) -> Running | None:
        return self.active.get(query_id)

    def new_pass(self) -> None:
        """A pass begins: the catalog's sources are read again by its first start."""
        self._pass_sources = None

    def start(self, query: QueryInfo, epoch: int) -> Running:
        """Start the query's current version under ``epoch``: each batch commits only while
        that lease is held. Raises what kept it from starting."""
        known = self._sources()
        sink = known.get(query.sink)
        sources = {name: known[name] for name in query.sources if name in known}
        missing = [n for n in [query.sink, *query.sources] if n not in known]
        if sink is None or missing:
            raise StateError(f"{', '.join(missing)} no longer exist(s) in the catalog")
        fence = lambda: self.leases.check(query.id, epoch)
        for path in remove_interrupted_writes(query.checkpoint):  # it is stopped: ours alone
            log.warning("%s: removed %s, left by a write its last stop interrupted", query.id, path)
        damage = find_damage(query.checkpoint)
        if damage is not None:  # Spark would fail deep in a task, or read a cut entry as no entry
            taken = [(s.number, s.folder) for s in self.catalog.snapshots.of(query.id)]
            newest = newest_whole_snapshot(query.checkpoint, taken)
            raise CheckpointDamaged(damage_report(query.id, damage, query.checkpoint, newest))
        plan = query.plan
        replays = last_planned_batch(query.checkpoint)
        guard = self.holds.guard(query)
        going_on: dict[str, dict[str, int]] = {}
        if guard.sends_dead_letters and companion_reads(query, plan, sources):
            # its companion's checkpoint is checked before either query starts: Spark fails it at every retry
            damage = find_damage(dead_letter_checkpoint(query.checkpoint))
            if damage is not None:
                raise CheckpointDamaged(dead_letter_damage_report(query.id, damage, query.checkpoint))
            going_on = dead_letter_offsets(query)
        check = self.holds.expectation_check(query, sources)
        ready_folders(src for name, src in sources.items() if name not in plan.static_tables)  # reused frames too
        # before the start: its first batch may commit at once
        self.file_dead_letters.follow(query, plan, sources, guard, last_committed_batch(query.checkpoint), replays)
        # the companion first: the query never runs a batch whose bad records no one sends
        dead_letters = self.holds.dead_letter_query(query, plan, sources, guard, self.frames, going_on)
        try:
            stream = start_query(self.spark, query, plan, sources, sink, fence, guard, self.frames, check)
        except BaseException:
            if dead_letters is not None:  # the start failed as a whole: no query runs that no one tracks
                stop_after_batch(dead_letters)
            raise
        running = self.active[query.id] = Running(stream, epoch, query.version, dead_letters, replays)
        return running

    def _sources(self) -> dict[str, SourceInfo]:
        """The catalog's sources as this pass sees them: one read for all the queries a
        pass starts (RESUME ALL, a new pipeline), not two per query."""
        with self._sources_lock:
            if self._pass_sources is None:
                self._pass_sources = self.catalog.sources()
            return self._pass_sources

    def stop(self, query_id: str) -> int | None:
        """Stop a query after its in-flight batch, that batch's commit included (see
        :func:`stop_after_batch`); it leaves ``active`` only once stopped. Returns the epoch
        it ran under (None if it was not running)."""
        running = self.active.get(query_id)
        if running is None:
            return None
        stop_after_batch(running.stream)
        self.file_dead_letters.stopped(query_id, running.stream)
        if running.dead_letters is not None:
            stop_after_batch(running.dead_letters)
        del self.active[query_id]
        self.listener.latest.pop(query_id, None)  # its rates are no longer this runtime's to tell
        return running.epoch

    def forget(self, query_id: str) -> None:
        """A query will not run here again as it was (terminated, or its lease lost): its built
        frames, and what was known of its batches' dead letters, are let go."""
        self.frames.forget(query_id)
        self.file_dead_letters.forget(query_id)

    def dead_letters_due(self) -> list[str]:
        """The queries whose batches since the last sent are to be looked at for dead letters
        of their file reads (:meth:`send_dead_letters_of`)."""
        return self.file_dead_letters.due(lambda query_id: query_id in self.active)

    def send_dead_letters_of(self, query_id: str) -> None:
        """Send the dead letters of the query's batches committed since the last sent."""
        self.file_dead_letters.send(query_id, running=query_id in self.active)


#: seconds a stop waits for the in-flight batch to end before it interrupts it (a batch
#: stuck on its sink would otherwise hold the stop, and the runtime's pass, for ever)
BATCH_BOUNDARY_WAIT = 300


def stop_after_batch(stream: StreamingQuery, wait: int = BATCH_BOUNDARY_WAIT) -> None:
    """Stop a query at a batch boundary: its in-flight batch ends, writes its output and
    its entry in ``commits/``, then the stream thread leaves its loop; no new batch starts.

    ``StreamingQuery.stop()`` alone interrupts the stream thread wherever it is: in the
    middle of the batch's write (a cancelled job, a hidden temp folder left in the sink) or
    of ``markMicroBatchEnd``'s commit-log write (an ``InterruptedException`` in
    ``HDFSMetadataLog.write``, at times a ``StackOverflowError`` in the thread and a failed
    ``stop()``); the batch then runs again after the restart. Spark's loop checks its state
    at each trigger's end, so the state is set to TERMINATED first (what ``stop()`` sets
    before it interrupts) and the thread is awaited; ``stop()`` then only tidies up. A thread
    asleep between triggers (no new data: Spark sleeps its polling delay before it reads its
    state again) is woken (:func:`_awaited`). If the batch does not end within ``wait``
    seconds, or Spark's internals are not as expected (another Spark version), it falls back
    to the interrupting stop.
    """
    try:
        if stream.isActive:
            execution = stream._jsq.streamingQuery()
            execution.state().set(_terminated(SparkContext._jvm))
            if not _awaited(execution.queryExecutionThread(), wait):
                log.warning("%s: its batch did not end within %ss; interrupting it", stream.name, wait)
    except Exception as e:  # the JVM going down (SIGTERM sent to the process group), or another Spark
        log.warning("stopping %s at a batch boundary: %s", stream.name, kafka.error_report(e))
    try:
        stream.stop()
    except Exception as e:
        log.warning("stopping %s: %s", stream.name, kafka.error_report(e))


@functools.lru_cache(maxsize=1)
def _terminated(jvm):
    """Spark's TERMINATED query state in ``jvm``, looked up once: each name of a Java package
    path is a call into the JVM (nine for this one, in every stop of PAUSE ALL's)."""
    runtime_states = jvm.org.apache.spark.sql.execution.streaming.runtime
    return getattr(getattr(runtime_states, "TERMINATED$"), "MODULE$")


#: milliseconds between looks at a stopping query's stream thread
STOP_LOOK_MS = 20


def _awaited(thread, wait: int) -> bool:
    """The stream ``thread`` (a JVM ``Thread``) ended within ``wait`` seconds; the thread is
    watched, not the query (Spark's ``awaitTermination`` with a timeout answers, once the
    timeout is out, whether the state is TERMINATED: it already is). While it sleeps between
    triggers it is interrupted: with the state TERMINATED it starts no batch after that sleep,
    so the interrupt ends the sleep and nothing else (Spark takes it for its own stop's, and
    holds an interrupt back while the thread cleans up). Unwoken, a stop of a query idle under
    the default trigger waited out the polling delay, and PAUSE ALL one such wait per query
    each worker stopped. (A processing-time trigger's wait for its interval is not woken.)"""
    deadline = time.monotonic() + wait
    while thread.isAlive():
        if time.monotonic() >= deadline:
            return False
        if asleep_between_triggers(thread):
            thread.interrupt()
        thread.join(STOP_LOOK_MS)
    return True


def asleep_between_triggers(thread) -> bool:
    """Whether a query's stream thread (a JVM ``Thread``) sleeps where Spark's micro-batch
    loop waits for new data (``Thread.sleep`` called by ``MicroBatchExecution.executeOneBatch``).
    Every value read is a call into the JVM, and a stop of PAUSE ALL's makes this look at
    least once: the stack is read from its top to the first frame outside ``Thread``, each
    frame as one text (its class and method names would be two calls more)."""
    trace = thread.getStackTrace()  # a Java array: its length and each element are calls too
    frames: list[tuple[str, str]] = []
    for i in range(min(len(trace), 4)):
        frames.append(stack_frame(str(trace[i])))
        if frames[-1][0] != "java.lang.Thread":
            break
    return sleeps_between_triggers(frames)


def stack_frame(text: str) -> tuple[str, str]:
    """(class, method) of a Java stack frame as ``StackTraceElement.toString`` writes it:
    ``[loader/][module[@version]/]class.method(file:line)``."""
    name = text.split("(", 1)[0].rsplit("/", 1)[-1]
    cls, _, method = name.rpartition(".")
    return cls, method


def sleeps_between_triggers(frames: list[tuple[str, str]]) -> bool:
    """Whether a stack whose top ``frames`` are (class, method) sleeps in Spark's wait for new
    data: ``Thread.sleep`` (and what it calls in ``Thread``), called by ``executeOneBatch``."""
    sleeping = bool(frames) and frames[0][0] == "java.lang.Thread" and frames[0][1].startswith("sleep")
    caller = next((f for f in frames if f[0] != "java.lang.Thread"), ("", ""))
    return sleeping and caller[0].endswith(".MicroBatchExecution") and caller[1] == "executeOneBatch"
