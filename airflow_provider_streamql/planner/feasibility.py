"""What Structured Streaming can run: one rule per row, checked before anything is written.

A row is (name, one-line description, check, each_join, clause). ``check(query)`` yields one plain
sentence per problem; the rules run in the table's order and the planner reports the first
sentence as the statement's error. A run of ``each_join`` rows is applied to each join of the
query in turn (every such rule for its first join, then for its second, ...), with
``query.join_kind``, ``query.joined`` and ``query.within`` set to that join's type, joined
source and WITHIN. A rule with a ``clause`` (``"WINDOW"``) is reported at that clause.

Joins, as Spark runs them: a join between streams is one stateful operator of the streaming
plan (symmetric hash join, bounded by WITHIN and the watermarks); a join with a TABLE runs on
each micro-batch of the stream against the table as it is then (foreachBatch, see
``runtime.connectors._JoinAsOfBatch``), after the streaming plan.
"""

# long module: one table of rules, each check beside its row's kin; split in two, the
# table could no longer be read (and kept in order) in one place.
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import groupby
from typing import NamedTuple, cast

from sqlglot import exp

from ..catalog import SourceInfo
from ..language import join_conditions
from ..language import statements as st
from ..language.analyzer import SelectAnalysis
from ..language.limits import Limits
from ..language.tables import passed_keys, unmatched_keys


@dataclass(frozen=True)
class Query:
    """A persistent query as the rules see it: its statement, its analysed SELECT, the
    sources of the catalog as planned so far and the session's settings."""

    stmt: st.CreateAsSelect | st.InsertSelect
    analysis: SelectAnalysis
    sources: dict[str, SourceInfo]
    settings: dict[str, str]
    #: with an ``each_join`` rule: the join it checks (its type, the joined source, its WITHIN)
    join_kind: str = ""
    joined: str = ""
    within: st.Within | None = None
    #: the bounds of the engine planning it (windows per record)
    limits: Limits = Limits()

    @property
    def first(self) -> str:
        """The source of the FROM clause (the stream the query reads)."""
        return self.analysis.sources[0]

    @property
    def emit(self) -> str | None:
        return getattr(self.stmt, "emit", None)

    def kind(self, name: str) -> str:
        return self.sources[name].kind

    @property
    def stream_joins(self) -> list[tuple[str, str]]:
        """(type, joined source) of each join with a STREAM."""
        return [(kind, name) for kind, name in self.analysis.joins if self.kind(name) == "STREAM"]

    @property
    def table_joins(self) -> list[tuple[str, str]]:
        """(type, joined source) of each join with a TABLE."""
        return [(kind, name) for kind, name in self.analysis.joins if self.kind(name) != "STREAM"]


def _no_event_time(query: Query, name: str, needed_by: str) -> Iterator[str]:
    if query.sources[name].timestamp_column is None:
        yield (
            f"{needed_by} needs event time, and {name} has no timestamp column: "
            f"declare it with WITH (timestamp='<column>')"
        )


def _over_table(query: Query) -> bool:
    """A query over tables: its FROM source is a TABLE (a changelog in, a changelog out)."""
    return query.kind(query.first) == "TABLE"


def table_query_makes_table(query: Query) -> Iterator[str]:
    stmt = query.stmt
    if _over_table(query) and not (isinstance(stmt, st.CreateAsSelect) and stmt.kind == "TABLE"):
        yield (
            f"{query.first} is a TABLE: a query over a table makes a TABLE (CREATE TABLE ... AS SELECT), "
            f"its changes being updates and deletes of keys, which a stream cannot hold; to enrich a "
            f"stream with it, join it to the stream (FROM <stream> JOIN {query.first})"
        )


def table_query_tables_only(query: Query) -> Iterator[str]:
    if _over_table(query):
        for name in [name for _, name in query.analysis.joins if query.kind(name) == "STREAM"]:
            yield (
                f"TABLE {query.first} is joined to STREAM {name}: put the stream first "
                f"(FROM {name} JOIN {query.first}); a table-stream join is not supported, as in ksqlDB"
            )


def table_query_window(query: Query) -> Iterator[str]:
    if _over_table(query) and query.stmt.window is not None:
        yield f"WINDOW needs a STREAM: {query.first} is a TABLE, whose rows have no event time to window"


def table_query_key(query: Query) -> Iterator[str]:
    if not _over_table(query) or query.analysis.aggregate:
        return
    keys = query.sources[query.first].key_columns
    missing = [k for k in keys if k not in passed_keys(query.analysis, keys)]
    if missing:
        yield (
            f"a query over TABLE {query.first} without GROUP BY selects its PRIMARY KEY "
            f"({', '.join(missing)} is missing, as a plain column): it is the output's key, as in ksqlDB"
        )


