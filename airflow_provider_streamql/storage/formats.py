"""The value formats of file topics: how a source's records are laid out in its files.

``JSON`` (one object per line), ``CSV`` (a header line, then positional fields),
``DELIMITED`` (ksqlDB's: positional fields, no header, separated by the source's
``value_delimiter``) and ``PARQUET``. Spark reads and writes CSV and DELIMITED with its CSV
source (:data:`TEXT_FORMATS`), which holds no nested values.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import IO, Any

from ..language.statements import Column
from ..language.types import SqlType, TypeName

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
NOT_IN_TEXT = (TypeName.STRUCT, TypeName.ARRAY, TypeName.MAP, TypeName.BINARY)


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
        if c.type.name in NOT_IN_TEXT:
            return (
                f"{fmt} values cannot hold column {c.name!r} of type {c.type}: Spark's CSV source reads "
                f"no STRUCT, ARRAY or MAP fields, and no base64 BYTES (use value_format='JSON')"
            )
    return None


def read_text(f: IO[str], fmt: str, columns: list[Column], delimiter: str = ",") -> list[dict[str, Any]]:
    """The records of a JSON, CSV or DELIMITED file as dicts (CSV and DELIMITED fields are
    positional, as Spark reads them; a CSV file's header line is skipped)."""
    if fmt == "JSON":
        return [json.loads(line) for line in f if line.strip()]
    reader = csv.reader(f, delimiter=delimiter if fmt == "DELIMITED" else ",")
    if fmt == "CSV":
        next(reader, None)
    return [{c.name: _from_text(v, c.type) for c, v in zip(columns, record, strict=False)} for record in reader]


def write_text(rows: Iterable[dict[str, Any]], fmt: str, columns: list[Column], delimiter: str = ",") -> str:
    """``rows`` as the text of a JSON, CSV (with a header line) or DELIMITED file."""
    buffer = io.StringIO()
    if fmt == "JSON":
        for row in rows:
            buffer.write(json.dumps(row) + "\n")
        return buffer.getvalue()
    writer = csv.writer(buffer, delimiter=delimiter if fmt == "DELIMITED" else ",")
    if fmt == "CSV":
        writer.writerow([c.name for c in columns])
    for row in rows:
        writer.writerow(["" if row.get(c.name) is None else _to_text(row[c.name]) for c in columns])
    return buffer.getvalue()


def _to_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _from_text(text: str, t: SqlType) -> Any:
    if text == "":
        return None
    if t.is_integer:
        return int(text)
    if t.is_float or t.is_decimal:
        return float(text)
    if t.name is TypeName.BOOLEAN:
        return text.lower() == "true"
    return text
