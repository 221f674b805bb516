"""Typed StreamQL statements: what the parser produces and the engine applies."""

# long module: one small class per statement of the grammar, the language's typed face; split
# by family they would import each other's bases and be read side by side anyway

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from sqlglot import exp

from ..errors import ParseError
from .names import check_object_name
from .rates import RateLimit, rate_problem
from .starting import timestamp_millis, timestamp_text
from .types import SqlType, TypeProblem, parse_type

#: control statements and the desired state each asks for
CONTROL_ACTIONS = ("PAUSE", "RESUME", "TERMINATE")


@dataclass(frozen=True)
class Column:
    """A declared or derived column: its one canonical ``name`` (the spelling every reader
    and writer uses), its typed ``type``; ``key`` marks ksqlDB's KEY / PRIMARY KEY."""

    name: str
    type: SqlType
    key: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.type, SqlType):
            raise TypeError(f"column {self.name!r}: type must be a SqlType, not {self.type!r} (see Column.of)")

    @classmethod
    def of(cls, name: str, type_text: str, key: bool = False) -> Column:
        """A column whose type is given as text (a declaration, a catalog record): read once
        through the type grammar; :class:`ParseError` naming the column when it is no type."""
        try:
            return cls(name, parse_type(type_text), key)
        except TypeProblem as e:
            raise ParseError(f"column {name!r} of type {type_text!r}: {e}") from None

    def to_json(self) -> dict[str, Any]:
        """How the catalog records it: the type in Spark SQL's spelling."""
        return {"name": self.name, "type": self.type.spark(), "key": self.key}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Column:
        return cls.of(data["name"], data["type"], bool(data.get("key", False)))


@dataclass(frozen=True)
class WindowSpec:
    """``WINDOW TUMBLING|HOPPING|SESSION (...)``; durations in seconds.

    ``size`` is the session gap for SESSION windows; ``grace`` is None when not given.
    """

    kind: str
    size: float
    advance: float | None = None
    grace: float | None = None


@dataclass(frozen=True)
class Within:
    """``JOIN ... WITHIN before[, after] [GRACE PERIOD g]``: the join's time bound, seconds."""

    before: float
    after: float
    grace: float | None = None


@dataclass
class Statement:
    """Base of every statement: the exact text and where it starts in its script."""

    text: str = field(default="", kw_only=True)
    line: int = field(default=1, kw_only=True)
    col: int = field(default=1, kw_only=True)
    #: (line, column) where an embedded SELECT starts, to place errors inside it.
    select_at: tuple[int, int] = field(default=(1, 1), kw_only=True)
    #: ksqlDB's WINDOW clause of an embedded SELECT, read by the statement grammar (the SELECT
    #: itself is Spark SQL's tree, without it)
    window: WindowSpec | None = field(default=None, kw_only=True)
    #: (line, column) of the WINDOW clause, to place errors at it
    window_at: tuple[int, int] | None = field(default=None, kw_only=True, compare=False)
    #: (line, column) of each WITH property's name, to place errors at it
    property_at: dict[str, tuple[int, int]] = field(default_factory=dict, kw_only=True, compare=False)
    #: one entry per JOIN of the SELECT (outside subqueries), in order: its WITHIN or None
    withins: tuple[Within | None, ...] = field(default=(), kw_only=True)
    #: ``PARTITION BY col, ...`` of a CREATE STREAM ... AS SELECT: the output columns that
    #: become its KEY (ksqlDB's re-keying)
    partition_by: tuple[str, ...] = field(default=(), kw_only=True)

    #: True for statements that change the catalog (as opposed to SHOW, DESCRIBE, ...).
    writes = True
    #: the fields naming the stream, table or query the statement changes
    changed_fields: ClassVar[tuple[str, ...]] = ()

    @property
    def changes(self) -> frozenset[str]:
        """The streams, tables and queries the statement changes, by name (a read of one of
        them in the same script must come after it)."""
        return frozenset(name for f in self.changed_fields if (name := getattr(self, f)))

    @property
    def within(self) -> Within | None:
        """The first WITHIN of the SELECT (the only one of a query with one join), or None."""
        return next((w for w in self.withins if w is not None), None)


@dataclass
class CreateSource(Statement):
    """``CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] name (cols) WITH (...)``"""

    changed_fields = ("name",)

    kind: str
    name: str
    columns: list[Column]
    properties: dict[str, Any]
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass
class CreateAsSelect(Statement):
    """``CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] name [WITH (...)] AS SELECT ... [EMIT ...]``"""

    changed_fields = ("name",)

    kind: str
    name: str
    properties: dict[str, Any]
    select: exp.Select
    emit: str | None = None
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass
class AlterSource(Statement):
    """``ALTER STREAM|TABLE name ADD COLUMN c T [, ADD COLUMN ...]``"""

    changed_fields = ("name",)

    kind: str
    name: str
    add_columns: list[Column]


