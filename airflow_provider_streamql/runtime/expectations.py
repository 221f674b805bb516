"""A query's expectation checked on each micro-batch of its output, inside the batch writer
(:mod:`.batch_writer`), before anything of the batch is written:

- every row whose condition is FALSE violates it (NULL passes); how many are counted per
  batch (:class:`Violations`, read by the progress listener into the catalog);
- ``LOG`` writes them with the rest; ``DROP`` leaves them out and sends them to the query's
  dead-letter stream (the one ``on_error='LOG_AND_CONTINUE'`` uses), the expectation named;
- ``FAIL`` and ``PAUSE`` fail the batch (nothing of it commits) with an error naming the
  expectation and a violating row, and keep the violating rows for the runtime to record
  (:meth:`Violations.take_found`): FAIL lets the failure take its course, PAUSE holds the
  query as a bad record does, and ``RESUME ... SKIP BAD RECORDS`` leaves those rows out of
  the batch when it runs again (known by :data:`record id <_record_id>`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..catalog import BadRecord, BadRecordStatus
from ..language.expectations import OnViolation, Recorded

#: the head of the error a FAIL or PAUSE expectation fails a batch with
MARKER = "STREAMQL_EXPECTATION"
_VIOLATES, _RAW, _ID = "__streamql_violates", "__streamql_raw", "__streamql_record_id"
#: characters of a violating row kept in the catalog and the dead-letter stream
RAW_LIMIT = 2000


class ExpectationFailed(Exception):
    """A FAIL or PAUSE expectation found violating rows in a batch (its output not written)."""


class Violations:
    """What the expectation checks of one runtime found: per query, the violating rows of its
    last checked batch (read by the progress listener when that batch's progress comes) and
    the rows a FAIL or PAUSE expectation failed a batch on (read by the runtime's holds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, int]] = {}
        self._found: dict[str, list[BadRecord]] = {}

    def counted(self, query_id: str, batch_id: int, count: int) -> None:
        with self._lock:
            self._counts[query_id] = (batch_id, count)

    def take_count(self, query_id: str, batch_id: int) -> int:
        """The violating rows of batch ``batch_id`` of the query (0: none, or not checked)."""
        with self._lock:
            batch, count = self._counts.pop(query_id, (batch_id, 0))
        return count if batch == batch_id else 0

    def failed_on(self, query_id: str, records: list[BadRecord]) -> None:
        with self._lock:
            self._found[query_id] = records

    def take_found(self, query_id: str) -> list[BadRecord]:
        with self._lock:
            return self._found.pop(query_id, [])


class ExpectationCheck:
    """Applies ``expectation`` of query ``query_id`` (writing ``output``) to a batch's rows;
    ``skipped``: the ids of violating rows ``RESUME ... SKIP BAD RECORDS`` skipped;
    ``dead_letters``: sends DROP's violating rows to the dead-letter stream."""

    def __init__(
        self,
        query_id: str,
        output: str,
        expectation: Recorded,
        violations: Violations,
        dead_letters: Callable[[DataFrame, list[BadRecord], int], None],
        skipped: frozenset[str] = frozenset(),
    ):
        self.query_id, self.output, self.expectation = query_id, output, expectation
        self.violations, self.dead_letters, self.skipped = violations, dead_letters, skipped
        self._held: DataFrame | None = None

    def __call__(self, rows: DataFrame, batch_id: int) -> DataFrame:
        """The rows to write of ``rows`` (one batch's output); raises :class:`ExpectationFailed`.
        The batch is read twice (checked, then written): it is kept until :meth:`release`."""
        self.release()
        rows = self._held = rows.persist()
        columns = [F.col(f"`{name}`") for name in rows.columns]
        raw = F.to_json(F.struct(*columns))
        flagged = rows.withColumn(_VIOLATES, ~F.coalesce(F.expr(self.expectation.sql), F.lit(True))).withColumn(
            _ID, F.sha2(raw, 256)
        )
        found = flagged.where(F.col(_VIOLATES)).select(raw.alias(_RAW), F.col(_ID)).collect()
        self.violations.counted(self.query_id, batch_id, len(found))
        mode = self.expectation.on_violation
        if mode is OnViolation.LOG or not found:
            return rows
        passing = flagged.where(~F.col(_VIOLATES)).drop(_VIOLATES, _ID)
        if mode is OnViolation.DROP:
            self.dead_letters(rows, self._records(found, batch_id, BadRecordStatus.LOGGED), batch_id)
            return passing
        left = [r for r in found if r[_ID] not in self.skipped]
        if not left:  # every violating row was skipped: RESUME ... SKIP BAD RECORDS sent them on
            return passing
        status = BadRecordStatus.PENDING if mode is OnViolation.PAUSE else BadRecordStatus.FAILED
        self.violations.failed_on(self.query_id, self._records(left, batch_id, status))
        raise ExpectationFailed(
            f"{MARKER} {self.query_id} expectation {self.expectation.text} is violated by {len(left)} row(s) of "
            f"batch {batch_id} (on_violation {mode}), first: {left[0][_RAW][:300]}"
        )

    def release(self) -> None:
        """Let go of the last batch checked (once it is written, or failed)."""
        if self._held is not None:
            self._held.unpersist()
            self._held = None

    def _records(self, found: list, batch_id: int, status: BadRecordStatus) -> list[BadRecord]:
        now = time.time()
        return [
            BadRecord(
                query_id=self.query_id,
                record_id=row[_ID],
                batch_id=batch_id,
                source=self.output,
                file=f"expectation:{self.output}",
                line=None,
                raw=row[_RAW][:RAW_LIMIT],
                error=f"violates expectation {self.expectation.text}",
                status=status,
                recorded_at=now,
            )
            for row in found
        ]
