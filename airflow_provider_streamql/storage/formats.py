"""The value formats of file topics: how a source's records are laid out in its files.

``JSON`` (one object per line), ``CSV`` (a header line, then positional fields),
``DELIMITED`` (ksqlDB's: positional fields, no header, separated by the source's
``value_delimiter``) and ``PARQUET``. Spark reads and writes CSV and DELIMITED with its CSV
source (:data:`TEXT_FORMATS`), which holds no nested values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..language.statements import Column

# value_format -> (Spark data source name, file suffix). DELIMITED is ksqlDB's: CSV without
# a header line, fields separated by the source's value_delimiter (',' unless given)
FORMATS = {
    "JSON": ("json", ".json"),
    "CSV": ("csv", ".csv"),
    "DELIMITED": ("csv", ".csv"),
    "PARQUET": ("parquet", ".parquet"),
}
#: formats read and written by Spark's CSV source: positional fields, text values
TEXT_FORMATS = ("CSV", "DELIMITED")
#: ksqlDB's names for value_delimiter characters that are awkward to quote
DELIMITER_NAMES = {"TAB": "\t", "SPACE": " "}
#: types a CSV or DELIMITED field cannot hold: Spark's CSV source refuses nested types
#: (UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE) and reads BINARY as the raw text, not base64
NOT_IN_TEXT = ("STRUCT", "ARRAY", "MAP", "BINARY")


def delimiter_problem(value: Any) -> str | None:
    """Why ``value`` is not a value_delimiter (None when it is one)."""
    if isinstance(value, str) and (len(value) == 1 or value.upper() in DELIMITER_NAMES):
        if value not in ('"', "\n", "\r"):
            return None
    return f"must be one character (not a quote or a line break), or {' or '.join(DELIMITER_NAMES)}"


def value_delimiter(properties: dict[str, Any]) -> str:
    """The field separator of a DELIMITED source (``WITH (value_delimiter=...)``), ',' unless given."""
    value = str(properties.get("value_delimiter", ","))
    return DELIMITER_NAMES.get(value.upper(), value)


def format_problem(fmt: str, columns: Iterable[Column]) -> str | None:
    """Why ``columns`` cannot be held in ``fmt`` (None when they can)."""
    if fmt not in TEXT_FORMATS:
        return None
    for c in columns:
        if c.type.upper().startswith(NOT_IN_TEXT):
            return (
                f"{fmt} values cannot hold column {c.name!r} of type {c.type}: Spark's CSV source reads "
                f"no STRUCT, ARRAY or MAP fields, and no base64 BYTES (use value_format='JSON')"
            )
    return None
