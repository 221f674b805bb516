"""Operators for checkpoint snapshots: take one (on a schedule, or before a risky change)
and rewind a paused query to one, or to a time. Both build their statement from checked parts."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..language.statements import RestoreQuery, RestoreToTime, TakeSnapshot
from .base import StreamQLOperator, engine_errors, push


class SnapshotQueryOperator(StreamQLOperator):
    """``SNAPSHOT <query_id> [WITH (keep, max_age_hours)]``: copy the query's checkpoint as
    of its last committed batch (the query keeps running), then drop snapshots beyond the
    retention policy. Scheduled, it keeps a rolling history to RESTORE to.

    XCom: ``query_id``, ``snapshot`` (the new number) and ``snapshot_info`` (its number,
    kind, version, batch, input position, time). Returns the snapshot number.

    :param query_id: the query. (templated)
    :param keep: how many snapshots to keep (default 10).
    :param max_age_hours: drop snapshots older than this (default 168, a week).
    """

    template_fields = ("query_id", "pipeline")

    def __init__(
        self, *, query_id: str, keep: int | None = None, max_age_hours: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.query_id, self.keep, self.max_age_hours = query_id, keep, max_age_hours

    def apply(self, context: Context) -> Any:
        engine = self.engine(context)
        try:
            with engine_errors():
                statement = TakeSnapshot.of(self.query_id, keep=self.keep, max_age_hours=self.max_age_hours)
                result = engine.run([statement])[0]
        finally:
            engine.close()
        self.log.info("%s", result.message)
        info = dict(zip(result.columns, result.rows[0], strict=True))
        push(context, query_id=result.query_id, snapshot=info["snapshot"], snapshot_info=info)
        return info["snapshot"]


class RestoreQueryOperator(StreamQLOperator):
    """``RESTORE <query_id> TO SNAPSHOT <n>`` or ``RESTORE <query_id> TO TIMESTAMP '<time>'``:
    rewind a PAUSED query to snapshot ``n``, or to its first input at or after a time.
    Batches after that point run again when it resumes; what they wrote to a file sink is
    taken out first (and kept with the snapshot the restore takes of what it replaced), so
    each input record is in the output once; a Kafka sink gets them again.

    XCom: ``query_id`` and ``message``.

    :param query_id: the query (paused). (templated)
    :param snapshot: the snapshot number, as ``SHOW SNAPSHOTS`` lists it. (templated)
    :param timestamp: instead of ``snapshot``: a time, ISO-8601 with its zone or epoch
        milliseconds (``{{ data_interval_start }}`` renders one). (templated)
    """

    template_fields = ("query_id", "snapshot", "timestamp", "pipeline")

    def __init__(
        self, *, query_id: str, snapshot: int | str | None = None, timestamp: str | int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.query_id, self.snapshot, self.timestamp = query_id, snapshot, timestamp

    def apply(self, context: Context) -> Any:
        # a form leaves the one not given empty
        number = None if self.snapshot in (None, "") else self.snapshot
        timestamp = None if self.timestamp in (None, "") else self.timestamp
        if (number is None) == (timestamp is None):
            raise AirflowFailException(
                f"give one of snapshot and timestamp, not {'neither' if number is None else 'both'} "
                f"(snapshot={self.snapshot!r}, timestamp={self.timestamp!r})"
            )
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number.strip())  # rendered from a template or a param
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            raise AirflowFailException(f"snapshot must be a snapshot number, not {self.snapshot!r}")
        engine = self.engine(context)
        try:
            with engine_errors():
                statement = (
                    RestoreQuery.of(self.query_id, number)
                    if isinstance(number, int)
                    else RestoreToTime.of(self.query_id, str(timestamp))
                )
                result = engine.run([statement])[0]
        finally:
            engine.close()
        self.log.info("%s", result.message)
        push(context, query_id=result.query_id, message=result.message)
        return result.query_id


__all__ = ["SnapshotQueryOperator", "RestoreQueryOperator"]
