"""What the catalog holds, as plain objects (no SQLAlchemy outside :mod:`.store`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..language.compiler import SinkSchema, SourceSchema
from ..language.parser import parse_one
from ..language.query_shape import QueryShape
from ..language.statements import Column, Statement
from ..language.streaming import StreamingPlan
from .states import (
    BadRecordStatus,
    DesiredState,
    OnError,
    QueryState,
)

DESIRED_STATES = tuple(DesiredState)
OBSERVED_STATES = tuple(QueryState)
ERROR_POLICIES = tuple(OnError)
#: Internal property the planner sets on a CREATE STREAM ... AS SELECT file output created
#: since several writers became possible (never accepted in a WITH clause): every writer
#: commits each batch as one whole renamed file, so readers see every writer's files. An
#: output without it keeps Spark's file sink and its ``_spark_metadata`` log (one writer).
BATCH_FILES = "batch_files"
#: Internal property migration 11 sets on an output whose files hold its columns under two
#: spellings (two writers of an earlier release spelled them differently): pull queries read
#: its JSON keys case-insensitively. Never accepted in a WITH clause.
MIXED_SPELLINGS = "mixed_spellings"
#: the properties the planner keeps on an output, never restated by a statement
INTERNAL_PROPERTIES = (BATCH_FILES, MIXED_SPELLINGS)


@dataclass
class SourceInfo:
    """A stream or table: declared with columns, or written by a query."""

    name: str
    kind: str
    columns: list[Column]
    properties: dict[str, Any]
    format: str
    path: str
    writer_query: str | None = None

    @property
    def timestamp_column(self) -> str | None:
        """The event-time column (``WITH (timestamp=...)``), if declared."""
        return self.properties.get("timestamp")

    @property
    def kafka_topic(self) -> str | None:
        """The Kafka topic it lives on (``WITH (kafka_topic=...)``); None for file topics."""
        return self.properties.get("kafka_topic")

    @property
    def batch_files(self) -> bool:
        """Written as whole renamed files, one per batch and writer (see :data:`BATCH_FILES`)."""
        return self.properties.get(BATCH_FILES) is True

    @property
    def mixed_spellings(self) -> bool:
        """Its files hold its columns under two spellings (see :data:`MIXED_SPELLINGS`)."""
        return self.properties.get(MIXED_SPELLINGS) is True

    @property
    def key_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.key]

    @property
    def schema(self) -> SourceSchema:
        """What the compile step knows of it: typed values, not this row."""
        return SourceSchema(
            self.name, self.kind, tuple(self.columns), self.timestamp_column, bool(self.kafka_topic), self.text_time
        )

    @property
    def text_time(self) -> str | None:
        """The ``timestamp_format`` of an event-time column declared as text (ksqlDB's VARCHAR
        timestamp); None when the event-time column is a TIMESTAMP (the format is then the
        reader's, for its TIMESTAMP columns) or there is none."""
        ts = next((c for c in self.columns if c.name == self.timestamp_column), None)
        return self.properties.get("timestamp_format") if ts is not None and ts.type.is_text else None

    @property
    def as_sink(self) -> SinkSchema:
        """Where a query writing it writes."""
        return SinkSchema(self.path, self.format, bool(self.kafka_topic), self.batch_files)

    def column_json(self) -> str:
        return json.dumps([c.to_json() for c in self.columns])

    @classmethod
    def from_row(cls, row: Any) -> SourceInfo:
        return cls(
            row.name,
            row.kind,
            [Column.from_json(c) for c in json.loads(row.columns)],
            json.loads(row.properties),
            row.format,
            row.path,
            row.writer_query,
        )


@dataclass
class QueryInfo:
    """A persistent query and its desired and observed state."""

    id: str
    seq: int
    pipeline: str
    kind: str
    sink: str
    sources: list[str]
    sql: str
    select_sql: str
    #: what the user set for it: session settings (``auto.offset.reset``) and ``on_error``;
    #: a shadow's also what it shadows (``shadow_of``, ``shadow_version``, ``shadow_from_batch``,
    #: ``promote_sql``)
    settings: dict[str, Any]
    #: how a runtime builds it on Spark (derived from the SELECT and its sources)
    plan: StreamingPlan
    #: what CREATE OR REPLACE compares (compiled with the plan)
    shape: QueryShape
    version: int
    checkpoint: str
    desired_state: DesiredState
    observed_state: QueryState
    error: str | None = None
    running_version: int | None = None
    run_id: str | None = None
    #: failures in a row of a query that fails and is retried (None: it is not failing)
    failures: int | None = None
    #: when its runtime starts it again (epoch seconds): None once started again
    retry_at: float | None = None
    #: RETRYING: the batch it runs again first (it is RUNNING once that batch commits)
    retry_batch: int | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    def definition(self) -> dict[str, Any]:
        """The columns that make a version (what a new version changes), as stored."""
        return {
            "sql": self.sql,
            "select_sql": self.select_sql,
            "sources": json.dumps(self.sources),
            "settings": json.dumps(self.settings),
            "plan": json.dumps(self.plan.to_dict()),
            "shape": json.dumps(self.shape.to_json()),
        }

    def statement(self) -> Statement:
        """The statement this version was created by, read again through the grammar (what
        is recorded of a query's definition is its statement as written and its compiled
        form; a new version over changed sources is compiled from the statement).
        ParseError when this release no longer reads it."""
        return parse_one(self.sql)

    @classmethod
    def from_row(cls, row: Any) -> QueryInfo:
        data = dict(row._mapping)
        for name in ("sources", "settings"):
            data[name] = json.loads(data[name])
        data["plan"] = StreamingPlan.from_dict(json.loads(data["plan"]))
        data["shape"] = QueryShape.from_json(json.loads(data["shape"]))
        data["desired_state"] = DesiredState(data["desired_state"])
        data["observed_state"] = QueryState(data["observed_state"])
        return cls(**data)


@dataclass
class Progress:
    """The last micro-batch a query committed, as its runtime's listener reported it."""

    query_id: str
    batch_id: int
    input_rows: int
    total_input_rows: int
    rows_per_second: float
    source_offsets: Any
    last_batch_at: float
    late_rows: int = 0  # records dropped as later than the watermark, all batches
    state_rows: int = 0  # rows in the query's state stores now
    state_bytes: int = 0  # memory the state stores use now
    state_operators: list[dict[str, Any]] = field(default_factory=list)
    violations: int = 0  # rows violating the query's expectation in this batch
    violations_total: int = 0  # the same, all batches


#: how the command log names the runtime when it pauses a query at a bad record (policy PAUSE)
HOLD_ISSUER = "runtime:{runtime_id} (BAD_RECORD)"


@dataclass
class BadRecord:
    """A record a query could not read with its source's declared schema."""

    query_id: str
    record_id: str
    batch_id: int
    source: str
    file: str
    line: int | None
    raw: str
    error: str
    status: BadRecordStatus = BadRecordStatus.PENDING
    recorded_at: float = 0.0
    handled_by: str | None = None
    handled_at: float | None = None

    @property
    def position(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file


#: why a checkpoint snapshot was taken
SNAPSHOT_KINDS = {
    "UPGRADE": "by the runtime before an in-place upgrade (a rollback restores it)",
    "MANUAL": "by a SNAPSHOT statement (or SnapshotQueryOperator, e.g. on a schedule)",
    "RESTORE": "by RESTORE, of the checkpoint it replaced (so a restore can be undone)",
    "DEPLOY": "by the apply of a deploy file, before it upgrades the query (a rollback of the deploy restores it)",
}


@dataclass
class CheckpointSnapshot:
    """A copy of a query's checkpoint as of one committed batch (``number`` counts per query)."""

    query_id: str
    number: int
    kind: str
    version: int
    batch_id: int
    position: dict[str, Any]
    folder: str
    taken_at: float
    taken_by: str | None = None
    #: a RESTORE snapshot: the sink files of batches after this one, kept with the copy
    output_after: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> CheckpointSnapshot:
        data = dict(row._mapping)
        data["position"] = json.loads(data["position"])
        return cls(**data)


@dataclass
class Snapshot:
    """The catalog as statements see it; validation applies statements to a copy of it."""

    sources: dict[str, SourceInfo] = field(default_factory=dict)
    queries: dict[str, QueryInfo] = field(default_factory=dict)
    next_seq: int = 1
