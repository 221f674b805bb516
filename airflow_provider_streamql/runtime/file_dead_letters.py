"""The dead letters of a query's file reads under LOG_AND_CONTINUE, found after their batch.

The query leaves its bad records out and counts those of each file source as it reads them
(an observed metric, :data:`.badrecords.BAD_COUNT`); the count reaches the runtime with the
batch's progress (:class:`BadCounts`). A batch that left records out has its input files read
again once it committed (the checkpoint lists them, :func:`.badrecords.scan_files`), and its bad
records go to the query's dead-letter stream and the catalog at the runtime's next pass. A
batch that left none out costs nothing more, so a query reading files runs one Spark query and
reads its input once. (A query reading a Kafka topic keeps its companion query, which reads
everything again: :mod:`.companion`.)

At least once: the checkpoint records the last batch whose dead letters were sent
(:func:`~..storage.checkpoints.dead_letters_sent`), after each batch that had some. A batch
committed after it whose count the runtime never saw (it stopped first, Spark's listener bus
dropped the event), and a batch run again at a start (its output may have been written
before a crash, so the sink skips it and counts nothing), are read again. Sending a batch's
dead letters twice changes nothing: the dead-letter file is named after the batch and its
files, and written once; the catalog keeps one row per record and batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..catalog import BadRecordStatus, Catalog, QueryInfo, SourceInfo
from ..language.starting import Starting
from ..language.streaming import StreamingPlan
from ..storage.checkpoints import (
    batch_files,
    dead_letters_sent,
    first_planned_batch,
    has_offsets,
    last_committed_batch,
    processed_files,
    record_dead_letters_sent,
)
from ..storage.layout import dead_letter_checkpoint
from .badrecords import BAD_COUNT, DeadLetterWriter, RecordGuard, scan_files
from .companion import checked_streams, has_companion

log = logging.getLogger("streamql.runtime")


def bad_count(metrics: object) -> int | None:
    """The bad records a batch's reads of files left out, from its progress's observed
    metrics (None: the batch counted none, so it is not known)."""
    if not isinstance(metrics, dict):
        return None
    found = [v for k, v in metrics.items() if isinstance(k, str) and k.startswith(BAD_COUNT)]
    if not found:
        return None
    values = [x for v in found for x in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else [v])]
    return sum(int(x) for x in values if isinstance(x, int | float))


class BadCounts:
    """Query id -> batch id -> the bad records the batch's file reads left out, as its progress
    says (written on Spark's listener thread, taken by the runtime's passes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, dict[int, int]] = {}  # only of the queries followed

    def follow(self, query_id: str) -> None:
        """Keep the counts of the query's batches from now on (none of another is kept)."""
        with self._lock:
            self._counts.setdefault(query_id, {})

    def report(self, query_id: str, batch_id: int, metrics: object, rows: object = None) -> None:
        """A batch's progress: its observed ``metrics`` and how many ``rows`` it read (a batch
        that read none, such as one only moving the watermark on, left none out); one without
        either is left out."""
        count = bad_count(metrics)
        if count is None and rows == 0:
            count = 0
        if count is not None:
            with self._lock:
                if query_id in self._counts:
                    self._counts[query_id][batch_id] = count

    def newest(self, query_id: str) -> int:
        """The newest batch of the query with a count (-1: none)."""
        with self._lock:
            return max(self._counts.get(query_id, {}), default=-1)

    def of(self, query_id: str) -> dict[int, int]:
        with self._lock:
            return dict(self._counts.get(query_id, {}))

    def drop(self, query_id: str, upto: int | None = None) -> None:
        """Let go of the counts of a query's batches up to ``upto`` (None: all, and the query
        is no longer followed)."""
        with self._lock:
            if upto is None:
                self._counts.pop(query_id, None)
                return
            counts = self._counts.get(query_id, {})
            for batch in [b for b in counts if b <= upto]:
                del counts[batch]


@dataclass
class _Followed:
    """A query whose file reads' dead letters are sent after their batch."""

    query: QueryInfo
    files: list[SourceInfo]  # the checked file sources it streams
    writer: DeadLetterWriter
    sent: int  # the last batch whose dead letters were sent
    #: the last batch committed before this start (its count was never seen here), and the
    #: last planned (run again first: a count of it may be of a batch the sink skipped)
    before_start: int
    replayed: int
    #: the version that no longer sends them stopped after this batch: sent up to it, then no more
    final: int | None = None
    #: files of the first batches a companion query had read already (a query that had one)
    already: frozenset[str] = frozenset()
    failures: int = 0
    retry_at: float = 0.0