@dataclass
class InsertSelect(Statement):
    """``INSERT INTO target SELECT ...``: a second persistent writer."""

    changed_fields = ("target",)

    target: str
    select: exp.Select
    emit: str | None = None


@dataclass
class InsertValues(Statement):
    """``INSERT INTO target [(cols)] VALUES (...)[, (...) ...]``: append one record per row,
    all or none. Each value is a checked expression over literals (:mod:`.values`), evaluated
    by the planner."""

    changed_fields = ("target",)

    target: str
    columns: list[str] | None
    rows: list[list[exp.Expr]]

    @property
    def value_sql(self) -> list[str]:
        """The first row's values as Spark SQL text (for messages and tests)."""
        from .dialect import DIALECT

        return [v.sql(dialect=DIALECT) for v in self.rows[0]]


@dataclass
class PullQuery(Statement):
    """``SELECT ... FROM x``: read what x holds now."""

    select: exp.Select
    writes = False


@dataclass
class PushQuery(Statement):
    """``SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]``: the rows ``s`` gets from now
    on (or from its first: ``auto.offset.reset`` earliest) until ``limit`` (LIMIT n)."""

    select: exp.Select
    limit: int | None = None
    writes = False


@dataclass
class QueryControl(Statement):
    """``PAUSE|RESUME|TERMINATE <query_id>|ALL``, ``RESUME <query_id>|ALL SKIP BAD RECORDS``"""

    changed_fields = ("query_id",)

    action: str
    query_id: str | None  # None means ALL
    skip_bad_records: bool = False

    @classmethod
    def of(cls, action: str, query_id: str | None, *, skip_bad_records: bool = False) -> QueryControl:
        """The statement for ``action`` on ``query_id`` (None or ``'ALL'``: every query of the
        pipeline), built from checked parts: a query ID that is not a plain name is a
        :class:`ParseError`, never text to parse."""
        verb = str(action).upper()
        if verb not in CONTROL_ACTIONS:
            raise ParseError(f"action {action!r} is not one of {', '.join(CONTROL_ACTIONS)}")
        target = None if query_id is None or str(query_id).upper() == "ALL" else check_object_name(query_id, "query ID")
        if skip_bad_records and verb != "RESUME":
            raise ParseError(f"SKIP BAD RECORDS goes with RESUME, not {verb}")
        text = f"{verb} {target or 'ALL'}" + (" SKIP BAD RECORDS" if skip_bad_records else "")
        return cls(action=verb, query_id=target, skip_bad_records=skip_bad_records, text=text)


@dataclass
class DropSource(Statement):
    """``DROP STREAM|TABLE [IF EXISTS] name [DELETE TOPIC]``"""

    changed_fields = ("name",)

    kind: str
    name: str
    if_exists: bool = False
    delete_topic: bool = False

    @classmethod
    def of(cls, kind: str, name: str, *, if_exists: bool = False, delete_topic: bool = False) -> DropSource:
        """``DROP`` of a stream or table, built from checked parts."""
        kind = kind.upper()
        if kind not in ("STREAM", "TABLE"):
            raise ParseError(f"kind {kind!r} is not STREAM or TABLE")
        name = check_object_name(name, f"{kind.lower()} name")
        text = f"DROP {kind} {'IF EXISTS ' if if_exists else ''}{name}" + (" DELETE TOPIC" if delete_topic else "")
        return cls(kind=kind, name=name, if_exists=if_exists, delete_topic=delete_topic, text=text)


@dataclass
class Show(Statement):
    """``SHOW|LIST STREAMS|TABLES|QUERIES [EXTENDED]``"""

    what: str
    extended: bool = False
    writes = False


@dataclass
class Describe(Statement):
    """``DESCRIBE name [EXTENDED]``; ``DESCRIBE <query_id> STATE [LIMIT n]``"""

    name: str
    extended: bool = False
    #: DESCRIBE <query_id> STATE: the query's state, at most ``state_limit`` rows per operator
    state: bool = False
    state_limit: int = 20
    writes = False


#: the largest snapshot number or keep count a statement takes (a catalog INTEGER)
MAX_COUNT = 2**31 - 1
#: rows per operator DESCRIBE ... STATE collects into the driver at most
MAX_STATE_ROWS = 1000


