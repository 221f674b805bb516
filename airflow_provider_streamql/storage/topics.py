"""File topics: where streams and tables live on disk, and how to read and append to them
without Spark.

A STREAM written by a query is a Spark file-sink directory; only files listed in its
``_spark_metadata`` log are committed. A declared STREAM is a directory of whole files,
each written to a hidden temporary name and renamed into place, so a reader never sees
half a file. A TABLE is an upsert changelog: entries sorted by name, the latest row per
key wins. A key whose latest change is a tombstone (a row of a tombstone file, see
:data:`TOMBSTONES`) is deleted.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
import os
import re
import time
import uuid
from collections.abc import Iterable
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..language.statements import Column
from ..language.types import SqlType, TypeName
from .formats import (  # noqa: F401 (the format table and helpers, as topics.* for callers)
    FORMATS,
    TEXT_FORMATS,
    delimiter_problem,
    format_problem,
    read_text,
    value_delimiter,
    write_text,
)
from .layout import Part
from .logs import SINK_LOG, is_data_name, read_log, sink_file, uri_path  # noqa: F401 (as topics.*)

if TYPE_CHECKING:
    from ..catalog import SourceInfo


def committed_files(path: str) -> list[str]:
    """Data files of a stream directory a reader may see now, in a stable order (real paths,
    each checked to lie in the directory: see :class:`.layout.Part`)."""
    part = Part(path)
    if not os.path.isdir(path):
        return []
    log = os.path.join(path, SINK_LOG)
    if os.path.isdir(log):
        files: dict[str, None] = {}
        for batch in sorted(read_log(log, part).items()):
            for entry in batch[1]:
                p = sink_file(entry["path"], part)
                if entry.get("action", "add") == "add":
                    files[p] = None
                else:
                    files.pop(p, None)
        return list(files)
    return sorted(
        part.resolve(os.path.join(path, n))
        for n in os.listdir(path)
        if is_data_name(n) and os.path.isfile(os.path.join(path, n))
    )


def changelog_entries(path: str) -> list[str]:
    """A table's changelog entries (files or directories), oldest first."""
    if not os.path.isdir(Part(path).folder):
        return []
    return [os.path.join(path, n) for n in sorted(os.listdir(path)) if is_data_name(n)]


#: A changelog data file whose name, less its format suffix, ends in ``.tombstones``
#: (``deleted.tombstones.json``) holds tombstones: each of its rows deletes its key. It is
#: written in the table's format with the table's columns, the non-key ones NULL, so every
#: reader reads it as it reads rows and only the file name tells the two apart. One entry
#: never changes a key twice, so the order of an entry's files does not matter.
TOMBSTONES = ".tombstones"
#: the name of a tombstone file, as a regular expression (Spark's ``rlike`` takes it too)
TOMBSTONE_NAME = re.escape(TOMBSTONES) + r"\.[^./]*$"


def is_tombstones(path: str) -> bool:
    """Whether a changelog data file holds tombstones (deleted keys) rather than rows."""
    return re.search(TOMBSTONE_NAME, os.path.basename(path)) is not None


#: value formats whose files hold one record a line, and the header lines of each
LINE_FORMATS = {"JSON": 0, "DELIMITED": 0, "CSV": 1}


def record_count(path: str, value_format: str) -> int | None:
    """The records in a committed data file (None for a format not written a record a
    line: PARQUET). A committed file never changes, so each is counted once."""
    if value_format not in LINE_FORMATS:
        return None
    try:
        found = os.stat(path)
    except FileNotFoundError:  # compacted away since it was listed
        return 0
    if not S_ISREG(found.st_mode):  # a pipe or device left in a topic: never opened (it would block)
        return None
    return max(0, _lines(path, found.st_size, found.st_mtime_ns) - LINE_FORMATS[value_format])


@functools.lru_cache(maxsize=4096)
def _lines(path: str, size: int, mtime_ns: int) -> int:
    lines, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            lines, last = lines + chunk.count(b"\n"), chunk[-1:]
    return lines + (last != b"\n")  # a last line with no newline is a record too


def changelog_files(path: str) -> list[str]:
    """Every data file of a table's changelog, tombstone files included, oldest first (real
    paths, each checked to lie in the table's folder)."""
    part = Part(path)
    return [f for entry in changelog_entries(path) for f in entry_files(entry, part)]


def data_files(src: SourceInfo) -> list[str]:
    """The files a reader of ``src`` may see now, oldest first (a table's later rows win)."""
    if src.kafka_topic:
        return []  # read through a Kafka client (.topic_tables)
    if src.kind == "TABLE":
        return changelog_files(src.path)
    return committed_files(src.path)


def entry_files(entry: str, part: Part) -> list[str]:
    """The data files of one changelog entry (a file, or a folder of files) of ``part``."""
    entry = part.resolve(entry)
    if os.path.isdir(entry):
        return [
            part.resolve(os.path.join(entry, n))
            for n in sorted(os.listdir(entry))
            if is_data_name(n) and os.path.isfile(os.path.join(entry, n))
        ]
    return [entry]


