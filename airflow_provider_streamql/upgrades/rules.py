"""One rule per row of :data:`RULES`: its code, the clause it concerns, the upgrade kind it
is, the verdict it forces and its check.

A check compares the two versions (:class:`Versions`: two typed shapes and the state the old
version's checkpoint records) and yields one plain sentence per problem.
Grounded in Spark's "Recovery semantics after changes in a streaming query": filters and
projections may change on a checkpoint, and so may a Kafka sink's topic; streams may be
added or dropped where Spark's source evolution allows it (named sources); a file
sink's location, grouping keys,
aggregates, windows, join types and output modes may not. Spark checks state schemas by
type only, so a GROUP BY moved to another column of the same type passes Spark and
silently reuses the old state: it is caught here. Where the old version's checkpoint records
its aggregation state's key schema (:attr:`Versions.state_key`), that is checked too: the
state on disk, not only the statement text, must fit the new version.
"""

# long module: one table of upgrade rules, each check beside its row's kin (as feasibility.py)

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..language.expectations import Recorded
from ..language.query_shape import QueryShape, Writer
from ..language.rates import NO_LIMITS, RateLimit, RateLimits
from ..language.statements import WindowSpec, Within
from ..language.streaming import duration_sql
from .findings import Code, Rule, UpgradeKind, Verdict


@dataclass(frozen=True)
class Versions:
    """What a rule compares: the recorded shape of the running version, the new one's, and
    the key schema of the aggregation state the old version's checkpoint holds ([(field,
    type)] as Spark wrote it; None when there is none or it was not read)."""

    old: QueryShape
    new: QueryShape
    state_key: list[tuple[str, str]] | None = None
    #: each version's ``WITH (on_error=...)`` (an ``OnError`` of the catalog; None: the
    #: pipeline's default): the query's, not its shape's, so given beside the shapes
    old_policy: str | None = None
    new_policy: str | None = None
    #: each version's rate limits (``max_records_per_batch``, ``max_files_per_batch``), the
    #: query's too, not its shape's
    old_rates: RateLimits = NO_LIMITS
    new_rates: RateLimits = NO_LIMITS
    #: each version's expectation (``WITH (expect=..., on_violation=...)``; None: none)
    old_expectation: Recorded | None = None
    new_expectation: Recorded | None = None


def _names(shape: QueryShape) -> list[str]:
    return [c.name.lower() for c in shape.columns]


def _columns(shape: QueryShape) -> dict[str, tuple[str, bool]]:
    return {c.name.lower(): (c.type, c.key) for c in shape.columns}


def _show(values: Any) -> str:
    if isinstance(values, (list, tuple)):
        return ", ".join(map(str, values)) or "(none)"
    return str(values)


def _kafka_sinks(v: Versions) -> bool:
    return v.old.sink.writer == v.new.sink.writer == Writer.KAFKA_SINK


def sink_changed(v: Versions) -> Iterator[str]:
    for key in ("path", "format", "writer"):
        if key == "path" and _kafka_sinks(v):
            continue  # a Kafka sink may change its topic (kafka_topic_changed)
        before, after = getattr(v.old.sink, key), getattr(v.new.sink, key)
        if before != after:
            before, after = (x.value if isinstance(x, Writer) else x for x in (before, after))
            yield (
                f"the sink's {key} changed from {before!r} to {after!r}: "
                f"a file sink's location and format cannot change under a checkpoint; "
                f"create a new stream instead"
            )


def kafka_topic_changed(v: Versions) -> Iterator[str]:
    if _kafka_sinks(v) and v.old.sink.path != v.new.sink.path:
        yield (
            f"the Kafka sink's topic changed from {v.old.sink.path[6:]!r} to "
            f"{v.new.sink.path[6:]!r}: Spark allows it; records from the swap on go to the new topic"
        )