def table_join_key(query: Query) -> Iterator[str]:
    if not _over_table(query):
        return
    select = query.analysis.named if query.analysis.named is not None else cast(exp.Select, query.stmt.select)
    for join, (_, name) in zip(select.args.get("joins") or [], query.analysis.joins, strict=False):
        keys = query.sources[name].key_columns
        missing = unmatched_keys(select, join, keys)
        if missing:
            yield (
                f"a table-table join matches each row of {query.first} with at most one row of {name}: "
                f"ON must equate {name}'s PRIMARY KEY ({', '.join(keys)}) with columns of the other "
                f"tables, qualified by their names or aliases ({', '.join(missing)} is not)"
            )


STREAM_JOIN_TYPES = ("INNER", "LEFT", "RIGHT", "FULL")
TABLE_JOIN_TYPES = ("INNER", "LEFT")


def join_type(query: Query) -> Iterator[str]:
    if query.kind(query.joined) == "STREAM":
        if query.join_kind not in STREAM_JOIN_TYPES:
            yield f"{query.join_kind} JOIN is not supported; use INNER, LEFT, RIGHT or FULL OUTER"
    elif query.join_kind not in TABLE_JOIN_TYPES:
        yield (
            f"{query.join_kind} JOIN with TABLE {query.joined} is not supported: a stream-table join "
            f"looks each stream record up in the table, so a table row no record looks up has nothing "
            f"to emit (ksqlDB joins a stream to a table with INNER or LEFT only); use INNER or LEFT"
        )


def join_modifier(query: Query) -> Iterator[str]:
    joins = query.stmt.select.args.get("joins") or []
    for join, (_, name) in zip(joins, query.analysis.joins, strict=False):
        modifier = (join.args.get("kind") or "").upper()
        if modifier in ("SEMI", "ANTI", "CROSS"):
            yield f"{modifier} JOIN is not supported; use INNER, LEFT, RIGHT or FULL OUTER with ON"
        elif join.args.get("on") is None and query.kind(name) == "STREAM":
            yield (
                f"the join with stream {name} needs ON <condition> (not USING or NATURAL): its "
                f"WITHIN bound is added to the ON condition"
            )


def join_condition(query: Query) -> Iterator[str]:
    # the qualified tree says whose columns ON reads; the statement's own shows it as written
    select = query.analysis.typed if query.analysis.typed is not None else query.stmt.select
    written = query.stmt.select.args.get("joins") or []
    for join, shown, (_, name) in zip(select.args.get("joins") or [], written, query.analysis.joins, strict=False):
        source = query.sources[name]
        on = shown.args.get("on")
        joined = join_conditions.JoinedSource(
            join, name, source.kind, tuple(source.key_columns), on.sql() if on is not None else ""
        )
        problem = join_conditions.problem(select, joined, query.kind(query.first))
        if problem is not None:
            yield problem


def stream_join_within(query: Query) -> Iterator[str]:
    name = query.joined
    if query.kind(name) == "STREAM" and query.within is None:
        yield (
            f"a join between streams {query.first} and {name} needs WITHIN (e.g. JOIN {name} "
            f"WITHIN 5 MINUTES ON ...) so its state can be bounded by event time"
        )


def stream_join_event_time(query: Query) -> Iterator[str]:
    name = query.joined
    if query.kind(name) == "STREAM":
        for side in (query.first, name):
            yield from _no_event_time(query, side, "a stream-stream join")


def table_join_within(query: Query) -> Iterator[str]:
    name = query.joined
    if query.kind(name) != "STREAM" and query.within is not None:
        yield f"WITHIN is for joins between streams; {name} is a TABLE"


def one_stream_join(query: Query) -> Iterator[str]:
    if len(query.stream_joins) > 1:
        names = ", ".join([query.first] + [name for _, name in query.stream_joins])
        yield (
            f"a query joins at most two streams ({names} are {len(query.stream_joins) + 1}): Spark "
            f"allows one event-time column in each input of a stream-stream join, and the result of "
            f"a join carries both streams' timestamps (MULTIPLE_EVENT_TIME_COLUMNS); write the first "
            f"join to a stream and join that stream"
        )


