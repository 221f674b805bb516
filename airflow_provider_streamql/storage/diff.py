"""Comparing two queries' outputs over the same input: a query and its shadow version
(``DIFF <query_id>``), without Spark.

Both started from the same checkpoint at batch ``after``. Each later batch's input files are
in its checkpoint's offset and source logs, and each batch's output is named by its batch id
(:func:`..storage.snapshots.own_output`), so the two outputs are compared over the input
files *both* have processed since: a batch counts when every file it read was read by the
other side too. Streams are compared as multisets of rows, tables as the latest row per key.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..catalog import SourceInfo
from .checkpoints import batch_files, last_committed_batch
from .layout import Part
from .snapshots import own_output
from .topics import entry_files, is_tombstones, read_file, value_delimiter


@dataclass
class Side:
    """One query's output after ``after``: its checkpoint, its sink, its ID."""

    query_id: str
    checkpoint: str
    sink: SourceInfo
    after: int

    def batches(self) -> dict[int, set[str]]:
        """Committed batch id -> the input files it read."""
        return {
            b: batch_files(self.checkpoint, b) for b in range(self.after + 1, last_committed_batch(self.checkpoint) + 1)
        }


@dataclass
class Diff:
    """Rows only one side wrote, over ``inputs`` input files both read (``behind``: files
    one side has read and the other not yet)."""

    columns: list[str]
    only_live: list[list[Any]] = field(default_factory=list)
    only_shadow: list[list[Any]] = field(default_factory=list)
    inputs: int = 0
    behind: dict[str, int] = field(default_factory=dict)


def compare(live: Side, shadow: Side) -> Diff:
    """The difference of ``shadow``'s output from ``live``'s over the input both processed."""
    sides = {live.query_id: live.batches(), shadow.query_id: shadow.batches()}
    kept = _comparable(*sides.values())
    read = {q: set().union(*batches.values()) if batches else set() for q, batches in sides.items()}
    columns = [c.name for c in shadow.sink.columns]
    compared = set().union(*(sides[live.query_id][b] for b in kept[0])) if kept[0] else set()
    diff = Diff(columns, inputs=len(compared))
    diff.behind = {
        live.query_id: len(read[shadow.query_id] - read[live.query_id]),
        shadow.query_id: len(read[live.query_id] - read[shadow.query_id]),
    }
    table = shadow.sink.kind == "TABLE"
    left, right = _rows(live, kept[0], table), _rows(shadow, kept[1], table)
    if table:
        keys = shadow.sink.key_columns
        left_by_key, right_by_key = _latest(left, keys), _latest(right, keys)
        for key in sorted(left_by_key.keys() | right_by_key.keys(), key=repr):
            a, b = left_by_key.get(key), right_by_key.get(key)
            if _values(a, columns) != _values(b, columns):
                diff.only_live += [_values(a, columns, shown=True)] if a is not None else []
                diff.only_shadow += [_values(b, columns, shown=True)] if b is not None else []
        return diff
    a = Counter(_values(r, columns) for r, _ in left)
    b = Counter(_values(r, columns) for r, _ in right)
    shown = {_values(r, columns): _values(r, columns, shown=True) for r, _ in left + right}
    diff.only_live = [shown[r] for r in sorted((a - b).elements(), key=repr)]
    diff.only_shadow = [shown[r] for r in sorted((b - a).elements(), key=repr)]
    return diff


def _comparable(live: dict[int, set[str]], shadow: dict[int, set[str]]) -> tuple[set[int], set[int]]:
    """The batches of each side that read only files the other side's kept batches read too:
    batches group files differently, so shrink both to a fixed point. A batch that read no
    file (a watermark's) counts when the data batch before it does."""
    files = set().union(*live.values(), set()) & set().union(*shadow.values(), set())
    while True:
        kept = [{b for b, f in side.items() if f and f <= files} for side in (live, shadow)]
        common = [set().union(*(side[b] for b in k), set()) for side, k in zip((live, shadow), kept, strict=True)]
        if common[0] == common[1] == files:
            break
        files = common[0] & common[1]
    for side, k in zip((live, shadow), kept, strict=True):
        data = True  # before any data batch: the copy's state, the same on both sides
        for b in sorted(side):
            if side[b]:
                data = b in k
            elif data:
                k.add(b)
    return kept[0], kept[1]


def _rows(side: Side, batches: set[int], table: bool) -> list[tuple[dict[str, Any], bool]]:
    """(row, is a tombstone) of the side's output for ``batches``, in batch order."""
    rows, part = [], Part(side.sink.path)
    for batch, path in own_output(side.sink.path, side.query_id, table=table):
        if batch in batches:
            for f in entry_files(path, part):
                delimiter = value_delimiter(side.sink.properties)
                rows += [
                    (row, is_tombstones(f))
                    for row in read_file(f, side.sink.format, side.sink.columns, delimiter=delimiter)
                ]
    return rows


def _latest(rows: list[tuple[dict[str, Any], bool]], keys: list[str]) -> dict[tuple, dict[str, Any] | None]:
    """Key -> its latest row (None: deleted) among ``rows``."""
    latest: dict[tuple, dict[str, Any] | None] = {}
    for row, deleted in rows:
        latest[tuple(_comparable_value(row.get(k)) for k in keys)] = None if deleted else row
    return latest


def _values(row: dict[str, Any] | None, columns: list[str], *, shown: bool = False):
    """A row's values in column order: as shown, or (default) as compared: hashable, floats
    to 12 significant digits (aggregates summed over other batch groupings differ in the last
    bits), NaN equal to NaN."""
    values = [(row or {}).get(c) for c in columns]
    return values if shown else tuple(_comparable_value(v) for v in values)


def _comparable_value(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else float(f"{value:.12g}")
    if isinstance(value, (dict, list)):
        return repr(value)
    return value
