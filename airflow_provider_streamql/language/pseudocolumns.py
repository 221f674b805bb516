"""ksqlDB's pseudo-columns ROWTIME and ROWKEY, resolved on the SELECT's tree into the
columns they stand for, before the query is analysed and planned.

- ``ROWTIME``: the record's time as BIGINT epoch milliseconds (ksqlDB's type), here
  ``unix_millis(<the source's timestamp column>)``. A source without ``timestamp=`` has no
  record time: its files carry none Spark reads for each record, so ROWTIME is refused
  rather than made up from processing time.
- ``ROWKEY``: the source's single ``KEY`` / ``PRIMARY KEY`` column.

A real column of that name wins. A bare pseudo-column in the SELECT list keeps its name
(``unix_millis(ts) AS ROWTIME``). Over a join, write ``o.ROWTIME``: unqualified it is
ambiguous. WINDOWSTART and WINDOWEND are handled by the analyzer and the streaming plan
(:mod:`.streaming`): they are the window of a windowed aggregation, and real columns of the
table it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from .statements import Column

#: the column a source whose event time is text gets, holding that time parsed (the plan's
#: watermark and windows use it; the declared column stays text, as in ksqlDB)
EVENT_TIME = "__sq_event_time"


@dataclass(frozen=True)
class TextTime:
    """An event-time column declared as text (ksqlDB's VARCHAR with ``timestamp_format``),
    with the Spark datetime pattern its values are written in."""

    column: str
    pattern: str

    def parsed(self, qualifier: str | None = None) -> exp.Expr:
        """The column's value as a TIMESTAMP: ``to_timestamp(column, pattern)``, the call the
        runtime parses the event time with, the pattern as written (a pull query renders it
        for DuckDB through :mod:`.duckdb_calls`)."""
        column = exp.column(self.column, table=qualifier, quoted=True)
        return exp.Anonymous(this="to_timestamp", expressions=[column, exp.Literal.string(self.pattern)])


#: a source's event time: its TIMESTAMP column's name, a column of text, or none
EventTime = str | TextTime | None

PSEUDO_COLUMNS = ("ROWTIME", "ROWKEY")
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")


def resolve_pseudo_columns(
    select: exp.Select,
    schemas: dict[str, list[Column]],
    timestamps: dict[str, EventTime],
    error: Callable[[str, exp.Expr], Exception],
) -> None:
    """Replace ROWTIME and ROWKEY in ``select`` (in place) with what they stand for.
    ``timestamps``: upper-case source name -> its event-time column (None: it has none);
    ``error(message, node)`` makes the exception to raise."""
    tables = {t.alias_or_name.lower(): t.name.upper() for t in select.find_all(exp.Table) if t.name.upper() in schemas}
    sources = list(dict.fromkeys(tables.values()))
    for column in list(select.find_all(exp.Column)):
        word = column.name.upper()
        if word not in PSEUDO_COLUMNS or column.find_ancestor(exp.Subquery, exp.CTE) is not None:
            continue
        if column.table:
            source = tables.get(column.table.lower())
            if source is None:
                continue  # not one of the sources: the analyzer names the unknown qualifier
        elif len(sources) == 1:
            source = sources[0]
        else:
            raise error(f"{word} is ambiguous in a join: qualify it with the source (o.{word})", column)
        if any(c.name.upper() == word for c in schemas[source]):
            continue  # a real column of that name
        qualifier = column.table or None
        if word == "ROWTIME":
            ts = timestamps.get(source)
            if ts is None:
                raise error(
                    f"ROWTIME is the record's event time, and {source} has no timestamp column: declare "
                    f"WITH (timestamp='<column>'); the ingestion time of a record is not kept",
                    column,
                )
            if isinstance(ts, TextTime):
                time = ts.parsed(qualifier)
            else:
                time = exp.column(ts, table=qualifier, quoted=True)
            value: exp.Expr = exp.UnixMillis(this=time)
        else:
            keys = [c.name for c in schemas[source] if c.key and c.name.upper() not in WINDOW_BOUNDS]
            if len(keys) != 1:
                found = f"its key is {', '.join(keys)}" if keys else "it has no KEY column"
                raise error(f"ROWKEY is the single KEY column of the source, and {found} in {source}", column)
            value = exp.column(keys[0], table=qualifier, quoted=True)
        if column.parent is select and column.arg_key == "expressions":
            value = exp.alias_(value, word, quoted=False)
        column.replace(value)