def read_file(path: str, fmt: str, columns: list[Column], *, delimiter: str = ",") -> list[dict[str, Any]]:
    """Rows of one data file as dicts keyed by the declared column names (a DELIMITED file's
    fields separated by ``delimiter``)."""
    if fmt == "PARQUET":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        with open(path, encoding="utf-8", newline="") as f:
            rows = read_text(f, fmt, columns, delimiter)
    by_lower = {c.name.lower(): c.name for c in columns}
    return [{c.name: None for c in columns} | {by_lower.get(k.lower(), k): v for k, v in row.items()} for row in rows]


def read_stream(path: str, fmt: str, columns: list[Column]) -> list[dict[str, Any]]:
    return [row for f in committed_files(path) for row in read_file(f, fmt, columns)]


def read_changelog(path: str, fmt: str, columns: list[Column]) -> list[tuple[dict[str, Any], bool]]:
    """Every change of a table, oldest first: (row, whether it is a tombstone)."""
    return [(row, is_tombstones(f)) for f in changelog_files(path) for row in read_file(f, fmt, columns)]


def read_table(path: str, fmt: str, columns: list[Column], keys: list[str]) -> list[dict[str, Any]]:
    """The latest row per key of a changelog; a key whose latest change is a tombstone is gone."""
    latest: dict[tuple, dict[str, Any]] = {}
    for row, deleted in read_changelog(path, fmt, columns):
        key = tuple(row.get(k) for k in keys)
        if deleted:
            latest.pop(key, None)
        else:
            latest[key] = row
    return list(latest.values())


#: the whole-number types: (smallest, largest) value, two's complement as Spark holds them
INT_RANGES = {
    TypeName.TINYINT: (-(2**7), 2**7 - 1),
    TypeName.SMALLINT: (-(2**15), 2**15 - 1),
    TypeName.INT: (-(2**31), 2**31 - 1),
    TypeName.BIGINT: (-(2**63), 2**63 - 1),
}
#: largest finite value of each floating type (FLOAT is 32-bit: larger values read as Infinity)
FLOAT_MAX = {TypeName.FLOAT: 3.4028234663852886e38, TypeName.DOUBLE: 1.7976931348623157e308}
DATE_TEXT = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
#: what Spark's JSON and CSV readers take as a TIMESTAMP without a timestampFormat: ISO 8601
#: dates, date-times with a space or 'T', an optional fraction and an optional Z or offset
TIMESTAMP_TEXT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?"
    r"(?:Z|[+-](\d{2})(?::?(\d{2}))?)?)?"
)
TIMESTAMP_EXPECTED = "yyyy-MM-dd HH:mm:ss[.SSS]"


class SparkPattern:
    """A Spark datetime pattern (``timestamp_format``) as a check of a value's text: its
    shape as a regular expression, then ``strptime`` for real dates and times."""

    #: pattern letters -> (strptime directive, the text they match)
    LETTERS = {
        "yyyy": ("%Y", r"\d{4}"),
        "MM": ("%m", r"\d{2}"),
        "dd": ("%d", r"\d{2}"),
        "HH": ("%H", r"\d{2}"),
        "mm": ("%M", r"\d{2}"),
        "ss": ("%S", r"\d{2}"),
        "SSS": ("%f", r"\d{3}"),
    }
    #: a run of one pattern letter, a quoted literal ('T', '' for a quote), or one other character
    PART = re.compile(r"([A-Za-z])\1*|'(?:[^']|'')*'|.", re.S)

    def __init__(self, pattern: str):
        self.pattern = pattern
        shape, directives = [], []
        for part in self.PART.finditer(pattern):
            text = part.group()
            if text[0].isalpha():
                if text not in self.LETTERS:
                    raise ValidationError(
                        f"cannot check values against timestamp_format {pattern!r}: pattern "
                        f"letters {text!r} are not supported (supported: {', '.join(self.LETTERS)})"
                    )
                directive, matches = self.LETTERS[text]
                directives.append(directive)
                shape.append(matches)
            else:
                literal = text[1:-1].replace("''", "'") if text.startswith("'") and len(text) > 1 else text
                directives.append(literal.replace("%", "%%"))
                shape.append(re.escape(literal))
        self.shape = re.compile("".join(shape))
        self.strptime = "".join(directives)

    def matches(self, value: str) -> bool:
        if self.shape.fullmatch(value) is None:
            return False
        try:
            datetime.datetime.strptime(value, self.strptime)
        except ValueError:
            return False
        return True


@functools.lru_cache(maxsize=64)
def spark_pattern(pattern: str) -> SparkPattern:
    return SparkPattern(pattern)


