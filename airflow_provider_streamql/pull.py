"""Pull queries: evaluate a SELECT over what a stream or table holds now, without Spark.

Rows come from committed files only (see :mod:`.topics`); sqlglot's Python executor
evaluates the SELECT, so a pull query answers in milliseconds from any process.
"""
from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.errors import ExecuteError

from . import topics
from .catalog import SourceInfo
from .errors import ValidationError
from .language.analyzer import SelectAnalysis
from .language.dialect import DIALECT


def source_rows(src: SourceInfo) -> list[dict[str, Any]]:
    """What ``src`` holds now: every committed record of a stream, the latest row per key of a table."""
    if src.kind == "TABLE":
        return topics.read_table(src.path, src.format, src.columns, src.key_columns)
    return topics.read_stream(src.path, src.format, src.columns)


def run_pull_query(select: exp.Select, sources: dict[str, SourceInfo],
                   analysis: SelectAnalysis) -> tuple[list[str], list[list[Any]]]:
    from sqlglot.executor import execute

    tables = {name: source_rows(src) for name, src in sources.items()}
    schema = {name: {c.name: c.type for c in src.columns} for name, src in sources.items()}
    try:
        table = execute(select.sql(dialect=DIALECT), schema=schema, dialect=DIALECT, tables=tables)
    except ExecuteError as e:
        raise ValidationError(f"pull query failed: {e}") from None
    return [c.name for c in analysis.columns], [list(r) for r in table.rows]
