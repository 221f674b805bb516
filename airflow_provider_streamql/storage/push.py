"""Push queries on file topics: ``SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]``.

A push query follows the committed output of ``s``'s topic, as ``PRINT`` does
(:mod:`.printing`): each data file committed after the query started (a table: each entry of
its changelog; its tombstones delete and show no row) is loaded into a pull query's locked
DuckDB (:class:`.pull.PullQuery`) and the SELECT's projection and WHERE run on its rows, in
the order they were written. Nothing runs on Spark and no persistent query is touched: a row
appears once the query writing ``s`` (or an INSERT VALUES) commits it, so a push query's
latency is that query's batch interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..catalog import SourceInfo
from ..language.analyzer import SelectAnalysis
from ..language.limits import Limits
from . import topics
from .pull import PullQuery, data_files

#: files read at most at one look: an earliest push query over a long history shows its rows
#: in bounded steps (each within the pull query's bounds), not in one answer
FILES_PER_LOOK = 64


@dataclass(frozen=True)
class PushPlan:
    """A push query resolved once: the source it follows, its SELECT (as analysed, without
    LIMIT), the analysis, the rows it stops after, and the bounds of each look."""

    source: SourceInfo
    select: exp.Select
    analysis: SelectAnalysis
    limit: int | None
    limits: Limits

    @property
    def columns(self) -> list[str]:
        """The names of the rows' values, as the SELECT names them."""
        return [c.name for c in self.analysis.columns]


@dataclass(frozen=True)
class Pushed:
    """Where a push query stands: the rows found at the last look, every file read so far,
    how many rows were shown in all, and what a reader should know (lines skipped)."""

    rows: list[list[Any]] = field(default_factory=list)
    files: frozenset[str] = frozenset()
    shown: int = 0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Where it stands, without the rows (a JSON value)."""
        return {"files": sorted(self.files), "shown": self.shown}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pushed:
        return cls(files=frozenset(data["files"]), shown=data["shown"])


def start(plan: PushPlan, *, earliest: bool) -> Pushed:
    """Where a push query starts: after every file committed now (ksqlDB's default,
    ``auto.offset.reset`` latest), or before the first (``earliest``)."""
    return Pushed() if earliest else Pushed(files=frozenset(data_files(plan.source)))


def push_rows(plan: PushPlan, since: Pushed) -> Pushed:
    """The rows of the files committed to ``plan``'s source that ``since`` has not read
    (at most :data:`FILES_PER_LOOK`, oldest first), through the SELECT, in order, until
    ``plan.limit`` rows are shown in all."""
    if plan.limit is not None and since.shown >= plan.limit:
        return Pushed(files=since.files, shown=since.shown)
    new = [f for f in data_files(plan.source) if f not in since.files][:FILES_PER_LOOK]
    readable = [f for f in new if not topics.is_tombstones(f)]
    if not readable:
        return Pushed(files=since.files | set(new), shown=since.shown)
    select = plan.select
    if plan.limit is not None:  # the rows still to show: a typed number, never text
        select = select.limit(plan.limit - since.shown)
    with PullQuery([plan.source], plan.limits, files={plan.source.name: readable}) as query:
        _, rows = query.run(select, plan.analysis)
    return Pushed(rows, since.files | set(new), since.shown + len(rows), tuple(query.notes))
