"""The states a query can be in, as closed sets: what a statement asks for (desired), what a
runtime reports (observed), what became of a bad record, and what a query does with one.
Each member is its own text (the catalog stores it, the UI and XCom show it)."""

from __future__ import annotations

import enum


class DesiredState(enum.StrEnum):
    """What statements ask a query to be."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"


class QueryState(enum.StrEnum):
    """What a runtime reports a query is (observed state)."""

    PENDING = "PENDING"  # no runtime has it yet
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    PAUSING = "PAUSING"  # stopping after its in-flight batch
    PAUSED = "PAUSED"
    UPGRADING = "UPGRADING"
    ROLLING_BACK = "ROLLING_BACK"
    ERROR = "ERROR"
    #: started again after it failed: its last error and failures are kept until the batch
    #: that failed commits (or, when none was left to run, until its next look)
    RETRYING = "RETRYING"
    TERMINATED = "TERMINATED"
    UNASSIGNED = "UNASSIGNED"  # its runtime stopped heartbeating


#: observed states that mean "a runtime is (or should be) running it now"
ACTIVE_STATES = (
    QueryState.STARTING,
    QueryState.RUNNING,
    QueryState.PAUSING,
    QueryState.UPGRADING,
    QueryState.ROLLING_BACK,
    QueryState.RETRYING,
)


class OnError(enum.StrEnum):
    """``WITH (on_error=...)`` of a persistent query: what a record it cannot read does."""

    FAIL = "FAIL"
    LOG_AND_CONTINUE = "LOG_AND_CONTINUE"
    PAUSE = "PAUSE"


#: the policy of a query that sets no ``on_error``, when its runtime is given none
#: (``streamql runtime --on-error``): as in ksqlDB, whose ``ksql.fail.on.deserialization.error``
#: is false, a bad record goes to the processing log (here the query's dead-letter stream) and
#: the query goes on; FAIL would stop every query reading the topic at it
DEFAULT_ON_ERROR = OnError.LOG_AND_CONTINUE


class ProcessingGuarantee(enum.StrEnum):
    """``SET 'processing.guarantee'`` as a query records it: how its Kafka output is written.
    (File outputs are exactly once per batch either way.)"""

    AT_LEAST_ONCE = "at_least_once"  # Spark's Kafka sink: a batch re-run after a crash is produced again
    EXACTLY_ONCE_V2 = "exactly_once_v2"  # one Kafka transaction per batch, fenced by batch id

    @classmethod
    def of(cls, settings: dict[str, str]) -> ProcessingGuarantee:
        """The guarantee a query's recorded ``settings`` ask for (ksqlDB's default: at least once)."""
        return cls(settings.get("processing.guarantee", cls.AT_LEAST_ONCE))


class BadRecordStatus(enum.StrEnum):
    """What became of a bad record (:data:`BAD_RECORD_STATUSES` says it in words)."""

    PENDING = "PENDING"
    RETRIED = "RETRIED"
    RESOLVED = "RESOLVED"
    SKIPPED = "SKIPPED"
    LOGGED = "LOGGED"
    FAILED = "FAILED"


BAD_RECORD_STATUSES = {
    BadRecordStatus.PENDING: "the query is paused on it (policy PAUSE)",
    BadRecordStatus.RETRIED: "the query was resumed without skipping it: its batch is retried",
    BadRecordStatus.RESOLVED: "its batch committed after a retry (the definition was fixed)",
    BadRecordStatus.SKIPPED: "skipped by RESUME ... SKIP BAD RECORDS and sent to the dead-letter stream",
    BadRecordStatus.LOGGED: "sent to the dead-letter stream by policy LOG_AND_CONTINUE",
    BadRecordStatus.FAILED: "the query failed on it (policy FAIL)",
}
