"""Comparing two queries' outputs over the same input: a query and its shadow version
(``DIFF <query_id>``), without Spark.

Both started from the same checkpoint at batch ``after``. Each later batch's input files are
in its checkpoint's offset and source logs, and each batch's output is named by its batch id
(:func:`..storage.snapshots.own_output`), so the two outputs are compared over the input
files *both* have processed since: a batch counts when every file it read was read by the
other side too. Streams are compared as multisets of rows, tables as the latest row per key.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..catalog import SourceInfo
from .checkpoints import batch_files, last_committed_batch
from .snapshots import own_output
from .topics import entry_files, is_tombstones, read_file


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
    live_batches, shadow_batches = live.batches(), shadow.batches()
    read_live = set().union(*live_batches.values()) if live_batches else set()
    read_shadow = set().union(*shadow_batches.values()) if shadow_batches else set()
    common = read_live & read_shadow
    columns = [c.name for c in shadow.sink.columns]
    diff = Diff(columns, inputs=len(common))
    diff.behind = {live.query_id: len(read_shadow - read_live), shadow.query_id: len(read_live - read_shadow)}
    table = shadow.sink.kind == "TABLE"
    rows = {
        side.query_id: _rows(side, {b for b, files in batches.items() if files <= common}, table)
        for side, batches in ((live, live_batches), (shadow, shadow_batches))
    }
    left, right = rows[live.query_id], rows[shadow.query_id]
    if table:
        keys = shadow.sink.key_columns
        left_by_key, right_by_key = _latest(left, keys), _latest(right, keys)
        for key in sorted(left_by_key.keys() | right_by_key.keys(), key=repr):
            a, b = left_by_key.get(key), right_by_key.get(key)
            if a != b:
                diff.only_live += [_values(a, columns)] if a is not None else []
                diff.only_shadow += [_values(b, columns)] if b is not None else []
        return diff
    a, b = (
        Counter(_values(r, columns, hashable=True) for r, _ in left),
        Counter(_values(r, columns, hashable=True) for r, _ in right),
    )
    diff.only_live = [list(r) for r in sorted((a - b).elements(), key=repr)]
    diff.only_shadow = [list(r) for r in sorted((b - a).elements(), key=repr)]
    return diff


def _rows(side: Side, batches: set[int], table: bool) -> list[tuple[dict[str, Any], bool]]:
    """(row, is a tombstone) of the side's output for ``batches``, in batch order."""
    rows = []
    for batch, path in own_output(side.sink.path, side.query_id, table=table):
        if batch in batches:
            for f in entry_files(path):
                rows += [(row, is_tombstones(f)) for row in read_file(f, side.sink.format, side.sink.columns)]
    return rows


def _latest(rows: list[tuple[dict[str, Any], bool]], keys: list[str]) -> dict[tuple, dict[str, Any] | None]:
    """Key -> its latest row (None: deleted) among ``rows``."""
    latest: dict[tuple, dict[str, Any] | None] = {}
    for row, deleted in rows:
        latest[tuple(repr(row.get(k)) for k in keys)] = None if deleted else row
    return latest


def _values(row: dict[str, Any] | None, columns: list[str], *, hashable: bool = False):
    values = [(row or {}).get(c) for c in columns]
    return tuple(repr(v) if isinstance(v, (dict, list)) else v for v in values) if hashable else values
