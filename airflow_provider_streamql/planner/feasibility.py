"""What Structured Streaming can run: one rule per row, checked before anything is written.

A row is (name, one-line description, check, each_join). ``check(query)`` yields one plain
sentence per problem; the rules run in the table's order and the planner reports the first
sentence as the statement's error. A run of ``each_join`` rows is applied to each join of the
query in turn (every such rule for its first join, then for its second, ...), with
``query.join_kind`` and ``query.joined`` set to that join's type and joined source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import groupby
from typing import NamedTuple

from ..catalog import SourceInfo
from ..language import statements as st
from ..language.analyzer import SelectAnalysis


@dataclass(frozen=True)
class Query:
    """A persistent query as the rules see it: its statement, its analysed SELECT, the
    sources of the catalog as planned so far and the session's settings."""

    stmt: st.Statement
    analysis: SelectAnalysis
    sources: dict[str, SourceInfo]
    settings: dict[str, str]
    #: with an ``each_join`` rule: the join it checks (its type and the joined source)
    join_kind: str = ""
    joined: str = ""

    @property
    def first(self) -> str:
        """The source of the FROM clause (the stream the query reads)."""
        return self.analysis.sources[0]

    @property
    def emit(self) -> str | None:
        return getattr(self.stmt, "emit", None)

    def kind(self, name: str) -> str:
        return self.sources[name].kind


def _no_event_time(query: Query, name: str, needed_by: str) -> Iterator[str]:
    if query.sources[name].timestamp_column is None:
        yield (
            f"{needed_by} needs event time, and {name} has no timestamp column: "
            f"declare it with WITH (timestamp='<column>')"
        )


def stream_first(query: Query) -> Iterator[str]:
    if query.kind(query.first) == "TABLE":
        yield (f"a persistent query reads a STREAM first; {query.first} is a TABLE (join it to a stream instead)")


def join_type(query: Query) -> Iterator[str]:
    if query.join_kind not in ("INNER", "LEFT"):
        yield f"{query.join_kind} JOIN is not supported; use INNER or LEFT"


def stream_join_within(query: Query) -> Iterator[str]:
    name = query.joined
    if query.kind(name) == "STREAM" and query.stmt.within is None:
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
    if query.kind(name) != "STREAM" and query.stmt.within is not None:
        yield f"WITHIN is for joins between streams; {name} is a TABLE"


def one_join(query: Query) -> Iterator[str]:
    if len(query.analysis.joins) > 1:
        yield "one JOIN per query is supported; chain queries for more"


def join_not_aggregated(query: Query) -> Iterator[str]:
    if query.analysis.joins and query.analysis.aggregate:
        yield ("aggregating the result of a join is not supported yet; write the join to a stream and aggregate that")


def window_aggregates(query: Query) -> Iterator[str]:
    if query.stmt.window is not None and not query.analysis.aggregate:
        yield "WINDOW needs an aggregation: CREATE TABLE ... AS SELECT ... GROUP BY"


def window_event_time(query: Query) -> Iterator[str]:
    if query.stmt.window is not None:
        yield from _no_event_time(query, query.first, "WINDOW")


def session_emit_final(query: Query) -> Iterator[str]:
    if query.stmt.window is not None and query.stmt.window.kind == "SESSION" and query.emit != "FINAL":
        yield ("session windows support EMIT FINAL only: Spark has no update output mode for session windows")


def emit_final_window(query: Query) -> Iterator[str]:
    if query.emit == "FINAL" and query.stmt.window is None:
        yield "EMIT FINAL needs a windowed aggregation (a WINDOW clause)"


def latest_offset_files(query: Query) -> Iterator[str]:
    files = [n for n in query.analysis.sources if not query.sources[n].kafka_topic and query.kind(n) == "STREAM"]
    if query.settings.get("auto.offset.reset") == "latest" and files:
        yield (
            f"auto.offset.reset = 'latest' is not supported for file topics "
            f"({', '.join(files)}); they are read from the earliest file"
        )


class Rule(NamedTuple):
    name: str
    description: str
    check: Callable[[Query], Iterator[str]]
    each_join: bool = False


RULES: tuple[Rule, ...] = (
    Rule("stream_first", "a persistent query reads a STREAM; a TABLE is only joined to it", stream_first),
    Rule("join_type", "joins are INNER or LEFT", join_type, each_join=True),
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
    Rule("one_join", "a query has at most one JOIN", one_join),
    Rule("join_not_aggregated", "the result of a join is not aggregated in the same query", join_not_aggregated),
    Rule("window_aggregates", "a WINDOW comes with an aggregation", window_aggregates),
    Rule("window_event_time", "a windowed query's stream has a timestamp column", window_event_time),
    Rule("session_emit_final", "session windows EMIT FINAL (Spark has no update mode for them)", session_emit_final),
    Rule("emit_final_window", "EMIT FINAL comes with a WINDOW", emit_final_window),
    Rule(
        "latest_offset_files",
        "auto.offset.reset = 'latest' is for Kafka topics; file topics are read from their earliest file",
        latest_offset_files,
    ),
)


def problems(query: Query) -> Iterator[str]:
    """Every problem the rules find, in the table's order."""
    for each_join, run in groupby(RULES, key=lambda rule: rule.each_join):
        rules = list(run)
        subjects = (
            [replace(query, join_kind=kind, joined=name) for kind, name in query.analysis.joins]
            if each_join
            else [query]
        )
        for subject in subjects:
            for rule in rules:
                yield from rule.check(subject)


def first_problem(query: Query) -> str | None:
    """The problem to report (the first), or None when Structured Streaming can run it."""
    return next(problems(query), None)
