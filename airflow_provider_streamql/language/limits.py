"""Bounds on the work and memory one statement may take (DESIGN.md section 6: one cheap
statement must not take the house down).

:class:`Limits` holds every bound with its default; an operator changes them with
``STREAMQL_MAX_<NAME>`` environment variables (read by :meth:`Limits.from_env`, the one place
they are read) or ``Engine(limits=Limits(...))``. A statement over a bound is refused with an
error naming the bound, the value found and how to raise it (:meth:`Limits.exceeded`);
docs/operations.md (Security) lists them. The language checks text and expression sizes
(:mod:`.parser`), the planner windows (:mod:`..planner.feasibility`), and the private DuckDB of
pull queries and INSERT VALUES the rest (:mod:`..storage.sandbox`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import StreamQLError

#: characters of one statement: statements are kept whole in the command log, and a
#: generated deploy statement is a few KB; 1,000,000 leaves room for very wide schemas and
#: long IN lists and stops a statement that is mostly data (tokenizing costs ~1 s per MB)
STATEMENT_CHARS = 1_000_000
#: characters of a whole script (one `exec`, one deploy file): tokenizing 10 MB takes several
#: seconds on a 2-core machine, and a seed script of tens of thousands of INSERTs still fits
SCRIPT_CHARS = 10_000_000
#: nodes of one SELECT's expression tree (or of one INSERT's values): sqlglot's qualify step is
#: quadratic in them; 10,000 nodes (a chain of ~3,300 terms, a SELECT of ~1,600 computed
#: columns) plan in a few seconds, and the 10,000-term expression that took 50 s has 30,000
EXPRESSION_NODES = 10_000
#: bytes of one value INSERT VALUES writes and of one value a function builds (RPAD, REPEAT,
#: SEQUENCE, ...): Kafka's default largest message (message.max.bytes) is 1 MB, so a record
#: of such values can also be produced to a topic
VALUE_BYTES = 1 << 20
#: bytes of one record INSERT VALUES writes (as JSON): Kafka's default largest message again
ROW_BYTES = 1 << 20
#: rows a pull query returns: results go to a terminal, XCom or the UI, all of which show
#: far fewer; a pull query that needs the first rows of a larger answer says LIMIT
PULL_ROWS = 100_000
#: bytes of a pull query's result (Arrow, before it becomes Python values, which take ~5x):
#: the largest XCom value worth keeping in Airflow's metadata database
PULL_BYTES = 64 << 20
#: DuckDB's memory_limit for one pull query or INSERT VALUES (its tables, sorts, joins and
#: aggregations; nothing spills to disk): an Airflow worker or the UI runs many at once
PULL_MEMORY_BYTES = 1 << 30
#: DuckDB's threads for one pull query: the machines that run them (workers, the UI's
#: api-server) serve other work; two keep a scan fast without taking a whole host
PULL_THREADS = 2
#: seconds a pull query (or the evaluation of INSERT VALUES) may run before it is cancelled:
#: callers wait for it (a CLI user, an Airflow task, a click in the UI)
PULL_SECONDS = 30.0
#: windows one record falls in (a hopping window's SIZE / ADVANCE BY): Spark plans one
#: projection per window (its Expand operator) and updates as many state rows per record.
#: Measured on a 1 GiB driver: SIZE 1 DAY, ADVANCE BY 1 MINUTE (1,440) runs; ADVANCE BY 10
#: SECONDS (8,640) and 1 MILLISECOND (86,400,000) took the driver out of memory
WINDOWS_PER_RECORD = 2000
#: environment variables start with this, then the field's name in capitals
ENV_PREFIX = "STREAMQL_MAX_"


@dataclass(frozen=True)
class Limits:
    """Every bound on one statement (see the constants above for why each default)."""

    statement_chars: int = STATEMENT_CHARS
    script_chars: int = SCRIPT_CHARS
    expression_nodes: int = EXPRESSION_NODES
    value_bytes: int = VALUE_BYTES
    row_bytes: int = ROW_BYTES
    pull_rows: int = PULL_ROWS
    pull_bytes: int = PULL_BYTES
    pull_memory_bytes: int = PULL_MEMORY_BYTES
    pull_threads: int = PULL_THREADS
    pull_seconds: float = PULL_SECONDS
    windows_per_record: int = WINDOWS_PER_RECORD

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            whole = f.type in (int, "int")
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or (whole and not isinstance(value, int))
                or not math.isfinite(value)
                or value <= 0
            ):
                raise StreamQLError(f"limit {f.name} = {value!r} must be a positive {'whole ' if whole else ''}number")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, with each ``STREAMQL_MAX_<NAME>`` that is set in place of its default."""
        environ = os.environ if environ is None else environ
        given: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = ENV_PREFIX + f.name.upper()
            raw = environ.get(name)
            if raw is None or not raw.strip():
                continue
            try:
                given[f.name] = int(raw) if f.type in (int, "int") else float(raw)
            except ValueError:
                raise StreamQLError(f"{name} = {raw!r} is not a number") from None
        try:
            return cls(**given)
        except StreamQLError as e:
            raise StreamQLError(f"{e.message} (set by {ENV_PREFIX}...)") from None

    def exceeded(self, name: str, found: str) -> str:
        """The message of a statement over limit ``name``: what was found (``found``), the
        limit, and how to raise it."""
        value = getattr(self, name)
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        return (
            f"{found}, more than the limit {name} = {shown} "
            f"(raise it with {ENV_PREFIX}{name.upper()} or Engine(limits=Limits({name}=...)))"
        )


def current(limits: Limits | None) -> Limits:
    """``limits``, or the defaults with the environment's settings."""
    return limits if limits is not None else Limits.from_env()
