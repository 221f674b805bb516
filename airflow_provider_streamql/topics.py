"""File topics: where streams and tables live on disk, and how to read and append to them
without Spark.

A STREAM written by a query is a Spark file-sink directory; only files listed in its
``_spark_metadata`` log are committed. A declared STREAM is a directory of whole files,
each written to a hidden temporary name and renamed into place, so a reader never sees
half a file. A TABLE is an upsert changelog: entries sorted by name, the latest row per
key wins.
"""
from __future__ import annotations

import csv
import io
import json
import os
import time
import uuid
from typing import Any, Iterable
from urllib.parse import unquote, urlparse

from .errors import ValidationError
from .language.statements import Column

# value_format -> (Spark data source name, file suffix)
FORMATS = {"JSON": ("json", ".json"), "CSV": ("csv", ".csv"), "PARQUET": ("parquet", ".parquet")}
INT_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT")
FLOAT_TYPES = ("FLOAT", "DOUBLE")
SINK_LOG = "_spark_metadata"


def is_data_name(name: str) -> bool:
    """Spark's file source skips names starting with ``_`` or ``.``; so do we."""
    return not name.startswith(("_", "."))


def uri_path(uri: str) -> str:
    """``file:///a/b`` (as Spark logs it) -> ``/a/b``."""
    return os.path.realpath(unquote(urlparse(uri).path) if "://" in uri or uri.startswith("file:") else uri)


def read_log(directory: str) -> dict[int, list[dict]]:
    """A Spark metadata log (file sink or file source): batch id -> entries, compactions
    expanded. Each file is ``v1`` followed by one JSON object per line."""
    if not os.path.isdir(directory):
        return {}
    names = [n for n in os.listdir(directory) if is_data_name(n) and n.split(".")[0].isdigit()]
    batches: dict[int, list[dict]] = {}
    compact = max((int(n.split(".")[0]) for n in names if n.endswith(".compact")), default=-1)
    for name in names:
        batch = int(name.split(".")[0])
        if batch < compact or (batch == compact and not name.endswith(".compact")):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            lines = f.read().splitlines()[1:]
        batches[batch] = [json.loads(line) for line in lines if line.strip()]
    return batches


def committed_files(path: str) -> list[str]:
    """Data files of a stream directory a reader may see now, in a stable order."""
    if not os.path.isdir(path):
        return []
    log = os.path.join(path, SINK_LOG)
    if os.path.isdir(log):
        files: dict[str, None] = {}
        for batch in sorted(read_log(log).items()):
            for entry in batch[1]:
                p = uri_path(entry["path"])
                if entry.get("action", "add") == "add":
                    files[p] = None
                else:
                    files.pop(p, None)
        return list(files)
    return sorted(os.path.realpath(os.path.join(path, n)) for n in os.listdir(path)
                  if is_data_name(n) and os.path.isfile(os.path.join(path, n)))


def changelog_entries(path: str) -> list[str]:
    """A table's changelog entries (files or directories), oldest first."""
    if not os.path.isdir(path):
        return []
    return [os.path.join(path, n) for n in sorted(os.listdir(path)) if is_data_name(n)]


def entry_files(entry: str) -> list[str]:
    if os.path.isdir(entry):
        return [os.path.join(entry, n) for n in sorted(os.listdir(entry))
                if is_data_name(n) and os.path.isfile(os.path.join(entry, n))]
    return [entry]


def read_file(path: str, fmt: str, columns: list[Column]) -> list[dict[str, Any]]:
    """Rows of one data file as dicts keyed by the declared column names."""
    if fmt == "PARQUET":
        import pyarrow.parquet as pq
        rows = pq.read_table(path).to_pylist()
    else:
        with open(path, encoding="utf-8", newline="") as f:
            if fmt == "JSON":
                rows = [json.loads(line) for line in f if line.strip()]
            else:
                reader = csv.reader(f)
                next(reader, None)  # header; columns are positional, as Spark reads them
                rows = [{c.name: _from_text(v, c.type) for c, v in zip(columns, record)}
                        for record in reader]
    by_lower = {c.name.lower(): c.name for c in columns}
    return [{c.name: None for c in columns} | {by_lower.get(k.lower(), k): v for k, v in row.items()}
            for row in rows]


