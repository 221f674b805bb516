"""How far a query is behind its input, read from its file topics and its checkpoint: the
input files it has not processed (the UI's and the metrics' lag, a caught-up wait, the
caught-up event)."""

from __future__ import annotations

import os

from ..catalog import Catalog, DesiredState, QueryInfo
from ..storage import topics
from ..storage.checkpoints import processed_files


def kafka_sources(catalog: Catalog, query: QueryInfo) -> list[str]:
    """The sources of ``query`` that are Kafka topics (catching up is measured on files)."""
    return [n for n in query.sources if getattr(catalog.source(n), "kafka_topic", None)]


def input_files(catalog: Catalog, query: QueryInfo, as_of: float) -> set[str]:
    """The committed input files of the query's file topics written by ``as_of`` (epoch
    seconds)."""
    wanted: set[str] = set()
    # tables joined as of each batch are read whole each time, never consumed
    static = set(query.plan.static_tables)
    for name in (n for n in query.sources if n not in static):
        src = catalog.source(name)
        if src is not None:
            # a query over tables reads their changelogs' files (runtime/tables.py)
            files = (
                [os.path.realpath(f) for f in topics.changelog_files(src.path)]
                if src.kind == "TABLE"
                else topics.committed_files(src.path)
            )
            wanted.update(f for f in files if _mtime(f) <= as_of)
    return wanted


def unprocessed_files(catalog: Catalog, query: QueryInfo) -> int:
    """How many committed input files the query has not processed yet (its lag, in files)."""
    return len(input_files(catalog, query, float("inf")) - processed_files(query.checkpoint))


def lag_files(catalog: Catalog, query: QueryInfo) -> int | None:
    """:func:`unprocessed_files`, for a query that may still read (None once terminated)."""
    return None if query.desired_state == DesiredState.TERMINATED else unprocessed_files(catalog, query)


def caught_up_message(query_id: str, files: int) -> str:
    return f"{query_id} caught up ({files} input files processed and committed)"


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:  # compacted away since it was listed: it was processed
        return float("inf")
