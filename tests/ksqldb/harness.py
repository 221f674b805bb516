"""The shape of a ksqlDB compatibility case, and the world a module of cases runs in.

A case module (``tests/ksqldb/cases_<area>.py``) defines:

- ``SOURCES``: the declarations its cases read (names unique across modules: prefix them),
- ``RECORDS`` (optional): source name -> lines of one file written into its topic as a
  producer would (for values INSERT VALUES cannot spell: STRUCT, ARRAY, MAP, raw text),
- ``INPUTS``: the statements that feed them (``INSERT INTO ... VALUES``), run before any
  query starts, so every query sees the whole input,
- ``CASES``: one :class:`Case` per ksqlDB statement, with the output it must give.

All queries of a module run in one runtime; each case checks its own output afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def minute(m: int) -> str:
    """The window bound 2024-01-01 00:0<m>, as a pull query shows it (the cases' windows)."""
    return f"2024-01-01T00:{m:02d}:00.000Z"


@dataclass(frozen=True)
class Case:
    """One ksqlDB statement and what streamql must make of it.

    ``item``: the number of the capability in docs/ksqldb.md. ``sql``: the statement(s), as a
    ksqlDB user writes them. ``output``: the stream or table to read once the queries caught
    up (None: the case checks only that the statement is accepted or refused). ``rows``: the
    rows a pull query of ``output`` returns, in any order. ``refused``: a fragment of the error
    when the statement is refused on purpose (Spark cannot run it; the error says why).
    ``columns``: the output's column names, when the case is about naming."""

    item: int
    name: str
    sql: str
    output: str | None = None
    rows: list[tuple] = field(default_factory=list)
    refused: str | None = None
    columns: list[str] | None = None

    def __post_init__(self) -> None:
        if self.refused is None and self.output is None:
            raise ValueError(f"case {self.name!r} checks nothing: give output (and rows) or refused")


def normalised(rows: list[Any]) -> list[tuple]:
    """Rows in a stable order, comparable across runs (None sorts first)."""
    return sorted((tuple(r) for r in rows), key=lambda r: [(v is not None, str(v)) for v in r])