#: what a record a version cannot read does, under each error policy
POLICY_EFFECTS = {
    "FAIL": "fails its batch and puts the query in ERROR until it is skipped (RESUME ... SKIP BAD RECORDS)",
    "LOG_AND_CONTINUE": "goes to the query's dead-letter stream and the query goes on",
    "PAUSE": "pauses the query at it until RESUME (or RESUME ... SKIP BAD RECORDS)",
}


def error_policy_changed(v: Versions) -> Iterator[str]:
    if v.old_policy != v.new_policy:
        old, new = (p or "(the pipeline's default)" for p in (v.old_policy, v.new_policy))
        effect = POLICY_EFFECTS.get(v.new_policy or "", "follows the policy its runtime was started with")
        yield (
            f"error policy {old} -> {new}: from the swap on, a record the query cannot read {effect}; "
            f"its offsets and state are kept"
        )


def rate_limit_changed(v: Versions) -> Iterator[str]:
    for limit in RateLimit:
        old, new = v.old_rates.get(limit), v.new_rates.get(limit)
        if old != new:
            said = " -> ".join("no limit" if n is None else str(n) for n in (old, new))
            unit = "records" if limit.kafka else "files"
            batch = "all new input" if new is None else f"at most {new} {unit}"
            yield (
                f"{limit} {said}: the query restarts from its checkpoint and each batch reads {batch} of its "
                f"{limit.sources}; its offsets and state are kept"
            )


def expectation_changed(v: Versions) -> Iterator[str]:
    if v.old_expectation != v.new_expectation:
        old, new = (e.describe() if e else "none" for e in (v.old_expectation, v.new_expectation))
        yield (
            f"expectation {old} -> {new}: from the swap on, each batch's output rows are checked against it; "
            f"its offsets and state are kept"
        )


def kind_changed(v: Versions) -> Iterator[str]:
    if v.old.kind != v.new.kind:
        yield f"the query changed from {v.old.kind} to {v.new.kind}"


def _evolving(v: Versions) -> bool:
    """Streams may be added or dropped in place: both versions name their streams (the old
    version's checkpoint keys them by name) and read streams without joining them."""
    return v.old.named and v.new.named and v.old.branches is not None and v.new.branches is not None


def sources_changed(v: Versions) -> Iterator[str]:
    if sorted(v.old.streams) == sorted(v.new.streams) or _evolving(v):
        return
    if v.old.named and not v.new.named:
        why = "the new version reads tables' changelogs, whose positions are not named: it needs a new checkpoint"
    elif not v.old.named:
        why = (
            "this query's streams were not named from its first run (it was created before "
            "streamql named them for Spark's source evolution), and Spark refuses another set "
            "of unnamed sources on its checkpoint"
        )
    else:
        why = (
            "a stream can be added or dropped in place only by a query that reads each stream "
            "whole or in one UNION ALL branch of its FROM, with no JOIN or WINDOW"
        )
    yield f"the streams read changed from {_show(v.old.streams)} to {_show(v.new.streams)}: {why}"


def source_added(v: Versions) -> Iterator[str]:
    if _evolving(v):
        assert v.old.branches is not None and v.new.branches is not None
        for name in [n for n in v.new.branches if n not in v.old.branches]:
            start = v.new.starts.get(name, "its first record")
            yield (
                f"stream {name} is added: Spark reads it from {start}; the other streams go on "
                f"from their positions in the checkpoint and the state is kept"
            )


def source_removed(v: Versions) -> Iterator[str]:
    if _evolving(v):
        assert v.old.branches is not None and v.new.branches is not None
        for name in [n for n in v.old.branches if n not in v.new.branches]:
            yield (
                f"stream {name} is no longer read: its position leaves the checkpoint (records "
                f"written to it from now on are not read); the state built from it is kept"
            )


def branch_changed(v: Versions) -> Iterator[str]:
    before, after = v.old.branches, v.new.branches
    if before is None or after is None:
        return
    for name in [n for n in after if n in before and after[n] != before[n]]:
        yield (
            f"what is read of {name} changed from {before[name] or 'the whole stream'} to "
            f"{after[name] or 'the whole stream'} (row by row: no state)"
        )


