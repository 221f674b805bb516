"""Push queries: ``SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]``.

ksqlDB runs a push query as a transient query that streams rows to its client. streamql runs
it on the committed output of ``s``'s topic instead (:mod:`..storage.push`): each new file's
(or Kafka record's) rows go through the SELECT's projection and WHERE on a locked DuckDB, rendered from the
tree as pull queries are. No Spark, no query in the catalog, no file written; a row appears
once the query writing ``s`` commits it. What needs state across rows (aggregations, windows,
joins, DISTINCT, ORDER BY) is refused with where it runs instead: a persistent query, whose
output a push query, PRINT or a pull query reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, cast

from sqlglot import exp

from ..language import statements as st
from ..language.analyzer import SelectAnalysis
from ..results import Result
from ..storage.push import PushPlan, push_rows, start
from .planning import Planning, error_at
from .step import Step


def persistent(kind: str, clause: str) -> str:
    """Where ksqlDB's stateful push queries run in streamql: a persistent query of ``kind``."""
    return (
        f"ksqlDB runs it as a transient stateful query; streamql runs it as a persistent query: "
        f"CREATE {kind} t AS SELECT ... {clause}, then SELECT * FROM t EMIT CHANGES, PRINT t or a pull query"
    )


def _reads_other_sources(select: exp.Select, analysis: SelectAnalysis) -> bool:
    return (
        len(analysis.sources) != 1
        or not isinstance(cast(exp.From, select.args.get("from_")).this, exp.Table)
        or any(True for _ in select.find_all(exp.Subquery, exp.With, exp.SetOperation))
    )


class PushQueries:
    """Push queries, planned in ``planning``."""

    #: what a push query cannot run on committed output, tested in order, and why (ksqlDB's terms)
    REFUSED: ClassVar[tuple[tuple[Callable[[exp.Select, SelectAnalysis], bool], str], ...]] = (
        (lambda s, a: bool(a.joins), "a JOIN: " + persistent("STREAM", "JOIN ...")),
        (
            _reads_other_sources,
            "a push query reads one stream or table (FROM s, no subquery, CTE or UNION): "
            "write what combines sources as a persistent query and push from its output",
        ),
        (
            lambda s, a: a.aggregate or bool(s.args.get("group")) or bool(s.args.get("having")),
            "an aggregation: " + persistent("TABLE", "GROUP BY ..."),
        ),
        (
            lambda s, a: any(True for _ in s.find_all(exp.Window)),
            "a window function (OVER) keeps state across rows: " + persistent("TABLE", "GROUP BY ..."),
        ),
        (
            lambda s, a: bool(s.args.get("distinct")),
            "SELECT DISTINCT keeps state across rows: " + persistent("TABLE", "GROUP BY ..."),
        ),
        (
            lambda s, a: bool(s.args.get("order")) or bool(s.args.get("offset")),
            "a push query shows rows as they arrive: ORDER BY and OFFSET have no end of the stream to "
            "sort or skip to (ksqlDB has neither); use a pull query",
        ),
    )

    def __init__(self, planning: Planning):
        self.planning = planning

    def push_query(self, stmt: st.PushQuery) -> Step:
        if stmt.window or stmt.within:
            raise error_at(
                "push query refused: a windowed aggregation or join (WINDOW, WITHIN): "
                + persistent("TABLE", "WINDOW ... GROUP BY ..."),
                stmt,
            )
        analysis = self.planning.analyze_pull(stmt)
        select = analysis.named or cast(exp.Select, stmt.select)  # one SELECT (parse_select)
        for refused, reason in self.REFUSED:
            if refused(select, analysis):
                raise error_at(f"push query refused: {reason}", stmt)
        src = self.planning.source_read(analysis.sources[0], stmt, "a push query of")
        plan = PushPlan(src, select, analysis, stmt.limit, self.planning.limits, self.planning.kafka)
        earliest = self.planning.settings.get("auto.offset.reset") == "earliest"
        result = Result(stmt.text, columns=plan.columns, push_plan=plan)

        def read() -> None:
            # outside any catalog transaction, as a pull query: the rows committed so far
            # (with earliest), else none: only what is committed after this look
            pushed = push_rows(plan, start(plan, earliest=earliest))
            result.rows = pushed.rows
            result.message = "; ".join(pushed.notes)
            result.details["push"] = {
                "source": src.name,
                "limit": stmt.limit,
                "from": "earliest" if earliest else "latest",
                **pushed.to_dict(),
            }

        return Step(result, read=read, reads=frozenset({src.name}))