#: seconds before a batch whose dead letters could not be sent is tried again, at most
RETRY_MAX = 60.0


class FileDeadLetters:
    """Sends the dead letters of the file reads of the queries one runtime runs."""

    def __init__(self, catalog: Catalog, spark: SparkSession, counts: BadCounts):
        self.catalog, self.spark, self.counts = catalog, spark, counts
        self._followed: dict[str, _Followed] = {}
        self._lock = threading.Lock()

    def follow(
        self,
        query: QueryInfo,
        plan: StreamingPlan,
        sources: dict[str, SourceInfo],
        guard: RecordGuard,
        committed: int,
        replays: int,
    ) -> None:
        """The query is about to start on its checkpoint, whose last committed batch is
        ``committed`` and last planned ``replays``: follow its batches if it sends dead letters
        and streams checked files only (:func:`.companion.companion_reads`). A version that
        no longer does still has the batches of the one before sent, up to ``committed``.

        A checkpoint that never recorded a sent batch (a new query, a policy that became
        LOG_AND_CONTINUE) starts from ``committed``, or from the last batch whose files a
        companion query it had read already."""
        files = [sources[n] for n in checked_streams(query, plan, sources)]
        with self._lock:
            before = self._followed.get(query.id)
        if not guard.sends_dead_letters or not files or has_companion(files):
            if before is not None and before.final is None:
                before.final = committed
            elif before is None:
                record_dead_letters_sent(query.checkpoint, None)  # a later LOG_AND_CONTINUE starts afresh
            return
        self.forget(query.id)  # counts of an earlier run may be of another checkpoint's batches
        already: frozenset[str] = frozenset()
        recorded: int | None = None
        try:
            sent = recorded = dead_letters_sent(query.checkpoint)
        except ValueError as e:  # damaged: every batch still in the offset log is read again
            sent = min(committed, first_planned_batch(query.checkpoint) - 1)
            log.warning("%s: %s; the dead letters of batches %d on are sent again", query.id, e, sent + 1)
        if sent is None:
            sent, already = companion_read_upto(query.checkpoint, committed)
        sent = min(sent, committed)  # a RESTORE rewound the checkpoint
        if sent != recorded:  # a RESUME of a query with nothing unsent writes nothing
            record_dead_letters_sent(query.checkpoint, sent)
        writer = DeadLetterWriter(self.catalog, query, sources)
        self.counts.follow(query.id)
        with self._lock:
            self._followed[query.id] = _Followed(query, files, writer, sent, committed, replays, already=already)

    def due(self, running: Callable[[str], bool]) -> list[str]:
        """The followed queries with batches to look at: a batch reported (or committed before
        the start) after the last sent, or a query no longer ``running``; not one waiting to
        try a batch again. An idle query's pass costs nothing here."""
        now = time.monotonic()
        with self._lock:
            followed = list(self._followed.values())
        return [
            f.query.id
            for f in followed
            if f.retry_at <= now
            and (
                f.final is not None
                or not running(f.query.id)
                or max(self.counts.newest(f.query.id), f.before_start) > f.sent
            )
        ]

    def forget(self, query_id: str) -> None:
        """The query will not run here again as it was: its counts are let go."""
        with self._lock:
            self._followed.pop(query_id, None)
        self.counts.drop(query_id)

    def stopped(self, query_id: str, stream: StreamingQuery) -> None:
        """The query's Spark query stopped: its last batch's count is taken from it (its
        progress event may not have come yet; two calls into the JVM)."""
        if query_id not in self._followed:
            return
        try:
            last = stream._jsq.lastProgress()
            if last is not None:
                progress = json.loads(last.json())
                self.counts.report(
                    query_id, progress["batchId"], progress.get("observedMetrics"), progress.get("numInputRows")
                )
        except Exception as e:  # not known, so that batch is read again
            log.warning("%s: the last progress of its stopped query: %s", query_id, e)

    def send(self, query_id: str, *, running: bool) -> None:
        """Send the dead letters of the query's batches committed since the last sent: read
        again those whose count was not zero, or never came, or that ran again at the start.
        While it runs, up to the last batch whose progress came; once it stopped (or its new
        version sends none), up to its last committed batch, and it is no longer followed. A
        batch that fails is tried again later (up to :data:`RETRY_MAX` s apart)."""
        with self._lock:
            followed = self._followed.get(query_id)
        if followed is None:
            return
        checkpoint = followed.query.checkpoint
        counts = self.counts.of(query_id)
        committed = last_committed_batch(checkpoint)
        if followed.final is not None:
            upto, running = min(followed.final, committed), False
        elif running:
            upto = min(max(max(counts, default=-1), followed.before_start), committed)
        else:
            upto = committed
        for batch in range(followed.sent + 1, upto + 1):
            count = None if batch <= followed.replayed else counts.get(batch)
            if count == 0:
                continue
            try:
                self._send_batch(followed, batch, count)
            except Exception as e:
                followed.failures += 1
                followed.retry_at = time.monotonic() + min(RETRY_MAX, 2.0 ** min(followed.failures, 6))
                log.warning(
                    "%s: the dead letters of batch %d could not be sent (tried again later): %s", query_id, batch, e
                )
                return
            followed.failures = 0
            self._sent(followed, batch)  # a later failure does not read it again
        self._sent(followed, upto)
        if not running:
            self.forget(query_id)
            if followed.final is not None:
                record_dead_letters_sent(checkpoint, None)

    def _sent(self, followed: _Followed, batch: int) -> None:
        if batch > followed.sent:
            record_dead_letters_sent(followed.query.checkpoint, batch)
            followed.sent = batch
            self.counts.drop(followed.query.id, batch)

    def _send_batch(self, followed: _Followed, batch: int, counted: int | None) -> None:
        """Read the files of ``batch`` again and send their bad records (``counted``: how many
        the batch left out, None: not known)."""
        query = followed.query
        checkpoint = query.checkpoint
        if not has_offsets(checkpoint, batch) or (batch > 0 and not has_offsets(checkpoint, batch - 1)):
            log.warning(
                "%s: batch %d is no longer in its checkpoint's offset log: its dead letters cannot be found again",
                query.id,
                batch,
            )
            return
        files = batch_files(checkpoint, batch) - followed.already
        since = Starting.of(query.settings).timestamp_ms
        if since is not None:  # as the query reads them: files committed at or after the time
            files = {f for f in files if os.path.exists(f) and os.stat(f).st_mtime_ns // 1_000_000 >= since}
        records = []
        for src in followed.files:
            folder = os.path.realpath(src.path) + os.sep  # once per source, not per file
            mine = {f for f in files if f.startswith(folder)}
            records += scan_files(
                self.spark, src, mine, query_id=query.id, batch_id=batch, status=BadRecordStatus.LOGGED
            )
        if counted is not None and len(records) < counted:  # its files changed or went since
            log.warning(
                "%s: batch %d left out %d bad record(s); %d found in its files now",
                query.id,
                batch,
                counted,
                len(records),
            )
        if records:
            digest = hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:12]
            followed.writer.log(self.spark, records, batch, f"read-b{batch:012d}-{digest}")
            log.info(
                "%s: batch %d left out %d bad record(s); sent to its dead-letter stream", query.id, batch, len(records)
            )


def companion_read_upto(checkpoint: str, committed: int) -> tuple[int, frozenset[str]]:
    """Where a query that had a dead-letter companion query goes on (none: ``committed``): the
    last batch all of whose files the companion had read (it reads in the same order), and the
    files of the batches after it that it had read too (their dead letters are sent)."""
    companion = dead_letter_checkpoint(checkpoint)
    if committed < 0 or not os.path.isdir(companion):
        return committed, frozenset()
    read = processed_files(companion)
    batch = committed
    while batch >= 0 and has_offsets(checkpoint, batch):
        files = batch_files(checkpoint, batch)
        if files and files <= read:  # a batch of no file (the watermark moved on) says nothing
            break
        batch -= 1
    later = set().union(*(batch_files(checkpoint, b) for b in range(batch + 1, committed + 1)))
    return batch, frozenset(later & read)