def column_removed(v: Versions) -> Iterator[str]:
    for name in _names(v.old):
        if name not in _columns(v.new):
            yield f"output column {name!r} was removed; columns may only be appended"


def column_type_changed(v: Versions) -> Iterator[str]:
    new_columns = _columns(v.new)
    for name, (old_type, _) in _columns(v.old).items():
        if name in new_columns and new_columns[name][0] != old_type:
            yield f"output column {name!r} changed type from {old_type} to {new_columns[name][0]}"


def columns_reordered(v: Versions) -> Iterator[str]:
    old, new = v.old, v.new
    kept = [n for n in _names(new) if n in _columns(old)]
    if kept != [n for n in _names(old) if n in _columns(new)]:
        yield f"output columns were reordered ({_show(_names(old))} -> {_show(_names(new))})"
    elif _names(new)[: len(kept)] != kept:
        yield "new output columns were inserted before existing ones; append them at the end"


def column_appended(v: Versions) -> Iterator[str]:
    added = [n for n in _names(v.new) if n not in _columns(v.old)]
    if added and not v.new.stateful:
        yield f"output column(s) {_show(added)} appended; downstream readers see them as new columns"


def key_changed(v: Versions) -> Iterator[str]:
    old_keys = [n for n, (_, key) in _columns(v.old).items() if key]
    new_keys = [n for n, (_, key) in _columns(v.new).items() if key]
    if old_keys != new_keys:
        yield f"key columns changed from {_show(old_keys)} to {_show(new_keys)}; keys must stay identical"


def group_by_changed(v: Versions) -> Iterator[str]:
    old, new = v.old.group_by, v.new.group_by
    if old != new and old and new:
        yield (
            f"GROUP BY changed from {_show(old)} to {_show(new)}: the "
            f"aggregation state is keyed by the old values and would be reused for the new "
            f"ones (Spark compares key types only and would accept it)"
        )
    elif bool(old) != bool(new):
        yield "the query gained or lost its GROUP BY"


def aggregates_changed(v: Versions) -> Iterator[str]:
    old, new = v.old.aggregates, v.new.aggregates
    if old != new and (old or new):
        yield (
            f"aggregations changed from {_show(old)} to {_show(new)}: "
            f"the state holds the old aggregation buffers (Spark: "
            f"STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE)"
        )
        return
    # the same aggregate over an input of another type (a UNION ALL branch that widens it)
    for text, was in v.old.aggregate_types.items():
        now = v.new.aggregate_types.get(text)
        if was and now and was != now:
            yield (
                f"{text} now aggregates {now} (was {was}): the state holds buffers of the old type "
                f"(Spark: STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE)"
            )


def _without_grace(spec: WindowSpec | Within | None) -> tuple | None:
    """A WINDOW's or WITHIN's extent without its grace period, which decides which records
    are late, not what state holds (see :func:`grace_changed`)."""
    if spec is None:
        return None
    if isinstance(spec, WindowSpec):
        return (spec.kind, spec.size, spec.advance)
    return (spec.before, spec.after)


def _window(spec: WindowSpec | None) -> str:
    if spec is None:
        return "none"
    parts = [f"SIZE {duration_sql(spec.size)}"] + ([f"ADVANCE BY {duration_sql(spec.advance)}"] if spec.advance else [])
    return f"{spec.kind} ({', '.join(parts)})"


def window_changed(v: Versions) -> Iterator[str]:
    if _without_grace(v.old.window) != _without_grace(v.new.window):
        yield (
            f"the window changed from {_window(v.old.window)} to {_window(v.new.window)}: windowed state is "
            f"keyed by window"
        )