def streams_or_tables(query: Query) -> Iterator[str]:
    if query.stream_joins and query.table_joins:
        yield (
            f"a query joins either another stream or tables, not both ({query.stream_joins[0][1]} "
            f"is a STREAM, {query.table_joins[0][1]} a TABLE): tables are joined per micro-batch "
            f"(foreachBatch) after the streaming plan that runs the stream-stream join; write the "
            f"stream-stream join to a stream and join that stream to the tables"
        )


def table_join_not_aggregated(query: Query) -> Iterator[str]:
    if query.table_joins and query.analysis.aggregate and not _over_table(query):
        yield (
            "aggregating the result of a stream-table join is not supported: the table is joined "
            "to each micro-batch as it is then (foreachBatch), after Spark's stateful operators, "
            "so nothing can keep the aggregate's state; write the join to a stream and aggregate that"
        )


def outer_join_aggregated(query: Query) -> Iterator[str]:
    outer = [kind for kind, _ in query.stream_joins if kind != "INNER"]
    if outer and query.analysis.aggregate and query.emit != "FINAL":
        yield (
            f"an aggregation over a {outer[0]} stream-stream join needs WINDOW ... EMIT FINAL: Spark "
            f"runs an outer join between streams in append output mode only, and an aggregate "
            f"emitted as it changes needs update mode; add a WINDOW and EMIT FINAL, or write the "
            f"join to a stream and aggregate that"
        )


def join_window_time(query: Query) -> Iterator[str]:
    if query.stmt.window is None or not query.stream_joins:
        return
    kind, name = query.stream_joins[0]
    if kind in ("RIGHT", "FULL"):
        yield (
            f"a WINDOW over a {kind} join is not supported: it windows by {query.first}'s event "
            f"time, and the rows of {name} without a match have none"
        )
    within = query.stmt.within
    if within is not None and within.after > 0:
        yield (
            f"a WINDOW over a stream-stream join groups rows by the join's time, which ksqlDB takes "
            f"as the later of the two records' times; Spark can window only by a stream's own "
            f"event-time column (a computed time has no watermark), so {name} must never be later "
            f"than {query.first}: write WITHIN ({_seconds(within.before)}, 0 SECONDS)"
        )


def _seconds(seconds: float) -> str:
    return f"{seconds:g} SECONDS"


def window_aggregates(query: Query) -> Iterator[str]:
    if query.stmt.window is not None and not query.analysis.aggregate:
        yield "WINDOW needs an aggregation: CREATE TABLE ... AS SELECT ... GROUP BY"


def window_event_time(query: Query) -> Iterator[str]:
    if query.stmt.window is not None:
        yield from _no_event_time(query, query.first, "WINDOW")


def window_count(query: Query) -> Iterator[str]:
    window = query.stmt.window
    if window is None or window.kind != "HOPPING" or not window.advance:
        return
    count = math.ceil(window.size / window.advance - 1e-9)
    if count > query.limits.windows_per_record:
        yield query.limits.exceeded(
            "windows_per_record",
            f"a hopping window of SIZE {_seconds(window.size)} advancing by {_seconds(window.advance)} puts "
            f"each record in {count:,} windows (Spark plans one projection and keeps one state row per window)",
        )


def session_emit_final(query: Query) -> Iterator[str]:
    if query.stmt.window is not None and query.stmt.window.kind == "SESSION" and query.emit != "FINAL":
        yield ("session windows support EMIT FINAL only: Spark has no update output mode for session windows")


def emit_final_window(query: Query) -> Iterator[str]:
    if query.emit == "FINAL" and query.stmt.window is None:
        yield "EMIT FINAL needs a windowed aggregation (a WINDOW clause)"


def latest_offset_files(query: Query) -> Iterator[str]:
    files = [n for n in query.analysis.sources if not query.sources[n].kafka_topic and query.kind(n) == "STREAM"]
    if query.settings.get("auto.offset.reset") == "latest" and not query.settings.get("starting.timestamp") and files:
        yield (
            f"auto.offset.reset = 'latest' is not supported for file topics "
            f"({', '.join(files)}); they are read from the earliest file, or from a time "
            f"(start = '<time>': the first file committed at or after it)"
        )


def tables_joined(query: Query) -> Iterator[str]:
    joined = {name for _, name in query.analysis.joins}
    for name in query.analysis.sources[1:]:
        if query.kind(name) == "TABLE" and name not in joined:
            yield (
                f"TABLE {name} is read in a subquery or a UNION ALL branch: a query reads a table as "
                f"its FROM source (CREATE TABLE ... AS SELECT ... FROM {name}) or joins it to a stream "
                f"(JOIN {name} ON ...); a UNION ALL merges streams"
            )


