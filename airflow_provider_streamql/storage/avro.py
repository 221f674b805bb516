"""Avro values of a Kafka topic without Spark: the schema of a source's declared value columns,
and a record's bytes as Spark's ``to_avro`` writes them with that schema (and back), so that
``INSERT INTO ... VALUES`` writes what a query reading the topic decodes, and ``PRINT`` and pull
queries read what a query wrote.

The schema is ksqlDB's: a record (``io.confluent.ksql.avro_schemas.KsqlDataSourceSchema``
unless ``VALUE_AVRO_SCHEMA_FULL_NAME`` names another) of the value columns in their declared
order, each an optional field (a union of ``null`` and its type, default null), TIMESTAMP as
``timestamp-millis``, DATE as ``date``, DECIMAL as ``bytes`` with the ``decimal`` logical type,
a STRUCT as a nested record named after its path. ``tests/test_kafka_formats.py`` compares the
bytes with fastavro's and Spark's for a row of every type.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..language.statements import Column
from ..language.types import SqlType, TypeName

#: ksqlDB's name of a value schema it makes
DEFAULT_FULL_NAME = "io.confluent.ksql.avro_schemas.KsqlDataSourceSchema"
#: an Avro name (each part of a full name)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: type -> its Avro type (a primitive's name, or a logical type on one)
PRIMITIVES: dict[TypeName, Any] = {
    TypeName.BOOLEAN: "boolean",
    TypeName.TINYINT: "int",
    TypeName.SMALLINT: "int",
    TypeName.INT: "int",
    TypeName.BIGINT: "long",
    TypeName.FLOAT: "float",
    TypeName.DOUBLE: "double",
    TypeName.STRING: "string",
    TypeName.VARCHAR: "string",
    TypeName.CHAR: "string",
    TypeName.BINARY: "bytes",
    TypeName.DATE: {"type": "int", "logicalType": "date"},
    TypeName.TIMESTAMP: {"type": "long", "logicalType": "timestamp-millis"},
    TypeName.TIMESTAMP_NTZ: {"type": "long", "logicalType": "local-timestamp-millis"},
}
_EPOCH = datetime.datetime(1970, 1, 1)


def full_name_problem(value: Any) -> str | None:
    """Why ``value`` is not an Avro full name (``VALUE_AVRO_SCHEMA_FULL_NAME``), None if it is."""
    if isinstance(value, str) and all(NAME.fullmatch(part) for part in value.split(".")):
        return None
    return "must be an Avro full name: dot-separated names of letters, digits and _ (not starting with a digit)"


def columns_problem(columns: Sequence[Column]) -> str | None:
    """Why ``columns`` (a source's value columns) cannot be an Avro record, None if they can."""
    return named_columns_problem(columns, "Avro", _type_problem)


def named_columns_problem(
    columns: Sequence[Column], fmt: str, type_problem: Callable[[SqlType], str | None]
) -> str | None:
    """Why ``columns`` cannot be the fields of a record of ``fmt`` (Avro, Protobuf: a field
    name is a letter or _, then letters, digits and _), or a type ``type_problem`` refuses."""
    for c in columns:
        if not NAME.fullmatch(c.name):
            return f"column {c.name!r} is no {fmt} field name (letters, digits and _, not starting with a digit)"
        problem = type_problem(c.type)
        if problem:
            return f"column {c.name!r} of type {c.type}: {problem}"
    return None


def _type_problem(t: SqlType) -> str | None:
    if t.name is TypeName.MAP and t.elements[0].name not in (TypeName.STRING, TypeName.VARCHAR, TypeName.CHAR):
        return "an Avro map's keys are strings"
    if t.name is TypeName.STRUCT:
        bad = next((name for name, _ in t.fields if not NAME.fullmatch(name)), None)
        if bad is not None:
            return f"field {bad!r} is no Avro field name"
    return next((p for p in map(_type_problem, t.elements or [f for _, f in t.fields]) if p), None)


def schema(columns: Sequence[Column], full_name: str = DEFAULT_FULL_NAME) -> dict[str, Any]:
    """The Avro schema of ``columns`` (a source's value columns), a record named ``full_name``."""
    namespace, _, name = full_name.rpartition(".")
    return {
        "type": "record",
        "name": name,
        **({"namespace": namespace} if namespace else {}),
        "fields": [_field(c.name, c.type, name) for c in columns],
    }


def _field(name: str, t: SqlType, path: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", _type(t, f"{path}_{name}")], "default": None}


def _type(t: SqlType, path: str) -> Any:
    if t.name is TypeName.DECIMAL:
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if t.name is TypeName.ARRAY:
        return {"type": "array", "items": ["null", _type(t.elements[0], path)]}
    if t.name is TypeName.MAP:
        return {"type": "map", "values": ["null", _type(t.elements[1], path)]}
    if t.name is TypeName.STRUCT:
        return {"type": "record", "name": path, "fields": [_field(n, f, path) for n, f in t.fields]}
    return PRIMITIVES[t.name]


# -- bytes ----------------------------------------------------------------------------
def encode(row: Mapping[str, Any], columns: Sequence[Column]) -> bytes:
    """``row`` (column name -> a value as :func:`..storage.values.stored` gives it: ISO text
    for times, numbers, ...) as Avro binary of :func:`schema` of ``columns``."""
    out = io.BytesIO()
    for c in columns:
        _write_optional(out, c.type, row.get(c.name))
    return out.getvalue()


def decode(data: bytes, columns: Sequence[Column]) -> dict[str, Any] | None:
    """The value columns of Avro binary ``data`` as JSON values (a TIMESTAMP as Spark's JSON
    writes it, BYTES as base64), None when it is no such record (too short, a bad union index,
    text that is no UTF-8). Bytes after the record are not looked at, as Spark's ``from_avro``
    (Avro's decoder) does not."""
    buffer = io.BytesIO(data)
    try:
        return {c.name: _read_optional(buffer, c.type) for c in columns}
    except (ValueError, EOFError, IndexError, UnicodeDecodeError, struct.error, KeyError):
        return None


def _zigzag(out: io.BytesIO, n: int) -> None:
    n = (n << 1) ^ (n >> 63)
    while n & ~0x7F:
        out.write(bytes(((n & 0x7F) | 0x80,)))
        n >>= 7
    out.write(bytes((n,)))


def _long(buffer: io.BytesIO) -> int:
    shift, n = 0, 0
    while True:
        b = buffer.read(1)
        if not b or shift > 63:
            raise EOFError
        n |= (b[0] & 0x7F) << shift
        shift += 7
        if not b[0] & 0x80:
            return (n >> 1) ^ -(n & 1)


def _blob(buffer: io.BytesIO) -> bytes:
    size = _long(buffer)
    data = buffer.read(size)
    if size < 0 or len(data) != size:
        raise EOFError
    return data


def _write_optional(out: io.BytesIO, t: SqlType, value: Any) -> None:
    _zigzag(out, 0 if value is None else 1)
    if value is not None:
        _write(out, t, value)


def _write(out: io.BytesIO, t: SqlType, value: Any) -> None:
    if t.name is TypeName.ARRAY or t.name is TypeName.MAP:
        items = list(value.items()) if t.name is TypeName.MAP else list(value)
        if items:
            _zigzag(out, len(items))
            for item in items:
                if t.name is TypeName.MAP:
                    _write(out, SqlType(TypeName.STRING), str(item[0]))
                _write_optional(out, t.elements[-1], item[1] if t.name is TypeName.MAP else item)
        _zigzag(out, 0)
    elif t.name is TypeName.STRUCT:
        for name, f in t.fields:
            _write_optional(out, f, value.get(name))
    else:
        WRITE[t.name](out, t, value)


def _read_optional(buffer: io.BytesIO, t: SqlType) -> Any:
    branch = _long(buffer)
    if branch not in (0, 1):
        raise ValueError(f"union branch {branch}")
    return None if branch == 0 else _read(buffer, t)


def _read(buffer: io.BytesIO, t: SqlType) -> Any:
    if t.name is TypeName.ARRAY or t.name is TypeName.MAP:
        items: list[Any] = []
        while (count := _long(buffer)) != 0:
            if count < 0:  # a block with its size in bytes after the count
                count = -count
                _long(buffer)
            for _ in range(count):
                key = _blob(buffer).decode("utf-8") if t.name is TypeName.MAP else None
                items.append((key, _read_optional(buffer, t.elements[-1])))
        return dict(items) if t.name is TypeName.MAP else [v for _, v in items]
    if t.name is TypeName.STRUCT:
        return {name: _read_optional(buffer, f) for name, f in t.fields}
    return READ[t.name](buffer, t)


#: DECIMAL arithmetic wide enough for DECIMAL(38, s) (the default context rounds to 28 digits)
WIDE = decimal.Context(prec=80)


def _unscaled(t: SqlType, value: Any) -> bytes:
    """The value's unscaled integer at the column's scale, as its shortest big-endian two's
    complement bytes (Avro's ``decimal``, and Protobuf's ``confluent.type.Decimal``)."""
    number = decimal.Decimal(repr(value) if isinstance(value, float) else str(value))
    n = int(number.scaleb(t.scale, WIDE).to_integral_value(decimal.ROUND_HALF_UP, WIDE))
    return n.to_bytes(max(1, (n + (n < 0)).bit_length() // 8 + 1), "big", signed=True)


def _read_decimal(buffer: io.BytesIO, t: SqlType) -> float:
    return float(decimal.Decimal(int.from_bytes(_blob(buffer), "big", signed=True)).scaleb(-t.scale))


def _moment(text: Any) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return moment.astimezone(datetime.UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _millis(text: Any) -> int:
    return (_moment(text) - _EPOCH) // datetime.timedelta(milliseconds=1)


def _time_text(ms: int, zone: str) -> str:
    moment = _EPOCH + datetime.timedelta(milliseconds=ms)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}{zone}"


Write = Callable[[io.BytesIO, SqlType, Any], object]
Read = Callable[[io.BytesIO, SqlType], Any]
_INTS = (TypeName.TINYINT, TypeName.SMALLINT, TypeName.INT, TypeName.BIGINT)
_TEXTS = (TypeName.STRING, TypeName.VARCHAR, TypeName.CHAR)


def _write_blob(out: io.BytesIO, data: bytes) -> None:
    _zigzag(out, len(data))
    out.write(data)


#: how a value of each type is written (the nested types: in :func:`_write`)
WRITE: dict[TypeName, Write] = {
    TypeName.BOOLEAN: lambda out, _t, v: out.write(b"\x01" if v else b"\x00"),
    **{n: (lambda out, _t, v: _zigzag(out, int(v))) for n in _INTS},
    TypeName.FLOAT: lambda out, _t, v: out.write(struct.pack("<f", float(v))),
    TypeName.DOUBLE: lambda out, _t, v: out.write(struct.pack("<d", float(v))),
    **{n: (lambda out, _t, v: _write_blob(out, str(v).encode("utf-8"))) for n in _TEXTS},
    TypeName.BINARY: lambda out, _t, v: _write_blob(out, v if isinstance(v, bytes) else base64.b64decode(v)),
    TypeName.DECIMAL: lambda out, t, v: _write_blob(out, _unscaled(t, v)),
    TypeName.DATE: lambda out, _t, v: _zigzag(out, (datetime.date.fromisoformat(str(v)) - _EPOCH.date()).days),
    TypeName.TIMESTAMP: lambda out, _t, v: _zigzag(out, _millis(v)),
    TypeName.TIMESTAMP_NTZ: lambda out, _t, v: _zigzag(out, _millis(v)),
}
#: how a value of each type is read, as a JSON value (as Spark's to_json would write it)
READ: dict[TypeName, Read] = {
    TypeName.BOOLEAN: lambda b, _t: {b"\x00": False, b"\x01": True}[b.read(1)],
    **{n: (lambda b, _t: _long(b)) for n in _INTS},
    TypeName.FLOAT: lambda b, _t: struct.unpack("<f", b.read(4))[0],
    TypeName.DOUBLE: lambda b, _t: struct.unpack("<d", b.read(8))[0],
    **{n: (lambda b, _t: _blob(b).decode("utf-8")) for n in _TEXTS},
    TypeName.BINARY: lambda b, _t: base64.b64encode(_blob(b)).decode("ascii"),
    TypeName.DECIMAL: _read_decimal,
    TypeName.DATE: lambda b, _t: (_EPOCH.date() + datetime.timedelta(days=_long(b))).isoformat(),
    TypeName.TIMESTAMP: lambda b, _t: _time_text(_long(b), "Z"),
    TypeName.TIMESTAMP_NTZ: lambda b, _t: _time_text(_long(b), ""),
}
