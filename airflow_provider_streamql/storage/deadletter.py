"""The dead-letter stream of a query, ``<QUERY_ID>_DLQ``: the bad records it skipped or
logged, one row each, readable with a pull query (``SELECT * FROM CSAS_X_1_DLQ``)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..catalog import BadRecord, QueryInfo, SourceInfo
from ..language.statements import Column
from . import topics
from .layout import Layout, home_of_checkpoint

COLUMNS = [
    Column.of("query_id", "STRING"),
    Column.of("source", "STRING"),
    Column.of("file", "STRING"),
    Column.of("line", "INT"),
    Column.of("raw", "STRING"),
    Column.of("error", "STRING"),
    Column.of("batch_id", "BIGINT"),
    Column.of("status", "STRING"),
    Column.of("recorded_at", "STRING"),
    Column.of("handled_by", "STRING"),
]


def dead_letter_name(query_id: str) -> str:
    return f"{query_id}_DLQ"


def dead_letter_source(query: QueryInfo, home: str | None = None) -> SourceInfo:
    """The dead-letter stream of ``query`` as a declared JSON stream in its home."""
    name = dead_letter_name(query.id)
    return SourceInfo(
        name,
        "STREAM",
        list(COLUMNS),
        {"dead_letter_of": query.id},
        "JSON",
        Layout(home or home_of_checkpoint(query.checkpoint)).topic(name),
    )


def append_dead_letters(src: SourceInfo, records: Iterable[BadRecord], name: str | None = None) -> str | None:
    """Append ``records`` to a dead-letter stream as one file (``name``: write it once);
    returns the file's path (None when there was nothing to write)."""
    rows = [
        {
            "query_id": r.query_id,
            "source": r.source,
            "file": r.file,
            "line": r.line,
            "raw": r.raw,
            "error": r.error,
            "batch_id": r.batch_id,
            "status": r.status,
            "recorded_at": _iso(r.recorded_at),
            "handled_by": r.handled_by,
        }
        for r in records
    ]
    return topics.append(src.path, src.format, src.columns, rows, name=name) if rows else None


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t or time.time()))