def read_stream(path: str, fmt: str, columns: list[Column]) -> list[dict[str, Any]]:
    return [row for f in committed_files(path) for row in read_file(f, fmt, columns)]


def read_table(path: str, fmt: str, columns: list[Column], keys: list[str]) -> list[dict[str, Any]]:
    """The latest row per key of a changelog."""
    latest: dict[tuple, dict[str, Any]] = {}
    for entry in changelog_entries(path):
        for f in entry_files(entry):
            for row in read_file(f, fmt, columns):
                latest[tuple(row.get(k) for k in keys)] = row
    return list(latest.values())


def coerce(value: Any, column: Column) -> Any:
    """A literal as a value of the column's type; ValidationError naming both if it is not."""
    if value is None:
        return None
    t = column.type.upper()
    bad = ValidationError(f"value {value!r} does not fit column {column.name!r} of type {column.type}")
    if t in INT_TYPES:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise bad
        return int(value)
    if t in FLOAT_TYPES or t.startswith("DECIMAL"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if t == "BOOLEAN":
        if not isinstance(value, bool):
            raise bad
        return value
    if t == "STRING" or t.startswith(("VARCHAR", "CHAR")):
        if not isinstance(value, str):
            raise bad
        return value
    if t in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        if not isinstance(value, str):
            raise bad
        return value
    raise ValidationError(f"INSERT VALUES does not support column {column.name!r} of type {column.type}")


def append(path: str, fmt: str, columns: list[Column], rows: Iterable[dict[str, Any]],
           name: str | None = None) -> str:
    """Write ``rows`` as one new file in ``path``: to a hidden name, then renamed into place.
    With ``name``, a file of that name already there means it was written: nothing is."""
    os.makedirs(path, exist_ok=True)
    if name is not None:
        name += FORMATS[fmt][1]
        if os.path.exists(os.path.join(path, name)):
            return os.path.join(path, name)
    else:
        name = f"i{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{FORMATS[fmt][1]}"
    tmp = os.path.join(path, f".{name}.tmp")
    rows = list(rows)
    if fmt == "PARQUET":
        import pyarrow as pa
        import pyarrow.parquet as pq
        schema = pa.schema([(c.name, _arrow_type(c.type)) for c in columns])
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    else:
        buffer = io.StringIO()
        if fmt == "JSON":
            for row in rows:
                buffer.write(json.dumps(row) + "\n")
        else:
            writer = csv.writer(buffer)
            writer.writerow([c.name for c in columns])
            for row in rows:
                writer.writerow(["" if row.get(c.name) is None else _to_text(row[c.name]) for c in columns])
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(buffer.getvalue())
            f.flush()
            os.fsync(f.fileno())
    os.rename(tmp, os.path.join(path, name))
    return os.path.join(path, name)


def _to_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _from_text(text: str, spark_type: str) -> Any:
    t = spark_type.upper()
    if text == "":
        return None
    if t in INT_TYPES:
        return int(text)
    if t in FLOAT_TYPES or t.startswith("DECIMAL"):
        return float(text)
    if t == "BOOLEAN":
        return text.lower() == "true"
    return text


def _arrow_type(spark_type: str):
    import pyarrow as pa
    table = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64(),
             "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "STRING": pa.string(),
             "BOOLEAN": pa.bool_(), "DATE": pa.string(), "TIMESTAMP": pa.string()}
    t = spark_type.upper()
    if t.startswith("DECIMAL"):
        return pa.float64()
    if t not in table:
        raise ValidationError(f"INSERT VALUES into PARQUET does not support type {spark_type}")
    return table[t]