def retention_problem(keep: object, max_age_hours: object) -> str | None:
    """What is wrong with a SNAPSHOT's retention policy, or None."""
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= MAX_COUNT):
        return f"keep must be a whole number of snapshots from 1 to {MAX_COUNT}, not {keep!r}"
    if max_age_hours is not None and (
        isinstance(max_age_hours, bool)
        or not isinstance(max_age_hours, (int, float))
        or not 0 < max_age_hours < float("inf")
    ):
        return f"max_age_hours must be a positive number of hours, not {max_age_hours!r}"
    return None


@dataclass
class TakeSnapshot(Statement):
    """``SNAPSHOT <query_id> [WITH (keep = n, max_age_hours = h)]``: copy the query's
    checkpoint as of its last committed batch; then keep the newest ``keep`` snapshots
    younger than ``max_age_hours`` (None: the defaults)."""

    changed_fields = ("query_id",)

    query_id: str
    keep: int | None = None
    max_age_hours: float | None = None

    @classmethod
    def of(cls, query_id: str, *, keep: int | None = None, max_age_hours: float | None = None) -> TakeSnapshot:
        """The statement for ``query_id`` built from checked parts (never text to parse)."""
        problem = retention_problem(keep, max_age_hours)
        if problem:
            raise ParseError(problem)
        name = check_object_name(query_id, "query ID")
        given = [f"{k} = {v!r}" for k, v in (("keep", keep), ("max_age_hours", max_age_hours)) if v is not None]
        text = f"SNAPSHOT {name}" + (f" WITH ({', '.join(given)})" if given else "")
        return cls(text=text, query_id=name, keep=keep, max_age_hours=max_age_hours)


@dataclass
class RestoreQuery(Statement):
    """``RESTORE <query_id> TO SNAPSHOT <n>``: rewind a paused query to snapshot ``n``."""

    changed_fields = ("query_id",)

    query_id: str
    number: int

    @classmethod
    def of(cls, query_id: str, number: int) -> RestoreQuery:
        """The statement for ``query_id`` and snapshot ``number`` from checked parts."""
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_COUNT:
            raise ParseError(f"a snapshot number is a whole number from 1 to {MAX_COUNT}, not {number!r}")
        name = check_object_name(query_id, "query ID")
        return cls(text=f"RESTORE {name} TO SNAPSHOT {number}", query_id=name, number=number)


@dataclass
class RestoreToTime(Statement):
    """``RESTORE <query_id> TO TIMESTAMP '<time>'``: rewind a paused query to its first input
    at or after ``timestamp_ms`` (epoch milliseconds), taking out what it wrote since."""

    changed_fields = ("query_id",)

    query_id: str
    timestamp_ms: int

    @classmethod
    def of(cls, query_id: str, timestamp: str | int) -> RestoreToTime:
        """The statement for ``query_id`` and a time (ISO-8601 with its zone, or epoch
        milliseconds) from checked parts."""
        name = check_object_name(query_id, "query ID")
        try:
            if isinstance(timestamp, bool):
                raise ValueError("not a time")
            millis = timestamp_millis(str(timestamp))
        except ValueError as e:
            raise ParseError(f"RESTORE {name} TO TIMESTAMP {timestamp!r}: {e}") from None
        return cls(text=f"RESTORE {name} TO TIMESTAMP '{timestamp_text(millis)}'", query_id=name, timestamp_ms=millis)


@dataclass
class AlterQuery(Statement):
    """``ALTER QUERY <query_id> SET <limit> = n``: the query reads at most ``n`` records (Kafka)
    or files (file topics) per micro-batch from now on; ``ALTER QUERY <query_id> UNSET
    <limit>`` (``value`` None) lifts it. Applied in place: the query restarts from its
    checkpoint with its state and offsets."""

    changed_fields = ("query_id",)

    query_id: str
    limit: RateLimit
    value: int | None

    @classmethod
    def of(cls, query_id: str, limit: str, value: int | None) -> AlterQuery:
        """The statement from checked parts (never text to parse): ``value`` None unsets it."""
        name = check_object_name(query_id, "query ID")
        known = next((r for r in RateLimit if r.value == str(limit).lower()), None)
        if known is None:
            raise ParseError(f"no setting {limit!r} of a query (settings: {', '.join(RateLimit)})")
        if value is not None and (problem := rate_problem(known, value)):
            raise ParseError(problem)
        change = f"UNSET {known}" if value is None else f"SET {known} = {value}"
        return cls(text=f"ALTER QUERY {name} {change}", query_id=name, limit=known, value=value)


#: what can be done with a query's shadow version (``CREATE OR REPLACE ... WITH (shadow=true)``)
SHADOW_ACTIONS = ("PROMOTE", "DISCARD")


