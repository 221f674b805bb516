"""What a persistent query's statement becomes, given its sources and its sink: the plan a
runtime runs and the shape the CREATE OR REPLACE validator compares. The planner derives
them for every new query or version; a catalog migration derives them for queries an older
streamql recorded without them."""

from __future__ import annotations

from typing import Any

from ..language.analyzer import SelectAnalysis
from ..language.streaming import StreamingPlan, plan_streaming
from ..language.tables import passed_keys
from .model import SourceInfo


def derive_query(
    stmt,
    analysis: SelectAnalysis,
    query_id: str,
    kind: str,
    sources: dict[str, SourceInfo],
    sink: SourceInfo,
    *,
    default_grace: float | None = None,
    named: bool = False,
) -> tuple[StreamingPlan, dict[str, Any]]:
    """(plan, shape) of ``stmt`` (its SELECT analysed as ``analysis``) run as ``query_id``;
    ``default_grace`` as :func:`plan_streaming` takes it. ``named``: the streams are named for
    Spark's source evolution (:func:`source_names`)."""
    # a query over tables reads each one's changelog as a stream; a stream's query joins
    # tables as they are at each micro-batch
    over_tables = sources[analysis.sources[0]].kind == "TABLE"
    static = set() if over_tables else {n for n in analysis.sources if sources[n].kind == "TABLE"}
    plan = plan_streaming(
        stmt.select,
        stmt,
        analysis,
        query_id,
        kind=kind,
        timestamps={n: sources[n].timestamp_column for n in analysis.sources},
        tables=static,
        schemas={n: sources[n].columns for n in analysis.sources},
        over_tables=over_tables,
        default_grace=default_grace,
    )
    if over_tables:
        plan.table_query = "recompute" if analysis.aggregate or analysis.joins else "changes"
        if plan.table_query == "changes":
            plan.table_keys = passed_keys(analysis, sources[analysis.sources[0]].key_columns)
    streams = [n for n in analysis.sources if n not in static]
    if named and not over_tables:
        plan.source_names = source_names(streams)
    plain = kind == "CSAS" and not static and not sink.batch_files
    writer = ("kafka sink" if sink.kafka_topic else "file sink") if plain else "batch files"
    shape = {
        **analysis.shape,
        "kind": kind,
        "sink": {"path": sink.path, "format": sink.format, "writer": writer},
        "streams": streams,
        "grace": plan.grace_by_source(),
    }
    if over_tables:  # a query over tables reads changelogs, not streams: none to add or drop
        shape["branches"] = None
    return plan, shape


def source_names(streams: list[str]) -> dict[str, str]:
    """Stream -> its Spark source name: the stream's name (a plain name, checked by the
    grammar), lower-case. Stable: the same stream keeps its position in the checkpoint
    whatever else a later version reads."""
    return {name: name.lower() for name in streams}