def coerce(value: Any, column: Column, *, timestamp_format: str | None = None) -> Any:
    """A literal as a value of the column's type; ValidationError naming both if it is not.

    Numbers must fit the type's range (DECIMAL: its precision); DATE values must be real
    dates written ``yyyy-MM-dd``, TIMESTAMP values real timestamps in a form Spark's readers
    take (ISO 8601, or ``timestamp_format`` when the source declares one). Dates and
    timestamps are stored as given: Spark reads them.
    """
    if value is None:
        return None
    t = column.type

    def bad(expected: str | None = None) -> ValidationError:
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        return ValidationError(
            f"value {shown!r} does not fit column {column.name!r} of type "
            f"{column.type}" + (f" (expected {expected})" if expected else "")
        )

    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if t.is_integer:
        low, high = INT_RANGES[t.name]
        expected = f"a whole number from {low} to {high}"
        if not is_number or (isinstance(value, float) and not value.is_integer()):
            raise bad(expected)
        if not low <= value <= high:
            raise bad(expected)
        return int(value)
    if t.is_float:
        if not is_number or not math.isfinite(value) or abs(value) > FLOAT_MAX[t.name]:
            raise bad(f"a finite number of at most {FLOAT_MAX[t.name]:g} in magnitude")
        return float(value)
    if t.is_decimal:
        precision, scale = t.precision, t.scale
        expected = f"a number with at most {precision - scale} digits before the point"
        if not is_number or not math.isfinite(value):
            raise bad(expected)
        whole = decimal.Decimal(repr(value) if isinstance(value, float) else value)
        if abs(whole) >= decimal.Decimal(10) ** (precision - scale):
            raise bad(expected)
        return float(value)
    if t.name is TypeName.BOOLEAN:
        if not isinstance(value, bool):
            raise bad("TRUE or FALSE")
        return value
    if t.is_text:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if t.name is TypeName.DATE:
        if not isinstance(value, str) or not _real_date(DATE_TEXT.fullmatch(value)):
            raise bad("yyyy-MM-dd")
        return value
    if t.is_timestamp:
        if timestamp_format:
            pattern = spark_pattern(timestamp_format)
            if not isinstance(value, str) or not pattern.matches(value):
                raise bad(timestamp_format)
            return value
        if not isinstance(value, str) or not _real_timestamp(TIMESTAMP_TEXT.fullmatch(value)):
            raise bad(TIMESTAMP_EXPECTED)
        return value
    raise ValidationError(f"INSERT VALUES does not support column {column.name!r} of type {column.type}")


def _real_date(match: re.Match | None) -> bool:
    """The year, month and day of ``match`` make a date of the calendar."""
    if match is None:
        return False
    try:
        datetime.date(*(int(g) for g in match.groups()[:3]))
    except ValueError:
        return False
    return True


def _real_timestamp(match: re.Match | None) -> bool:
    """A real date; a time of day (no 24:00, no leap seconds); an offset within +-18:00
    (the widest Java's ZoneOffset takes)."""
    if match is None or not _real_date(match):
        return False
    hour, minute, second, off_hours, off_minutes = (int(g) if g else 0 for g in match.groups()[3:])
    return hour < 24 and minute < 60 and second < 60 and off_minutes < 60 and off_hours * 60 + off_minutes <= 18 * 60


def append(
    path: str,
    fmt: str,
    columns: list[Column],
    rows: Iterable[dict[str, Any]],
    name: str | None = None,
    *,
    delimiter: str = ",",
) -> str:
    """Write ``rows`` as one new file in ``path``: to a hidden name, then renamed into place.
    With ``name``, a file of that name already there means it was written: nothing is.
    A DELIMITED file has no header, its fields separated by ``delimiter``. The folder is
    checked first (:class:`.layout.Part`: a folder replaced by a link is refused), and the
    hidden file is created anew, never opened through a link someone left under its name."""
    path = Part(path).folder
    os.makedirs(path, exist_ok=True)
    if name is not None:
        name += FORMATS[fmt][1]
        if os.path.lexists(os.path.join(path, name)):
            return os.path.join(path, name)
    else:
        name = f"i{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{FORMATS[fmt][1]}"
    tmp = os.path.join(path, f".{name}.tmp")
    if os.path.lexists(tmp):
        os.remove(tmp)  # left by an interrupted write of the same name (a link: the link goes)
    rows = list(rows)
    if fmt == "PARQUET":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows, schema=pa.schema([(c.name, _arrow_type(c.type)) for c in columns]))
    with open(tmp, "xb") as f:  # exclusive: fails on anything there, a link included
        if fmt == "PARQUET":
            pq.write_table(table, f)
        else:
            f.write(write_text(rows, fmt, columns, delimiter).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(path, name))
    return os.path.join(path, name)


def _arrow_type(t: SqlType):
    import pyarrow as pa

    table = {
        TypeName.TINYINT: pa.int8(),
        TypeName.SMALLINT: pa.int16(),
        TypeName.INT: pa.int32(),
        TypeName.BIGINT: pa.int64(),
        TypeName.FLOAT: pa.float32(),
        TypeName.DOUBLE: pa.float64(),
        TypeName.STRING: pa.string(),
        TypeName.BOOLEAN: pa.bool_(),
        TypeName.DATE: pa.string(),
        TypeName.TIMESTAMP: pa.string(),
        TypeName.DECIMAL: pa.float64(),
    }
    if t.name not in table:
        raise ValidationError(f"INSERT VALUES into PARQUET does not support type {t}")
    return table[t.name]
