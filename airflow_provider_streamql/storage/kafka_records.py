"""A row of a stream or table as a Kafka record, and back, without Spark: the same bytes
:func:`..runtime.kafka.encode` makes with Spark's ``to_json`` and ``CAST(key AS STRING)``,
so that a query reading the topic decodes what ``INSERT INTO ... VALUES`` produced, and a
pull query or ``PRINT`` reads what a query wrote.

The rule (docs/deployment.md, "Kafka"): the value is a JSON object of the value columns in
their declared order, a NULL written as ``null``; the key is the one KEY column as text, or
several as a JSON object, or no key. Text is made as Spark's JSON generator (Jackson) makes
it: a TIMESTAMP as ``yyyy-MM-dd'T'HH:mm:ss.SSS`` in UTC with ``Z`` (milliseconds, as Spark
writes), a DOUBLE as Java's ``Double.toString`` (``1.0E10``), a DECIMAL with its scale
(``9.50``), control characters escaped as ``\\u001F``. ``tests/test_kafka.py`` compares
these bytes with Spark's own for a row of every type. AVRO and KAFKA values: see
:mod:`.kafka_values` (``tests/test_kafka_formats.py`` compares those bytes too).
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..language.statements import Column
from ..language.types import SqlType, TypeName
from .kafka_values import KafkaValue, ValueFormat


@dataclass(frozen=True)
class KafkaRecord:
    """One record of a topic as a client sees it: where it is, its timestamp and its bytes."""

    partition: int
    offset: int
    #: the record's timestamp, milliseconds since the epoch (ksqlDB's ROWTIME)
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def position(self) -> str:
        """Where it is, as bad records and notes name it: ``kafka:<topic>/<partition>@<offset>``
        without the topic (the caller knows it)."""
        return f"{self.partition}@{self.offset}"


def encode(
    record: Mapping[str, Any], columns: list[Column], value_format: KafkaValue | None = None
) -> tuple[bytes | None, bytes | None]:
    """(key, value) of ``record`` (column name -> a value as :func:`..storage.values.stored`
    gives it) as the runtime's encoder writes them (the value in ``value_format``: JSON unless
    given)."""
    keys = [c for c in columns if c.key]
    if value_format is not None and value_format.format is not ValueFormat.JSON:
        return _key_bytes(record, keys), value_format.encode(record)
    return _key_bytes(record, keys), json_value(record, columns)


def json_value(record: Mapping[str, Any], columns: list[Column]) -> bytes:
    """The JSON value of ``record``: an object of its value columns (never null)."""
    return _object([(c.name, c.type, record.get(c.name)) for c in columns if not c.key]).encode("utf-8")


def _key_bytes(record: Mapping[str, Any], keys: list[Column]) -> bytes | None:
    if not keys:
        key = None
    elif len(keys) == 1:
        key = None if record.get(keys[0].name) is None else _key_text(keys[0].type, record[keys[0].name])
    else:
        # Spark's to_json of the key struct leaves a null field out (its default)
        key = _object([(c.name, c.type, record.get(c.name)) for c in keys], nulls=False)
    return None if key is None else key.encode("utf-8")


def decode(record: KafkaRecord, columns: list[Column], value_format: KafkaValue | None = None) -> dict[str, Any] | None:
    """The columns of ``record`` as JSON values (None for a column it lacks), matching value
    fields in any letter case, as the runtime's decoder reads them; None when its value is no
    JSON object (a bad record; AVRO, KAFKA: not a value of ``value_format``) or, for a
    tombstone, when the caller asks (value None)."""
    if record.value is None:
        return None
    parsed: Any
    try:
        if value_format is not None and value_format.format is not ValueFormat.JSON:
            parsed = value_format.decode(record.value)
        else:
            parsed = json.loads(record.value)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(parsed, dict):
        return None
    by_lower = {k.lower(): v for k, v in reversed(list(parsed.items()))}  # the first spelling wins
    row = {c.name: by_lower.get(c.name.lower()) for c in columns if not c.key}
    keys = [c for c in columns if c.key]
    text = None if record.key is None else record.key.decode("utf-8", "replace")
    if len(keys) == 1:
        row[keys[0].name] = text
    elif keys:
        try:
            parts = json.loads(text) if text is not None else None
        except ValueError:
            parts = None
        parts_by_lower = {k.lower(): v for k, v in parts.items()} if isinstance(parts, dict) else {}
        row.update({k.name: parts_by_lower.get(k.name.lower()) for k in keys})
    return {c.name: row.get(c.name) for c in columns}


# -- text as Spark's JSON generator and CAST(... AS STRING) write it -------------------------
def _object(fields: list[tuple[str, SqlType, Any]], *, nulls: bool = True) -> str:
    """A JSON object of ``fields`` (``nulls``: a null field written as ``null``, else left out)."""
    shown = [(name, t, v) for name, t, v in fields if nulls or v is not None]
    return "{" + ",".join(f"{_string(name)}:{_json(t, v, nulls=nulls)}" for name, t, v in shown) + "}"


def _json(t: SqlType, value: Any, *, nulls: bool = True) -> str:
    if value is None:
        return "null"
    if t.name is TypeName.ARRAY:
        return "[" + ",".join(_json(t.elements[0], v, nulls=nulls) for v in value) + "]"
    if t.name is TypeName.MAP:
        pairs = [f"{_string(str(k))}:{_json(t.elements[1], v, nulls=nulls)}" for k, v in value.items()]
        return "{" + ",".join(pairs) + "}"
    if t.name is TypeName.STRUCT:
        return _object([(name, ftype, value.get(name)) for name, ftype in t.fields], nulls=nulls)
    return JSON_TEXT.get(t.name, _json_string)(t, value)


def _key_text(t: SqlType, value: Any) -> str:
    """CAST(value AS STRING), as Spark casts the one key column."""
    if t.name in (TypeName.ARRAY, TypeName.MAP, TypeName.STRUCT):
        return _json(t, value)  # not a key type ksqlDB allows; written as its JSON
    return KEY_TEXT.get(t.name, lambda _t, v: str(v))(t, value)


def _string(text: str) -> str:
    """A JSON string as Jackson writes it: the short escapes, other control characters as
    ``\\u00XX`` (upper-case hex), everything else as it is (UTF-8)."""
    out = ['"']
    for char in text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def _json_string(_t: SqlType, value: Any) -> str:
    return _string(str(value))


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: plain from 10^-3 to 10^7, else ``d.dddE<n>``."""
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    return _java_digits(repr(float(value)), value)


