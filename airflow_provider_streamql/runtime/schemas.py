"""How a source's records are read on the Spark side: the declared columns as a DDL schema,
the reader options of each format, and the two columns that tell a bad record apart (the
text Spark could not parse and where the record comes from).

The file connector (:mod:`.connectors`), the Kafka connector (:mod:`.kafka`) and the
bad-record guard (:mod:`.badrecords`) all read records this way; they import it, never one
another for it, so their imports form a tree with this module at its root.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..catalog import SourceInfo
from ..storage.topics import value_delimiter

if TYPE_CHECKING:
    from ..language.statements import Column

#: the column holding a record's text when Spark cannot parse it (PERMISSIVE mode)
CORRUPT = "_corrupt_record"
#: the column holding where a record comes from: its file, or kafka:topic/partition@offset
FILE = "__sq_file"
#: formats whose records are checked one by one (a PARQUET file Spark cannot read fails the query)
CHECKED_FORMATS = ("JSON", "CSV", "DELIMITED")
#: format -> extra reader/writer options (DELIMITED adds its separator, :func:`format_options`)
FORMAT_OPTIONS = {"JSON": {}, "CSV": {"header": "true"}, "DELIMITED": {"header": "false"}, "PARQUET": {}}


def checked(src: SourceInfo) -> bool:
    """Whether ``src``'s records are checked one by one for bad records."""
    return src.format in CHECKED_FORMATS


def ddl_schema(columns: Iterable[Column], *, corrupt: bool = False) -> str:
    """``columns`` as a DDL schema; ``corrupt``: with the corrupt-record column last."""
    ddl = ", ".join(f"`{c.name}` {c.type}" for c in columns)
    return ddl + (f", `{CORRUPT}` STRING" if corrupt else "")


def format_options(src: SourceInfo) -> dict[str, str]:
    """The options reading and writing ``src``'s files take: a CSV header; a DELIMITED
    source's separator."""
    options = dict(FORMAT_OPTIONS[src.format])
    if src.format == "DELIMITED":
        options["sep"] = value_delimiter(src.properties)
    return options


def reader_options(src: SourceInfo) -> dict[str, str]:
    """The options reading ``src``'s files takes (a CSV header, a timestamp format)."""
    options = format_options(src)
    if src.properties.get("timestamp_format"):
        options["timestampFormat"] = src.properties["timestamp_format"]
    return options


def parse_options(src: SourceInfo, *, fail_fast: bool = False) -> dict[str, str]:
    """For a checked source: keep a record Spark cannot parse, its text in :data:`CORRUPT`;
    ``fail_fast``: fail the read at the first such record instead (no :data:`CORRUPT`)."""
    if not checked(src):
        return {}
    return {"mode": "FAILFAST"} if fail_fast else {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
