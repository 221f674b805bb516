"""The dead letters of a query's file reads under LOG_AND_CONTINUE, found after their batch.

The query leaves its bad records out and counts those of each file source as it reads them
(an observed metric, :data:`.badrecords.BAD_COUNT`); the count reaches the runtime with the
batch's progress (:class:`BadCounts`). A batch that left records out has its input files read
again once it committed (the checkpoint lists them, :func:`.badrecords.scan_files`), and its bad
records go to the query's dead-letter stream and the catalog. A batch that left none out costs
nothing more, so a query reading files runs one Spark query and reads its input once (a
companion query, reading everything again, sends the dead letters of Kafka topics only).

At least once: the checkpoint records the last batch whose dead letters were sent
(:func:`~..storage.checkpoints.dead_letters_sent`). A batch committed after it whose count the
runtime never saw (it stopped first, or Spark's listener bus dropped the event) is read again.
Sending a batch's twice changes nothing: its dead-letter file is named after the batch and
written once, and the catalog keeps one row per record and batch.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..catalog import BadRecordStatus, Catalog, QueryInfo, SourceInfo
from ..language.streaming import StreamingPlan
from ..storage.checkpoints import batch_files, dead_letters_sent, last_committed_batch, record_dead_letters_sent
from .badrecords import BAD_COUNT, DeadLetterWriter, RecordGuard, scan_files
from .companion import checked_streams

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
        self._counts: dict[str, dict[int, int]] = {}

    def report(self, query_id: str, batch_id: int, metrics: object) -> None:
        """A batch's progress (its observed ``metrics``); one without a count is left out."""
        count = bad_count(metrics)
        if count is not None:
            with self._lock:
                self._counts.setdefault(query_id, {})[batch_id] = count

    def newest(self, query_id: str) -> int:
        """The newest batch of the query with a count (-1: none)."""
        with self._lock:
            return max(self._counts.get(query_id, {}), default=-1)

    def of(self, query_id: str) -> dict[int, int]:
        with self._lock:
            return dict(self._counts.get(query_id, {}))

    def drop(self, query_id: str, upto: int | None = None) -> None:
        """Let go of the counts of a query's batches up to ``upto`` (None: all)."""
        with self._lock:
            counts = self._counts.get(query_id, {})
            for batch in [b for b in counts if upto is None or b <= upto]:
                del counts[batch]


@dataclass
class _Followed:
    """A query whose file reads' dead letters are sent after their batch."""

    query: QueryInfo
    files: list[SourceInfo]  # the checked file sources it streams
    writer: DeadLetterWriter
    sent: int  # the last batch whose dead letters were sent
    before_start: int  # the last batch committed before this start: their counts were never seen here


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
    ) -> None:
        """The query started, its checkpoint's last committed batch ``committed`` before (read
        before the start: its first batch may commit at once): follow its batches if it sends
        dead letters and streams checked files. A checkpoint that never recorded a sent batch
        (a new query, a policy that became LOG_AND_CONTINUE) starts from ``committed``: the
        batches before it were read under another policy, or had a companion query."""
        files = [sources[n] for n in checked_streams(query, plan, sources) if not sources[n].kafka_topic]
        self.forget(query.id)  # counts of an earlier run may be of another checkpoint's batches
        if not guard.sends_dead_letters or not files:
            return
        sent = dead_letters_sent(query.checkpoint)
        if sent is None or sent > committed:  # none recorded, or a RESTORE rewound the checkpoint
            sent = committed
            record_dead_letters_sent(query.checkpoint, sent)
        with self._lock:
            self._followed[query.id] = _Followed(
                query, files, DeadLetterWriter(self.catalog, query, sources), sent, committed
            )

    def due(self, running: Callable[[str], bool]) -> list[str]:
        """The followed queries with batches to look at: a batch reported (or committed before
        the start) after the last sent, or a query no longer ``running``. An idle query's
        pass costs nothing here."""
        with self._lock:
            followed = list(self._followed.values())
        return [
            f.query.id
            for f in followed
            if not running(f.query.id) or max(self.counts.newest(f.query.id), f.before_start) > f.sent
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
                self.counts.report(query_id, progress["batchId"], progress.get("observedMetrics"))
        except Exception as e:  # not known, so that batch is read again
            log.warning("%s: the last progress of its stopped query: %s", query_id, e)

    def send(self, query_id: str, *, running: bool) -> None:
        """Send the dead letters of the query's batches committed since the last sent: read
        again those whose count was not zero, or never came. While it runs, up to the last
        batch whose progress came; once it stopped, up to its last committed batch, and it is
        no longer followed."""
        with self._lock:
            followed = self._followed.get(query_id)
        if followed is None:
            return
        checkpoint = followed.query.checkpoint
        counts = self.counts.of(query_id)
        committed = last_committed_batch(checkpoint)
        upto = min(max(max(counts, default=-1), followed.before_start), committed) if running else committed
        for batch in range(followed.sent + 1, upto + 1):
            if counts.get(batch) != 0:  # records left out, or a count never seen
                self._send_batch(followed, batch, counts.get(batch))
        if upto > followed.sent:
            record_dead_letters_sent(checkpoint, upto)
            followed.sent = upto
            self.counts.drop(query_id, upto)
        if not running:
            self.forget(query_id)

    def _send_batch(self, followed: _Followed, batch: int, counted: int | None) -> None:
        """Read the files of ``batch`` again and send their bad records (``counted``: how many
        the batch left out, None: not known)."""
        query = followed.query
        files = batch_files(query.checkpoint, batch)
        records = []
        for src in followed.files:
            mine = {f for f in files if f.startswith(os.path.realpath(src.path) + os.sep)}
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
            followed.writer.log(self.spark, records, batch, f"read-b{batch:012d}")
            log.info(
                "%s: batch %d left out %d bad record(s); sent to its dead-letter stream", query.id, batch, len(records)
            )
