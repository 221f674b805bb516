"""Bad-record holds: a query's error policy as the runtime applies it around its runs.

:mod:`.badrecords` says, inside Spark, which records are bad; this module is what the
runtime does about them:

- before a start, the query's :class:`~.badrecords.RecordGuard`: its policy (its own
  ``on_error``, else the pipeline's) and the records ``RESUME ... SKIP BAD RECORDS`` left
  out of the batches not committed yet; under LOG_AND_CONTINUE, for a query reading a Kafka
  topic, the companion query that sends bad records to the dead-letter stream (a query
  reading files has them found after each batch, :mod:`.file_dead_letters`); skipped
  records bound for a dead-letter topic on Kafka are sent to it;
- when a batch fails on the guard's error, every bad record of that batch is found and
  recorded; under PAUSE the query is *held*: paused, with a reason saying how to go on;
- once a batch retried by RESUME commits, its bad records are resolved.

It is apart from the driver because none of it is about leases or the loop: it acts through
the catalog and Spark, and says what it found (:class:`BadBatch`); the reconciler decides
what follows (a hold, or the failure taking its course).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..catalog import BadRecord, Catalog, QueryInfo, SourceInfo
from ..catalog.connections import write_connection
from ..catalog.states import BadRecordStatus, DesiredState, OnError, QueryState
from ..language.expectations import OnViolation, Recorded
from ..language.streaming import StreamingPlan
from ..storage.checkpoints import batch_files, last_committed_batch, last_planned_batch
from ..storage.deadletter import dead_letter_name
from .badrecords import MARKER, DeadLetterWriter, RecordGuard, parse_failed, records_in_error, scan_files
from .companion import start_dead_letter_query
from .connectors import Frames
from .expectations import MARKER as EXPECTATION_MARKER
from .expectations import ExpectationCheck, Violations
from .kafka_dead_letters import send_skipped

#: how Spark heads the error of ``raise_error``, the guard's
RAISED = "[USER_RAISED_EXCEPTION]"

log = logging.getLogger("streamql.runtime")


@dataclass(frozen=True)
class BadBatch:
    """The bad records a failed batch holds, found again after the failure."""

    batch: int
    records: tuple[BadRecord, ...]
    #: the error to report: the guard's, or for Spark's parse failure one naming the record
    error: str
    #: the query's error policy: PAUSE holds it, any other lets the failure take its course
    policy: str

    @property
    def where(self) -> str:
        first = self.records[0] if self.records else None
        return f"first at {first.position}: {first.error}" if first else self.error[:300]


class Holds:
    """Applies the error policy of the queries one runtime serves.

    :param on_error: the pipeline's policy (FAIL, LOG_AND_CONTINUE or PAUSE) for queries
        whose statement sets none.
    """

    def __init__(
        self,
        catalog: Catalog,
        spark: SparkSession,
        runtime_id: str,
        on_error: str,
        violations: Violations | None = None,
    ):
        self.catalog, self.spark, self.runtime_id, self.on_error = catalog, spark, runtime_id, on_error
        #: query id -> last batch whose bad records a RESUME retries
        self.retried: dict[str, int] = {}
        #: query id -> the skipped records its last start left out
        self.left_out: dict[str, frozenset[str]] = {}
        #: what the queries' expectations found (counts for the listener, rows for a hold)
        self.violations = violations or Violations()

    def guard(self, query: QueryInfo) -> RecordGuard:
        """The query's error policy, and the skipped records its next batches must leave out
        (those of batches not committed yet), which are sent to its dead-letter topic first
        if it has one on Kafka (:meth:`send_skipped`)."""
        records = self.catalog.bad_records.of(query.id)
        skipped = self._skipped(query, records)
        left_out = [r for r in records if r.record_id in skipped]
        if left_out:
            self.send_skipped(query, left_out)
        retried = [r.batch_id for r in records if r.status == "RETRIED"]
        if retried:
            self.retried[query.id] = max(retried)
        self.left_out[query.id] = skipped
        return RecordGuard(query.id, self.policy(query), skipped)

    def skipped_since_start(self, query: QueryInfo) -> bool:
        """Records were skipped since the query last started (``RESUME ... SKIP BAD RECORDS``
        of a query failing on them under FAIL): its next start need not wait out its back-off."""
        skipped = self._skipped(query, self.catalog.bad_records.of(query.id, BadRecordStatus.SKIPPED))
        return not skipped <= self.left_out.get(query.id, frozenset())

    @staticmethod
    def _skipped(query: QueryInfo, records: list[BadRecord]) -> frozenset[str]:
        """The skipped records of batches the query has not committed yet: its next batches
        leave them out."""
        committed = last_committed_batch(query.checkpoint)
        return frozenset(r.record_id for r in records if r.status == "SKIPPED" and r.batch_id > committed)

    def policy(self, query: QueryInfo) -> str:
        """The query's own on_error, else the pipeline's default (this runtime's)."""
        return query.settings.get("on_error") or self.on_error

    def dead_letter_query(
        self,
        query: QueryInfo,
        plan: StreamingPlan,
        sources: dict[str, SourceInfo],
        guard: RecordGuard,
        frames: Frames,
        going_on: dict[str, dict[str, int]],
    ) -> StreamingQuery | None:
        """Under LOG_AND_CONTINUE, for a query reading a Kafka topic: start the companion query
        sending the query's bad records to its dead-letter stream, its frame built by
        ``frames`` or taken from them, a new one starting Kafka topics at ``going_on`` (None
        otherwise: another policy, files only, or no source checked)."""
        if not guard.sends_dead_letters:
            return None
        writer = DeadLetterWriter(self.catalog, query, sources)
        return start_dead_letter_query(self.spark, query, plan, sources, writer, frames, going_on)

    def expectation_check(self, query: QueryInfo, sources: dict[str, SourceInfo]) -> ExpectationCheck | None:
        """The query's expectation as its batch writer applies it (None: it has none), leaving
        out the violating rows ``RESUME ... SKIP BAD RECORDS`` skipped (call after :meth:`guard`)."""
        expectation = Recorded.of(query.settings)
        if expectation is None:
            return None
        letters = DeadLetterWriter(self.catalog, query, sources)

        def dead_letters(df, records: list[BadRecord], batch_id: int) -> None:
            letters.send(df.sparkSession, records, batch_id, f"expect-v{query.version:04d}-b{batch_id:012d}")

        return ExpectationCheck(
            query.id, query.sink, expectation, self.violations, dead_letters, self.left_out.get(query.id, frozenset())
        )

    def send_skipped(self, query: QueryInfo, records: list[BadRecord]) -> None:
        """Send the records RESUME ... SKIP BAD RECORDS skipped to the query's dead-letter
        topic, when RESUME made its dead-letter stream on Kafka (a file one has them already:
        the statement wrote them); once, however often the query starts before they are past."""
        target = self.catalog.source(dead_letter_name(query.id))
        if target is not None and target.kafka_topic:
            if send_skipped(self.spark, query, target.kafka_topic, records):
                log.info("%s: %d skipped record(s) sent to %s", query.id, len(records), target.kafka_topic)

    def retried_committed(self, query: QueryInfo) -> bool:
        """The batch a RESUME retried has committed: the fix worked (a read, no write)."""
        batch = self.retried.get(query.id)
        return batch is not None and last_committed_batch(query.checkpoint) >= batch

    def resolve_retried(self, query: QueryInfo) -> None:
        """The retried batch committed: its bad records are resolved."""
        batch = self.retried.pop(query.id, None)
        if batch is None:
            return
        with write_connection(self.catalog.engine) as conn:
            self.catalog.bad_records.mark(conn, query.id, "RETRIED", "RESOLVED", upto_batch=batch)
        log.info("%s: the batch that held it committed; its bad records are resolved", query.id)

    @staticmethod
    def guard_report(query: QueryInfo, error: object) -> str | None:
        """The line of the query's own guard failing a batch, when ``error`` wraps it deeper
        than its first line: a foreachBatch writer (an exactly-once Kafka sink, a table's
        writer) fails with Py4J's heading, the guard's error among its causes. Only the error
        Spark raised counts (``[USER_RAISED_EXCEPTION]``), never a plan quoting the guard."""
        text = str(getattr(error, "desc", None) or error)
        at = text.find(f"{RAISED} {MARKER} {query.id} ")
        if at < 0:  # an expectation's, raised in the batch writer (Python's traceback around it)
            at = text.find(f"{EXPECTATION_MARKER} {query.id} ")
        return text[at:].splitlines()[0] if at >= 0 else None

    @staticmethod
    def is_guard_error(query: QueryInfo, error: str) -> bool:
        """Whether ``error`` (its first line) is the query's own guard failing a batch (a plan
        dump in another error may quote the guard's expression, never on its first line); an
        expectation failing a batch counts as one."""
        return f"{MARKER} {query.id} " in error or error.startswith(f"{EXPECTATION_MARKER} {query.id} ")

    def is_bad_record_failure(self, query: QueryInfo, message: str, error: object) -> bool:
        """Whether the query failed on a bad record: its guard's error (``message``, the
        first line) or Spark's parse failure of a fail-fast read (among ``error``'s causes)."""
        return self.is_guard_error(query, message) or parse_failed(error)

    def find(self, query: QueryInfo, error: str) -> BadBatch | None:
        """A batch failed on bad records (``error``, its first line): find them all, with the
        error to report (the guard's, or for Spark's parse failure one naming the first
        record). None when a parse failure's record is not found again (its file gone): an
        ordinary failure."""
        if error.startswith(f"{EXPECTATION_MARKER} {query.id} "):
            return self._violated(query, error)
        policy = self.policy(query)
        status = BadRecordStatus.PENDING if policy == OnError.PAUSE else BadRecordStatus.FAILED
        batch = last_planned_batch(query.checkpoint)
        files = batch_files(query.checkpoint, batch)
        records = []
        for name in query.sources:
            src = self.catalog.source(name)
            if src is not None:
                mine = {f for f in files if f.startswith(os.path.realpath(src.path) + os.sep)}
                records += scan_files(self.spark, src, mine, query_id=query.id, batch_id=batch, status=status)
        if not records:  # a Kafka record (or a file gone since): what the error says of it
            records = records_in_error(error, query.id, batch, status)
        first = records[0] if records else None
        if not self.is_guard_error(query, error):  # Spark's parse failure names no record
            if first is None:
                return None
            log.info("%s: Spark's parse failure: %s", query.id, error)
            error = f"{MARKER} {query.id} cannot read a record of {first.source} in {first.position}: {first.raw[:300]}"
        found = BadBatch(batch, tuple(records), error, policy)
        log.error(
            "%s: batch %d holds %d bad record(s); %s (policy %s)", query.id, batch, len(records), found.where, policy
        )
        return found

    def _violated(self, query: QueryInfo, error: str) -> BadBatch:
        """A batch failed on its expectation (FAIL or PAUSE): the rows it found, held or
        failed on as bad records are."""
        records = self.violations.take_found(query.id)
        expectation = Recorded.of(query.settings)
        pause = expectation is not None and expectation.on_violation is OnViolation.PAUSE
        batch = records[0].batch_id if records else last_planned_batch(query.checkpoint)
        log.error("%s: batch %d violates its expectation: %s", query.id, batch, error)
        return BadBatch(batch, tuple(records), error, OnError.PAUSE if pause else OnError.FAIL)

    def record(self, bad: BadBatch) -> None:
        """Under FAIL: record the bad records; the query fails on them."""
        self.catalog.bad_records.record(list(bad.records))

    def hold(self, query: QueryInfo, epoch: int, bad: BadBatch) -> None:
        """Under PAUSE: record the bad records and pause the query, with a reason saying how
        to go on."""
        reason = (
            f"BAD_RECORD: {len(bad.records)} bad record(s) in batch {bad.batch}, {bad.where}; fix the "
            f"definition and RESUME, or RESUME {query.id} SKIP BAD RECORDS"
        )
        if self.catalog.bad_records.hold(query.id, list(bad.records), reason, runtime_id=self.runtime_id, epoch=epoch):
            query.desired_state, query.observed_state, query.error = DesiredState.PAUSED, QueryState.PAUSED, reason