#: how long ``PROMOTE ... WHEN READY`` waits without ``WITHIN``, and at most, seconds
READY_WITHIN, MAX_READY_WITHIN = 300.0, 86400.0
#: how long a shadow must stay ready (caught up, lag at most the threshold) to be promoted
READY_WINDOW = 3.0


@dataclass(frozen=True)
class ReadyGate:
    """``WHEN READY [WITHIN <duration>] [LAG <= n]``: promote only once the shadow has read
    every input file the live version has read and its lag (input files it has not read)
    has stayed at most ``max_lag`` for ``window`` seconds; wait at most ``within`` seconds."""

    within: float = READY_WITHIN
    max_lag: int = 0
    window: float = READY_WINDOW

    def __post_init__(self) -> None:
        if problem := ready_gate_problem(self.within, self.max_lag, self.window):
            raise ParseError(problem)

    @property
    def text(self) -> str:
        """As written in a statement."""
        return f"WHEN READY WITHIN {self.within:g} SECONDS LAG <= {self.max_lag}"


def ready_gate_problem(within: Any, max_lag: Any, window: Any) -> str | None:
    """What is wrong with a readiness gate's figures, or None."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    if not number(within) or not 0 < within <= MAX_READY_WITHIN:
        return f"WITHIN must be a duration above 0 and at most {MAX_READY_WITHIN:g} seconds, not {within!r}"
    if isinstance(max_lag, bool) or not isinstance(max_lag, int) or not 0 <= max_lag <= MAX_COUNT:
        return f"LAG <= n takes a whole number of input files from 0 to {MAX_COUNT}, not {max_lag!r}"
    if not number(window) or not 0 <= window <= MAX_READY_WITHIN:
        return f"the readiness window must be zero or more seconds, not {window!r}"
    if window >= within:
        return f"WITHIN {within:g} seconds leaves no time: a shadow must stay ready for {window:g} seconds"
    return None


@dataclass
class ShadowAction(Statement):
    """``PROMOTE <query_id>``: the shadow's version replaces the query's in place, and the
    shadow stops; ``DISCARD <query_id>``: the shadow stops. ``query_id`` names the query or
    its shadow. ``ready`` (``PROMOTE ... WHEN READY``): the engine first waits until the
    shadow is ready (:class:`ReadyGate`), or fails with the figures, promoting nothing."""

    changed_fields = ("query_id",)

    action: str
    query_id: str
    ready: ReadyGate | None = None

    @classmethod
    def of(cls, action: str, query_id: str, ready: ReadyGate | None = None) -> ShadowAction:
        """The statement from checked parts (never text to parse)."""
        verb = str(action).upper()
        if verb not in SHADOW_ACTIONS:
            raise ParseError(f"action {action!r} is not one of {', '.join(SHADOW_ACTIONS)}")
        if ready is not None and verb != "PROMOTE":
            raise ParseError(f"WHEN READY goes with PROMOTE, not {verb}")
        name = check_object_name(query_id, "query ID")
        text = f"{verb} {name}" + (f" {ready.text}" if ready is not None else "")
        return cls(text=text, action=verb, query_id=name, ready=ready)


@dataclass
class DiffShadow(Statement):
    """``DIFF <query_id>``: the outputs of a query and its shadow over the input both read."""

    query_id: str
    writes = False

    @classmethod
    def of(cls, query_id: str) -> DiffShadow:
        """The statement from a checked query ID (never text to parse)."""
        name = check_object_name(query_id, "query ID")
        return cls(text=f"DIFF {name}", query_id=name)


@dataclass
class PrintTopic(Statement):
    """``PRINT name [FROM BEGINNING] [INTERVAL n] [LIMIT n]``: the records of a stream's or
    table's topic as they are stored, every ``interval``-th, at most ``limit``; from its
    first record with ``from_beginning``, else from those written after the statement."""

    name: str
    from_beginning: bool = False
    interval: int = 1
    limit: int | None = None
    writes = False


@dataclass
class Explain(Statement):
    """``EXPLAIN <query_id>``"""

    query_id: str
    writes = False


@dataclass
class SetProperty(Statement):
    """``SET 'key' = 'value'``: applies to the following statements of the same request;
    ``UNSET 'key'`` (``value`` None) goes back to the default."""

    key: str
    value: str | None

    @classmethod
    def of(cls, key: str, value: str) -> SetProperty:
        """``SET 'key' = 'value'``; the planner checks key and value against its table."""
        quote = lambda v: "'" + str(v).replace("'", "''") + "'"
        return cls(key=str(key).lower(), value=str(value), text=f"SET {quote(key)} = {quote(value)}")
