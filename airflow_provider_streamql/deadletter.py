"""The dead-letter stream of a query, ``<QUERY_ID>_DLQ``: the bad records it skipped or
logged, one row each, readable with a pull query (``SELECT * FROM CSAS_X_1_DLQ``)."""
from __future__ import annotations

import os
import time
from typing import Iterable

from . import topics
from .catalog import BadRecord, QueryInfo, SourceInfo
from .language.statements import Column

COLUMNS = [Column("query_id", "STRING"), Column("source", "STRING"), Column("file", "STRING"),
           Column("line", "INT"), Column("raw", "STRING"), Column("error", "STRING"),
           Column("batch_id", "BIGINT"), Column("status", "STRING"), Column("recorded_at", "STRING"),
           Column("handled_by", "STRING")]


def dead_letter_name(query_id: str) -> str:
    return f"{query_id}_DLQ"


def home_of(query: QueryInfo) -> str:
    """The home directory a query was created under (its checkpoint is home/checkpoints/ID)."""
    return os.path.dirname(os.path.dirname(query.checkpoint))


def dead_letter_source(query: QueryInfo, home: str | None = None) -> SourceInfo:
    """The dead-letter stream of ``query`` as a declared JSON stream in its home."""
    name = dead_letter_name(query.id)
    return SourceInfo(name, "STREAM", list(COLUMNS), {"dead_letter_of": query.id}, "JSON",
                      os.path.join(home or home_of(query), "topics", name))


def append_dead_letters(src: SourceInfo, records: Iterable[BadRecord], name: str | None = None) -> None:
    """Append ``records`` to a dead-letter stream as one file (``name``: write it once)."""
    rows = [{"query_id": r.query_id, "source": r.source, "file": r.file, "line": r.line,
             "raw": r.raw, "error": r.error, "batch_id": r.batch_id, "status": r.status,
             "recorded_at": _iso(r.recorded_at), "handled_by": r.handled_by} for r in records]
    if rows:
        topics.append(src.path, src.format, src.columns, rows, name=name)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t or time.time()))
