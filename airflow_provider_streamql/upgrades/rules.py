"""One rule per row: (code, clause, upgrade kind, verdict it forces, check).

``check(old, new)`` compares two recorded shapes and yields one plain sentence per problem.
Grounded in Spark's "Recovery semantics after changes in a streaming query": filters and
projections may change on a checkpoint, and so may a Kafka sink's topic; streams may be
added or dropped where Spark's source evolution allows it (named sources); a file
sink's location, grouping keys,
aggregates, windows, join types and output modes may not. Spark checks state schemas by
type only, so a GROUP BY moved to another column of the same type passes Spark and
silently reuses the old state: it is caught here. Where the old version's checkpoint records
its aggregation state's key schema (``old["state_key"]``), that is checked too: the state on
disk, not only the statement text, must fit the new version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..language.streaming import duration_sql

Shape = dict[str, Any]


def _names(shape: Shape) -> list[str]:
    return [c[0].lower() for c in shape["columns"]]


def _columns(shape: Shape) -> dict[str, tuple[str, bool]]:
    return {c[0].lower(): (c[1], c[2]) for c in shape["columns"]}


def _stateful(shape: Shape) -> bool:
    return bool(shape["aggregates"] or shape["group_by"] or shape["within"])


def _show(values: Any) -> str:
    if isinstance(values, list):
        return ", ".join(map(str, values)) or "(none)"
    return str(values)


def _kafka_sinks(old: Shape, new: Shape) -> bool:
    return old["sink"]["writer"] == new["sink"]["writer"] == "kafka sink"


def sink_changed(old: Shape, new: Shape) -> Iterator[str]:
    for key in ("path", "format", "writer"):
        if key == "path" and _kafka_sinks(old, new):
            continue  # a Kafka sink may change its topic (kafka_topic_changed)
        if old["sink"][key] != new["sink"][key]:
            yield (
                f"the sink's {key} changed from {old['sink'][key]!r} to {new['sink'][key]!r}: "
                f"a file sink's location and format cannot change under a checkpoint; "
                f"create a new stream instead"
            )


def kafka_topic_changed(old: Shape, new: Shape) -> Iterator[str]:
    if _kafka_sinks(old, new) and old["sink"]["path"] != new["sink"]["path"]:
        yield (
            f"the Kafka sink's topic changed from {old['sink']['path'][6:]!r} to "
            f"{new['sink']['path'][6:]!r}: Spark allows it; records from the swap on go to the new topic"
        )


def kind_changed(old: Shape, new: Shape) -> Iterator[str]:
    if old["kind"] != new["kind"]:
        yield f"the query changed from {old['kind']} to {new['kind']}"


def _branches(shape: Shape) -> dict[str, str | None] | None:
    """Stream -> what the query reads of it, for a query that reads streams without joining
    them (language/query_shape.py ``merged_streams``); shapes recorded before branches were
    recorded read one stream whole when they have no join, subquery or window."""
    if "branches" in shape:
        return shape["branches"]
    plain = not (shape["joins"] or shape["subqueries"] or shape["window"])
    return dict.fromkeys(shape["streams"]) if plain else None


def _evolving(old: Shape, new: Shape) -> bool:
    """Streams may be added or dropped in place: both versions name their streams
    (``named``, set by the planner: the old version's checkpoint keys them by name) and read
    streams without joining them."""
    named = bool(old.get("named")) and bool(new.get("named"))
    return named and _branches(old) is not None and _branches(new) is not None


def sources_changed(old: Shape, new: Shape) -> Iterator[str]:
    if sorted(old["streams"]) == sorted(new["streams"]) or _evolving(old, new):
        return
    if old.get("named") and not new.get("named"):
        why = "the new version reads tables' changelogs, whose positions are not named: it needs a new checkpoint"
    elif not old.get("named"):
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
    yield f"the streams read changed from {_show(old['streams'])} to {_show(new['streams'])}: {why}"


def source_added(old: Shape, new: Shape) -> Iterator[str]:
    if _evolving(old, new):
        for name in [n for n in _branches(new) if n not in _branches(old)]:
            start = new.get("starts", {}).get(name, "its first record")
            yield (
                f"stream {name} is added: Spark reads it from {start}; the other streams go on "
                f"from their positions in the checkpoint and the state is kept"
            )


def source_removed(old: Shape, new: Shape) -> Iterator[str]:
    if _evolving(old, new):
        for name in [n for n in _branches(old) if n not in _branches(new)]:
            yield (
                f"stream {name} is no longer read: its position leaves the checkpoint (records "
                f"written to it from now on are not read); the state built from it is kept"
            )


def branch_changed(old: Shape, new: Shape) -> Iterator[str]:
    before, after = _branches(old), _branches(new)
    if before is None or after is None:
        return
    for name in [n for n in after if n in before and after[n] != before[n]]:
        yield (
            f"what is read of {name} changed from {before[name] or 'the whole stream'} to "
            f"{after[name] or 'the whole stream'} (row by row: no state)"
        )


def column_removed(old: Shape, new: Shape) -> Iterator[str]:
    for name in _names(old):
        if name not in _columns(new):
            yield f"output column {name!r} was removed; columns may only be appended"


def column_type_changed(old: Shape, new: Shape) -> Iterator[str]:
    new_columns = _columns(new)
    for name, (old_type, _) in _columns(old).items():
        if name in new_columns and new_columns[name][0] != old_type:
            yield f"output column {name!r} changed type from {old_type} to {new_columns[name][0]}"


def columns_reordered(old: Shape, new: Shape) -> Iterator[str]:
    kept = [n for n in _names(new) if n in _columns(old)]
    if kept != [n for n in _names(old) if n in _columns(new)]:
        yield f"output columns were reordered ({_show(_names(old))} -> {_show(_names(new))})"
    elif _names(new)[: len(kept)] != kept:
        yield "new output columns were inserted before existing ones; append them at the end"


def column_appended(old: Shape, new: Shape) -> Iterator[str]:
    added = [n for n in _names(new) if n not in _columns(old)]
    if added and not _stateful(new):
        yield f"output column(s) {_show(added)} appended; downstream readers see them as new columns"


def key_changed(old: Shape, new: Shape) -> Iterator[str]:
    old_keys = [n for n, (_, key) in _columns(old).items() if key]
    new_keys = [n for n, (_, key) in _columns(new).items() if key]
    if old_keys != new_keys:
        yield f"key columns changed from {_show(old_keys)} to {_show(new_keys)}; keys must stay identical"


def group_by_changed(old: Shape, new: Shape) -> Iterator[str]:
    if old["group_by"] != new["group_by"] and old["group_by"] and new["group_by"]:
        yield (
            f"GROUP BY changed from {_show(old['group_by'])} to {_show(new['group_by'])}: the "
            f"aggregation state is keyed by the old values and would be reused for the new "
            f"ones (Spark compares key types only and would accept it)"
        )
    elif bool(old["group_by"]) != bool(new["group_by"]):
        yield "the query gained or lost its GROUP BY"


def aggregates_changed(old: Shape, new: Shape) -> Iterator[str]:
    if old["aggregates"] != new["aggregates"] and (old["aggregates"] or new["aggregates"]):
        yield (
            f"aggregations changed from {_show(old['aggregates'])} to {_show(new['aggregates'])}: "
            f"the state holds the old aggregation buffers (Spark: "
            f"STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE)"
        )
        return
    # the same aggregate over an input of another type (a UNION ALL branch that widens it);
    # shapes recorded before types were have none
    before, after = old.get("aggregate_types") or {}, new.get("aggregate_types") or {}
    for text, was in before.items():
        now = after.get(text)
        if was and now and was != now:
            yield (
                f"{text} now aggregates {now} (was {was}): the state holds buffers of the old type "
                f"(Spark: STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE)"
            )


def _without_grace(spec: Any) -> Any:
    """A WINDOW's or WITHIN's shape (or a list of WITHINs) without its grace period, which
    decides which records are late, not what state holds (see :func:`grace_changed`)."""
    if isinstance(spec, list):
        return [_without_grace(s) for s in spec]
    return spec if spec is None else {k: v for k, v in spec.items() if k != "grace"}


def window_changed(old: Shape, new: Shape) -> Iterator[str]:
    if _without_grace(old["window"]) != _without_grace(new["window"]):
        yield f"the window changed from {old['window']} to {new['window']}: windowed state is keyed by window"


def grace_changed(old: Shape, new: Shape) -> Iterator[str]:
    """The grace period each stream's watermark runs with (``shape["grace"]``, the effective
    one: a version without GRACE PERIOD runs with the default of when it was planned)."""
    before, after = old.get("grace") or {}, new.get("grace") or {}
    for source in sorted(before.keys() & after.keys()):
        if before[source] != after[source]:
            yield (
                f"the grace period of {source} changes from {duration_sql(before[source])} to "
                f"{duration_sql(after[source])}: a watermark never moves back, so a longer one holds windows "
                f"(and EMIT FINAL output) until event time passes the old watermark by it; a shorter one "
                f"makes records late sooner"
            )


def emit_changed(old: Shape, new: Shape) -> Iterator[str]:
    if (old["emit"] or "CHANGES") != (new["emit"] or "CHANGES") and (old["window"] or new["window"]):
        yield (
            f"EMIT {old['emit'] or 'CHANGES'} changed to EMIT {new['emit'] or 'CHANGES'}: "
            f"the output mode of a stateful query cannot change"
        )


def stream_join_changed(old: Shape, new: Shape) -> Iterator[str]:
    stateful_join = old["within"] is not None or new["within"] is not None
    before = (old["joins"], old["join_on"], _without_grace(old["within"]))
    if stateful_join and before != (new["joins"], new["join_on"], _without_grace(new["within"])):
        yield "a stream-stream join changed (type, condition or WITHIN): its buffered state no longer matches"


def table_join_changed(old: Shape, new: Shape) -> Iterator[str]:
    stateless = old["within"] is None and new["within"] is None
    if stateless and (old["joins"], old["join_on"]) != (new["joins"], new["join_on"]):
        yield "the stream-table join changed; the table is re-read at each batch, so no state is involved"


def filter_changed(old: Shape, new: Shape) -> Iterator[str]:
    if old["where"] != new["where"]:
        yield f"WHERE changed from {old['where'] or '(none)'} to {new['where'] or '(none)'}"


def having_changed(old: Shape, new: Shape) -> Iterator[str]:
    if old["having"] != new["having"]:
        yield f"HAVING changed from {old['having'] or '(none)'} to {new['having'] or '(none)'}"


def projection_changed(old: Shape, new: Shape) -> Iterator[str]:
    for name, expression in old["projections"].items():
        new_expression = new["projections"].get(name)
        if new_expression is not None and new_expression != expression and expression not in old["group_by"]:
            yield f"column {name!r} is now computed as {new_expression} (was {expression})"


#: key fields of windowed aggregation state that hold the window, not a GROUP BY value
STATE_WINDOW_FIELDS = ("window", "session_window")


def _type(text: str) -> str:
    return text.replace(" ", "").upper()


def state_key_mismatch(old: Shape, new: Shape) -> Iterator[str]:
    """The aggregation state the old version's checkpoint records (``old["state_key"]``:
    [(field, type)] as Spark wrote it, when the planner read one) must be keyed by the types
    the new version groups by: Spark would refuse the checkpoint at start
    (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE), after the swap."""
    recorded = old.get("state_key")
    if not recorded or not new["group_by"]:
        return
    held = sorted(_type(t) for name, t in recorded if name not in STATE_WINDOW_FIELDS)
    bounds = {"windowstart", "windowend"}
    wanted = sorted(_type(t) for name, (t, key) in _columns(new).items() if key and name not in bounds)
    if held != wanted:
        shown = ", ".join(f"{n} {t}" for n, t in recorded)
        yield (
            f"the checkpoint's aggregation state is keyed by ({shown}) and the new version groups by "
            f"({', '.join(wanted)}): Spark cannot read that state (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE)"
        )


def subqueries(old: Shape, new: Shape) -> Iterator[str]:
    if old["subqueries"] or new["subqueries"]:
        yield "no upgrade rule covers queries with subqueries or CTEs"


def unexplained(old: Shape, new: Shape) -> Iterator[str]:
    if old["rest"] != new["rest"]:
        yield f"a part of the query no rule covers changed ({old['rest']} -> {new['rest']})"


RULES: tuple[tuple[str, str, str, str, Callable[[Shape, Shape], Iterator[str]]], ...] = (
    ("SINK_CHANGED", "WITH", "unsupported", "REJECTED", sink_changed),
    ("QUERY_KIND_CHANGED", "CREATE", "unsupported", "REJECTED", kind_changed),
    ("COLUMN_REMOVED", "SELECT", "schema evolution", "REJECTED", column_removed),
    ("COLUMN_TYPE_CHANGED", "SELECT", "schema evolution", "REJECTED", column_type_changed),
    ("COLUMNS_REORDERED", "SELECT", "schema evolution", "REJECTED", columns_reordered),
    ("KEY_CHANGED", "SELECT", "schema evolution", "REJECTED", key_changed),
    ("STATE_SCHEMA_INCOMPATIBLE", "GROUP BY", "topology", "REJECTED", state_key_mismatch),
    ("SUBQUERY", "FROM", "unsupported", "REJECTED", subqueries),
    ("UNSUPPORTED_CHANGE", "query", "unsupported", "REJECTED", unexplained),
    ("SOURCES_CHANGED", "FROM", "source modifying", "REPLACING_REQUIRED", sources_changed),
    ("SOURCE_ADDED", "FROM", "source modifying", "IN_PLACE", source_added),
    ("SOURCE_REMOVED", "FROM", "source modifying", "IN_PLACE", source_removed),
    ("BRANCH_CHANGED", "FROM", "data selection", "IN_PLACE", branch_changed),
    ("GROUP_BY_CHANGED", "GROUP BY", "topology", "REPLACING_REQUIRED", group_by_changed),
    ("AGGREGATES_CHANGED", "SELECT", "topology", "REPLACING_REQUIRED", aggregates_changed),
    ("WINDOW_CHANGED", "WINDOW", "topology", "REPLACING_REQUIRED", window_changed),
    ("EMIT_CHANGED", "EMIT", "topology", "REPLACING_REQUIRED", emit_changed),
    ("STREAM_JOIN_CHANGED", "JOIN", "topology", "REPLACING_REQUIRED", stream_join_changed),
    ("TABLE_JOIN_CHANGED", "JOIN", "data selection", "IN_PLACE", table_join_changed),
    ("KAFKA_TOPIC_CHANGED", "WITH", "data selection", "IN_PLACE", kafka_topic_changed),
    ("COLUMN_APPENDED", "SELECT", "schema evolution", "IN_PLACE", column_appended),
    ("FILTER_CHANGED", "WHERE", "data selection", "IN_PLACE", filter_changed),
    ("HAVING_CHANGED", "HAVING", "data selection", "IN_PLACE", having_changed),
    ("GRACE_CHANGED", "GRACE PERIOD", "data selection", "IN_PLACE", grace_changed),
    ("PROJECTION_CHANGED", "SELECT", "data selection", "IN_PLACE", projection_changed),
)