def grace_changed(v: Versions) -> Iterator[str]:
    """The grace period each stream's watermark runs with (the effective one: a version
    without GRACE PERIOD runs with the default of when it was planned)."""
    before, after = v.old.grace, v.new.grace
    for source in sorted(before.keys() & after.keys()):
        if before[source] != after[source]:
            yield (
                f"the grace period of {source} changes from {duration_sql(before[source])} to "
                f"{duration_sql(after[source])}: a watermark never moves back, so a longer one holds windows "
                f"(and EMIT FINAL output) until event time passes the old watermark by it; a shorter one "
                f"makes records late sooner"
            )


def emit_changed(v: Versions) -> Iterator[str]:
    old, new = v.old.emit or "CHANGES", v.new.emit or "CHANGES"
    if old != new and (v.old.window or v.new.window):
        yield f"EMIT {old} changed to EMIT {new}: the output mode of a stateful query cannot change"


def _joined(shape: QueryShape) -> tuple:
    return (shape.joins, shape.join_on, tuple(_without_grace(w) for w in shape.withins))


def stream_join_changed(v: Versions) -> Iterator[str]:
    stateful_join = v.old.within is not None or v.new.within is not None
    if stateful_join and _joined(v.old) != _joined(v.new):
        yield "a stream-stream join changed (type, condition or WITHIN): its buffered state no longer matches"


def table_join_changed(v: Versions) -> Iterator[str]:
    stateless = v.old.within is None and v.new.within is None
    if stateless and (v.old.joins, v.old.join_on) != (v.new.joins, v.new.join_on):
        yield "the stream-table join changed; the table is re-read at each batch, so no state is involved"


def filter_changed(v: Versions) -> Iterator[str]:
    if v.old.where != v.new.where:
        yield f"WHERE changed from {v.old.where or '(none)'} to {v.new.where or '(none)'}"


def having_changed(v: Versions) -> Iterator[str]:
    if v.old.having != v.new.having:
        yield f"HAVING changed from {v.old.having or '(none)'} to {v.new.having or '(none)'}"


def projection_changed(v: Versions) -> Iterator[str]:
    new_projections = {n.lower(): p for n, p in v.new.projections.items()}
    for name, expression in v.old.projections.items():
        new_expression = new_projections.get(name.lower())
        if new_expression is not None and new_expression != expression and expression not in v.old.group_by:
            yield f"column {name!r} is now computed as {new_expression} (was {expression})"


#: key fields of windowed aggregation state that hold the window, not a GROUP BY value
STATE_WINDOW_FIELDS = ("window", "session_window")


def _type(text: str) -> str:
    return text.replace(" ", "").upper()


def state_key_mismatch(v: Versions) -> Iterator[str]:
    """The aggregation state the old version's checkpoint records must be keyed by the types
    the new version groups by: Spark would refuse the checkpoint at start
    (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE), after the swap."""
    recorded = v.state_key
    if not recorded or not v.new.group_by:
        return
    held = sorted(_type(t) for name, t in recorded if name not in STATE_WINDOW_FIELDS)
    bounds = {"windowstart", "windowend"}
    wanted = sorted(_type(t) for name, (t, key) in _columns(v.new).items() if key and name not in bounds)
    if held != wanted:
        shown = ", ".join(f"{n} {t}" for n, t in recorded)
        yield (
            f"the checkpoint's aggregation state is keyed by ({shown}) and the new version groups by "
            f"({', '.join(wanted)}): Spark cannot read that state (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE)"
        )


def subqueries(v: Versions) -> Iterator[str]:
    if v.old.subqueries or v.new.subqueries:
        yield "no upgrade rule covers queries with subqueries or CTEs"


def unexplained(v: Versions) -> Iterator[str]:
    if v.old.rest != v.new.rest:
        yield f"a part of the query no rule covers changed ({v.old.rest} -> {v.new.rest})"