def _java_float(value: float) -> str:
    """Java's ``Float.toString`` of ``value`` as a 32-bit float: its shortest digits."""
    single = struct.unpack("f", struct.pack("f", value))[0]
    if single == 0:
        return "-0.0" if math.copysign(1, single) < 0 else "0.0"
    shortest = next(
        text
        for text in (f"{single:.{p}g}" for p in range(1, 10))
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single
    )
    return _java_digits(shortest, single)


def _java_digits(text: str, value: float) -> str:
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    point = len(shown) + exponent  # digits before the decimal point
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{shown}"
        whole, fraction = shown[:point].ljust(point, "0"), shown[point:]
        return f"{minus}{whole}.{fraction or '0'}"
    return f"{minus}{shown[0]}.{shown[1:] or '0'}E{point - 1}"


def _decimal(t: SqlType, value: Any) -> str:
    """Java's ``BigDecimal.toString`` at the column's scale (Python's ``str`` of a Decimal
    follows the same rule)."""
    scale = t.params[1] if len(t.params) > 1 else 0
    number = decimal.Decimal(repr(value) if isinstance(value, float) else str(value))
    return str(number.quantize(decimal.Decimal(1).scaleb(-scale)))


def _instant(text: Any) -> datetime.datetime | None:
    """The UTC time a TIMESTAMP value's text names (None if it is not ISO 8601)."""
    if isinstance(text, datetime.datetime):
        moment = text
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(text))
        except ValueError:
            return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return moment


def _timestamp(t: SqlType, value: Any) -> str:
    """Spark's JSON TIMESTAMP (``yyyy-MM-dd'T'HH:mm:ss.SSSXXX``, UTC); TIMESTAMP_NTZ without
    the zone. Text that is no ISO time is written as it is (Spark's reader judges it)."""
    moment = _instant(value)
    if moment is None:
        return _string(str(value))
    text = f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}"
    return _string(text + ("Z" if t.name is TypeName.TIMESTAMP else ""))


def _timestamp_key(_t: SqlType, value: Any) -> str:
    """CAST(TIMESTAMP AS STRING) in UTC: ``yyyy-MM-dd HH:mm:ss[.fraction]``, the fraction's
    trailing zeros left out."""
    moment = _instant(value)
    if moment is None:
        return str(value)
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return f"{moment:%Y-%m-%d %H:%M:%S}" + (f".{fraction}" if fraction else "")


def _boolean(_t: SqlType, value: Any) -> str:
    return "true" if value else "false"


Text = Callable[[SqlType, Any], str]
#: how a value of each type is written in a JSON value (strings, dates and the rest: a string)
JSON_TEXT: dict[TypeName, Text] = {
    TypeName.BOOLEAN: _boolean,
    **{
        name: (lambda _t, v: str(int(v)))
        for name in (TypeName.TINYINT, TypeName.SMALLINT, TypeName.INT, TypeName.BIGINT)
    },
    TypeName.FLOAT: lambda _t, v: _java_float(float(v)),
    TypeName.DOUBLE: lambda _t, v: _java_double(float(v)),
    TypeName.DECIMAL: _decimal,
    TypeName.TIMESTAMP: _timestamp,
    TypeName.TIMESTAMP_NTZ: _timestamp,
}
#: how a key column's value is cast to text (the rest: its JSON text, or the string itself)
KEY_TEXT: dict[TypeName, Text] = {
    **{name: JSON_TEXT[name] for name in JSON_TEXT if name not in (TypeName.TIMESTAMP, TypeName.TIMESTAMP_NTZ)},
    TypeName.TIMESTAMP: _timestamp_key,
    TypeName.TIMESTAMP_NTZ: _timestamp_key,
}