class Rule(NamedTuple):
    name: str
    description: str
    check: Callable[[Query], Iterator[str]]
    each_join: bool = False
    #: the clause a problem is reported at ("WINDOW"), or the statement ("")
    clause: str = ""


RULES: tuple[Rule, ...] = (
    Rule(
        "table_query_makes_table",
        "a query over a TABLE (its FROM source) is a CREATE TABLE ... AS SELECT: its changes are updates and deletes",
        table_query_makes_table,
    ),
    Rule("tables_joined", "a TABLE is the FROM source or joined, not read in a subquery or UNION ALL", tables_joined),
    Rule("table_query_tables_only", "a query over a TABLE joins only tables", table_query_tables_only),
    Rule("table_query_window", "a query over a TABLE has no WINDOW (its rows have no event time)", table_query_window),
    Rule("table_query_key", "a query over a TABLE without GROUP BY selects the TABLE's PRIMARY KEY", table_query_key),
    Rule(
        "table_join_key",
        "a table-table join equates the joined table's PRIMARY KEY: one joined row per row at most",
        table_join_key,
    ),
    Rule("join_modifier", "joins have ON (not SEMI, ANTI, CROSS; a stream joined ON, not USING)", join_modifier),
    Rule(
        "join_condition",
        "ON equates the joined source with the others, once (a TABLE's composite key: once per key column); "
        "a stream-table join equates the table's PRIMARY KEY",
        join_condition,
    ),
    Rule(
        "join_type",
        "joins between streams are INNER, LEFT, RIGHT or FULL; joins with a TABLE are INNER or LEFT",
        join_type,
        each_join=True,
    ),
    Rule(
        "stream_join_within",
        "a join between streams has WITHIN, which bounds its state",
        stream_join_within,
        each_join=True,
    ),
    Rule(
        "stream_join_event_time",
        "both streams of a stream-stream join have a timestamp column",
        stream_join_event_time,
        each_join=True,
    ),
    Rule(
        "table_join_within",
        "WITHIN belongs to joins between streams, not to a TABLE",
        table_join_within,
        each_join=True,
    ),
    Rule("one_stream_join", "a query joins at most two streams (one event-time column per input)", one_stream_join),
    Rule("streams_or_tables", "a query joins another stream or tables, not both", streams_or_tables),
    Rule(
        "table_join_not_aggregated",
        "the result of a stream-table join (joined per micro-batch) is not aggregated in the same query",
        table_join_not_aggregated,
    ),
    Rule(
        "outer_join_aggregated",
        "an aggregation over an outer stream-stream join is windowed with EMIT FINAL (append mode)",
        outer_join_aggregated,
    ),
    Rule(
        "join_window_time",
        "a WINDOW over a stream-stream join windows by the FROM stream's time, which must be the join's time",
        join_window_time,
    ),
    Rule("window_aggregates", "a WINDOW comes with an aggregation", window_aggregates),
    Rule("window_event_time", "a windowed query's stream has a timestamp column", window_event_time),
    Rule(
        "window_count",
        "a record falls in at most windows_per_record hopping windows (SIZE / ADVANCE BY)",
        window_count,
        clause="WINDOW",
    ),
    Rule("session_emit_final", "session windows EMIT FINAL (Spark has no update mode for them)", session_emit_final),
    Rule("emit_final_window", "EMIT FINAL comes with a WINDOW", emit_final_window),
    Rule(
        "latest_offset_files",
        "auto.offset.reset = 'latest' is for Kafka topics; file topics are read from their earliest file or "
        "from a time",
        latest_offset_files,
    ),
)


def findings(query: Query) -> Iterator[tuple[Rule, str]]:
    """Every problem the rules find with the rule that found it, in the table's order."""
    for each_join, run in groupby(RULES, key=lambda rule: rule.each_join):
        rules = list(run)
        subjects = (
            [
                replace(query, join_kind=kind, joined=name, within=within)
                for (kind, name), within in zip(query.analysis.joins, _withins(query), strict=True)
            ]
            if each_join
            else [query]
        )
        for subject in subjects:
            for rule in rules:
                for problem in rule.check(subject):
                    yield rule, problem


def _withins(query: Query) -> list[st.Within | None]:
    """The WITHIN of each join (the parser gives one per JOIN outside subqueries)."""
    withins = list(query.stmt.withins)
    return (withins + [None] * len(query.analysis.joins))[: len(query.analysis.joins)]


def first_finding(query: Query) -> tuple[Rule, str] | None:
    """The problem to report (the first) with its rule, or None."""
    return next(findings(query), None)