RULES: tuple[Rule[Versions], ...] = (
    Rule(Code.SINK_CHANGED, "WITH", UpgradeKind.UNSUPPORTED, Verdict.REJECTED, sink_changed),
    Rule(Code.QUERY_KIND_CHANGED, "CREATE", UpgradeKind.UNSUPPORTED, Verdict.REJECTED, kind_changed),
    Rule(Code.COLUMN_REMOVED, "SELECT", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, column_removed),
    Rule(Code.COLUMN_TYPE_CHANGED, "SELECT", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, column_type_changed),
    Rule(Code.COLUMNS_REORDERED, "SELECT", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, columns_reordered),
    Rule(Code.KEY_CHANGED, "SELECT", UpgradeKind.SCHEMA_EVOLUTION, Verdict.REJECTED, key_changed),
    Rule(Code.STATE_SCHEMA_INCOMPATIBLE, "GROUP BY", UpgradeKind.TOPOLOGY, Verdict.REJECTED, state_key_mismatch),
    Rule(Code.SUBQUERY, "FROM", UpgradeKind.UNSUPPORTED, Verdict.REJECTED, subqueries),
    Rule(Code.UNSUPPORTED_CHANGE, "query", UpgradeKind.UNSUPPORTED, Verdict.REJECTED, unexplained),
    Rule(Code.SOURCES_CHANGED, "FROM", UpgradeKind.SOURCE_MODIFYING, Verdict.REPLACING_REQUIRED, sources_changed),
    Rule(Code.SOURCE_ADDED, "FROM", UpgradeKind.SOURCE_MODIFYING, Verdict.IN_PLACE, source_added),
    Rule(Code.SOURCE_REMOVED, "FROM", UpgradeKind.SOURCE_MODIFYING, Verdict.IN_PLACE, source_removed),
    Rule(Code.BRANCH_CHANGED, "FROM", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, branch_changed),
    Rule(Code.GROUP_BY_CHANGED, "GROUP BY", UpgradeKind.TOPOLOGY, Verdict.REPLACING_REQUIRED, group_by_changed),
    Rule(Code.AGGREGATES_CHANGED, "SELECT", UpgradeKind.TOPOLOGY, Verdict.REPLACING_REQUIRED, aggregates_changed),
    Rule(Code.WINDOW_CHANGED, "WINDOW", UpgradeKind.TOPOLOGY, Verdict.REPLACING_REQUIRED, window_changed),
    Rule(Code.EMIT_CHANGED, "EMIT", UpgradeKind.TOPOLOGY, Verdict.REPLACING_REQUIRED, emit_changed),
    Rule(Code.STREAM_JOIN_CHANGED, "JOIN", UpgradeKind.TOPOLOGY, Verdict.REPLACING_REQUIRED, stream_join_changed),
    Rule(Code.TABLE_JOIN_CHANGED, "JOIN", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, table_join_changed),
    Rule(Code.KAFKA_TOPIC_CHANGED, "WITH", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, kafka_topic_changed),
    Rule(Code.COLUMN_APPENDED, "SELECT", UpgradeKind.SCHEMA_EVOLUTION, Verdict.IN_PLACE, column_appended),
    Rule(Code.FILTER_CHANGED, "WHERE", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, filter_changed),
    Rule(Code.HAVING_CHANGED, "HAVING", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, having_changed),
    Rule(Code.GRACE_CHANGED, "GRACE PERIOD", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, grace_changed),
    Rule(Code.PROJECTION_CHANGED, "SELECT", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, projection_changed),
    Rule(Code.ERROR_POLICY_CHANGED, "WITH", UpgradeKind.TRANSPARENT, Verdict.IN_PLACE, error_policy_changed),
    Rule(Code.RATE_LIMIT_CHANGED, "WITH", UpgradeKind.SCALING, Verdict.IN_PLACE, rate_limit_changed),
    Rule(Code.EXPECTATION_CHANGED, "WITH", UpgradeKind.DATA_SELECTION, Verdict.IN_PLACE, expectation_changed),
)
