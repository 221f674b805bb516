"""Protobuf values of a Kafka topic, with the schema the declared value columns make, as
ksqlDB makes it (Confluent's ``ProtobufData``): ``syntax = "proto3"``, a message
``ConnectDefault1`` of the value columns numbered 1.. in their declared order, a STRUCT as a
nested message ``ConnectDefault2``, ``3``, ... (numbered in the order they are met), an ARRAY
as ``repeated``, a MAP as ``map<string, ...>``, TIMESTAMP as ``google.protobuf.Timestamp``,
DATE as ``google.type.Date``, DECIMAL as ``confluent.type.Decimal``.

The descriptor is built with the ``protobuf`` package (``descriptor_pb2`` ->
``descriptor_pool`` -> ``message_factory``); the bytes are that package's. Both sides use this
module: ``INSERT INTO ... VALUES``, ``PRINT`` and pull queries (:mod:`.kafka_values`), and the
runtime's Python UDFs (:mod:`..runtime.kafka_formats`: Spark has no Protobuf functions here).

proto3 gives a scalar no presence: a NULL scalar is not written and reads back as its type's
default (0, 0.0, false, ``""``, empty bytes), a NULL ARRAY or MAP as empty, and a NULL element
of one as its default, as ksqlDB's PROTOBUF reads and writes them. A STRUCT, TIMESTAMP, DATE
or DECIMAL is a message, so a NULL one stays NULL.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf.message import DecodeError, Message
from google.type import date_pb2

from ..language.statements import Column
from ..language.types import INTEGERS, TEXTS, TIMESTAMPS, SqlType, TypeName
from .avro import NAME, WIDE, _moment, _unscaled, named_columns_problem

#: the name ksqlDB gives a value schema it makes (and each nested one, numbered on)
PREFIX = "ConnectDefault"
MESSAGE = f"{PREFIX}1"
F = descriptor_pb2.FieldDescriptorProto
#: type -> its proto3 scalar type
SCALARS: dict[TypeName, int] = {
    TypeName.BOOLEAN: F.TYPE_BOOL,
    **dict.fromkeys(INTEGERS[:3], F.TYPE_INT32),
    TypeName.BIGINT: F.TYPE_INT64,
    TypeName.FLOAT: F.TYPE_FLOAT,
    TypeName.DOUBLE: F.TYPE_DOUBLE,
    **dict.fromkeys(TEXTS, F.TYPE_STRING),
    TypeName.BINARY: F.TYPE_BYTES,
}
#: type -> the well-known message it is (and the file declaring it)
WELL_KNOWN: dict[TypeName, tuple[str, str]] = {
    **dict.fromkeys(TIMESTAMPS, ("google.protobuf.Timestamp", "google/protobuf/timestamp.proto")),
    TypeName.DATE: ("google.type.Date", "google/type/date.proto"),
    TypeName.DECIMAL: ("confluent.type.Decimal", "confluent/type/decimal.proto"),
}
_CONTAINERS = (TypeName.ARRAY, TypeName.MAP)
_EPOCH = datetime.datetime(1970, 1, 1)


def columns_problem(columns: Sequence[Column]) -> str | None:
    """Why ``columns`` (a source's value columns) cannot be a Protobuf message, None if they can."""
    return named_columns_problem(columns, "Protobuf", _type_problem)


def _type_problem(t: SqlType) -> str | None:
    if t.name is TypeName.MAP and t.elements[0].name not in TEXTS:
        return "ksqlDB's Protobuf maps have STRING keys"
    if t.name in _CONTAINERS and t.elements[-1].name in _CONTAINERS:
        return "Protobuf has no repeated field or map value that is itself an ARRAY or a MAP (wrap it in a STRUCT)"
    if t.name is TypeName.STRUCT:
        bad = next((name for name, _ in t.fields if not NAME.fullmatch(name)), None)
        if bad is not None:
            return f"field {bad!r} is no Protobuf field name"
    return next((p for p in map(_type_problem, t.elements or [f for _, f in t.fields]) if p), None)


# -- the schema -------------------------------------------------------------------------
def file_descriptor(columns: Sequence[Column]) -> descriptor_pb2.FileDescriptorProto:
    """The ``.proto`` file of ``columns`` (a source's value columns) as a descriptor."""
    top = descriptor_pb2.DescriptorProto(name=MESSAGE)
    counter = [1]
    imports: set[str] = set()

    def message(into: descriptor_pb2.DescriptorProto, fields: Sequence[tuple[str, SqlType]], path: str) -> None:
        for number, (name, t) in enumerate(fields, 1):
            field = into.field.add(name=name, number=number, label=F.LABEL_OPTIONAL, json_name=name)
            if t.name is TypeName.ARRAY:
                field.label = F.LABEL_REPEATED
                t = t.elements[0]
            elif t.name is TypeName.MAP:
                entry = into.nested_type.add(name=f"{name}Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="key")
                value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, json_name="value")
                field.label, field.type, field.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f"{path}.{entry.name}"
                kind(into, value, t.elements[1], path)
                continue
            kind(into, field, t, path)

    def kind(into: descriptor_pb2.DescriptorProto, field: Any, t: SqlType, path: str) -> None:
        if t.name in SCALARS:
            field.type = SCALARS[t.name]
        elif t.name in WELL_KNOWN:
            name, file = WELL_KNOWN[t.name]
            field.type, field.type_name = F.TYPE_MESSAGE, f".{name}"
            imports.add(file)
        else:  # STRUCT
            counter[0] += 1
            nested = into.nested_type.add(name=f"{PREFIX}{counter[0]}")
            field.type, field.type_name = F.TYPE_MESSAGE, f"{path}.{nested.name}"
            message(nested, t.fields, f"{path}.{nested.name}")

    message(top, [(c.name, c.type) for c in columns], f".{MESSAGE}")
    proto = descriptor_pb2.FileDescriptorProto(name="streamql/value.proto", syntax="proto3")
    proto.dependency.extend(sorted(imports))
    proto.message_type.append(top)
    return proto


#: a field's proto3 type -> its name in a .proto file
TYPE_NAMES = {kind: name[len("TYPE_") :].lower() for name, kind in F.Type.items()}


def text(columns: Sequence[Column]) -> str:
    """The ``.proto`` text of ``columns``' schema, as ksqlDB prints it (what a schema
    registry is given for ``VALUE_SCHEMA_ID``)."""
    proto = file_descriptor(columns)
    imports = [f'import "{d}";' for d in proto.dependency]
    if "confluent/type/decimal.proto" in proto.dependency:
        imports.insert(0, 'import "confluent/meta.proto";')
    head = ['syntax = "proto3";', "", *imports, *([""] if imports else [])]
    return "\n".join([*head, *_message_text(proto.message_type[0], columns_by_path(columns), "")]) + "\n"


def columns_by_path(columns: Sequence[Column]) -> dict[str, SqlType]:
    """Each DECIMAL field's type by its message path and name (for its precision and scale)."""
    found: dict[str, SqlType] = {}

    def walk(fields: Sequence[tuple[str, SqlType]], path: str) -> None:
        for name, t in fields:
            while t.name in _CONTAINERS:
                t = t.elements[-1]
            if t.name is TypeName.DECIMAL:
                found.setdefault(name, t)
            walk(t.fields, f"{path}.{name}")

    walk([(c.name, c.type) for c in columns], "")
    return found


def _message_text(message: descriptor_pb2.DescriptorProto, decimals: dict[str, SqlType], indent: str) -> list[str]:
    entries = {m.name: m for m in message.nested_type if m.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    for field in message.field:
        entry = entries.get(field.type_name.rpartition(".")[2])
        if entry is not None:
            kind = f"map<string, {_type_text(entry.field[1])}>"
        else:
            kind = ("repeated " if field.label == F.LABEL_REPEATED else "") + _type_text(field)
        meta = ""
        if field.type_name == ".confluent.type.Decimal" and entry is None and field.name in decimals:
            t = decimals[field.name]
            meta = (
                f' [(confluent.field_meta) = {{ params: [{{ key: "precision", value: "{t.precision}" }}, '
                f'{{ key: "scale", value: "{t.scale}" }}] }}]'
            )
        lines.append(f"{indent}  {kind} {field.name} = {field.number}{meta};")
    for nested in message.nested_type:
        if not nested.options.map_entry:  # ksqlDB's text: a blank line before each
            lines.extend(["", *_message_text(nested, decimals, indent + "  ")])
    return [*lines, f"{indent}}}"]


def _type_text(field: Any) -> str:
    if field.type != F.TYPE_MESSAGE:
        return TYPE_NAMES[field.type]
    name = field.type_name[1:]
    return name.rpartition(".")[2] if name.startswith(MESSAGE) else name


def _decimal_file() -> descriptor_pb2.FileDescriptorProto:
    """Confluent's ``confluent/type/decimal.proto`` (the unscaled value as big-endian two's
    complement bytes, its precision and scale)."""
    decimal_type = descriptor_pb2.DescriptorProto(name="Decimal")
    for number, (name, kind) in enumerate(
        (("value", F.TYPE_BYTES), ("precision", F.TYPE_UINT32), ("scale", F.TYPE_INT32)), 1
    ):
        decimal_type.field.add(name=name, number=number, label=F.LABEL_OPTIONAL, type=kind, json_name=name)
    return descriptor_pb2.FileDescriptorProto(
        name="confluent/type/decimal.proto", package="confluent.type", syntax="proto3", message_type=[decimal_type]
    )


@functools.lru_cache(maxsize=64)
def message_class(columns: tuple[Column, ...]) -> type[Message]:
    """The message class of ``columns``, in a descriptor pool of its own (a source's schema
    never meets another's); built once per process."""
    pool = descriptor_pool.DescriptorPool()
    for known in (timestamp_pb2.DESCRIPTOR, date_pb2.DESCRIPTOR):
        proto = descriptor_pb2.FileDescriptorProto()
        known.CopyToProto(proto)
        pool.Add(proto)
    pool.Add(_decimal_file())
    pool.Add(file_descriptor(columns))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(MESSAGE))


# -- bytes ------------------------------------------------------------------------------
def encode(row: Mapping[str, Any], columns: Sequence[Column]) -> bytes:
    """``row`` (column name -> a value as :func:`..storage.values.stored` gives it: ISO text
    for times, numbers, base64 or bytes for BYTES) as the bytes of :func:`message_class`."""
    message = message_class(tuple(columns))()
    _fill(message, [(c.name, c.type) for c in columns], row)
    return message.SerializeToString(deterministic=True)


def decode(data: bytes, columns: Sequence[Column], *, exact: bool = False) -> dict[str, Any] | None:
    """The value columns of ``data`` as JSON values (a TIMESTAMP as Spark's JSON writes it,
    BYTES as base64, a DECIMAL as a number), None when the protobuf parser refuses it (a
    truncated or malformed message, a string that is no UTF-8). Fields of other numbers are
    skipped, as every protobuf reader does. ``exact``: a DECIMAL as its digits (text) and a
    TIMESTAMP to the microsecond, for Spark's ``from_json``."""
    message = message_class(tuple(columns))()
    try:
        message.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        return None
    return _read(message, [(c.name, c.type) for c in columns], exact)


def _fill(message: Any, fields: Sequence[tuple[str, SqlType]], values: Mapping[str, Any]) -> None:
    for name, t in fields:
        value = values.get(name)
        if value is None:
            continue  # proto3: not written; reads back as the default (a message: as null)
        if t.name is TypeName.ARRAY:
            element = t.elements[0]
            target = getattr(message, name)
            for item in value:
                if _is_message(element):
                    _put(target.add(), element, item)
                else:
                    target.append(_default(element) if item is None else _scalar(element, item))
        elif t.name is TypeName.MAP:
            target, element = getattr(message, name), t.elements[1]
            for key, item in value.items():
                if _is_message(element):
                    _put(target[str(key)], element, item)
                else:
                    target[str(key)] = _default(element) if item is None else _scalar(element, item)
        elif _is_message(t):
            _put(getattr(message, name), t, value)
        else:
            setattr(message, name, _scalar(t, value))


def _is_message(t: SqlType) -> bool:
    return t.name not in SCALARS


def _put(message: Any, t: SqlType, value: Any) -> None:
    """``value`` into ``message`` (a STRUCT's or a well-known type's), present even if empty."""
    message.SetInParent()
    if value is None:
        return
    if t.name is TypeName.STRUCT:
        _fill(message, t.fields, value)
    else:
        PUT[t.name](message, t, value)


def _scalar(t: SqlType, value: Any) -> Any:
    if t.name is TypeName.BINARY:
        return value if isinstance(value, bytes) else base64.b64decode(str(value))
    if t.name in TEXTS:
        return str(value)
    if t.name in (TypeName.FLOAT, TypeName.DOUBLE):
        return float(value)
    return bool(value) if t.name is TypeName.BOOLEAN else int(value)


def _default(t: SqlType) -> Any:
    return {TypeName.BINARY: b"", TypeName.BOOLEAN: False, TypeName.FLOAT: 0.0, TypeName.DOUBLE: 0.0}.get(
        t.name, "" if t.name in TEXTS else 0
    )


def _read(message: Any, fields: Sequence[tuple[str, SqlType]], exact: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, t in fields:
        value = getattr(message, name)
        if t.name is TypeName.ARRAY:
            out[name] = [_value(item, t.elements[0], exact) for item in value]
        elif t.name is TypeName.MAP:
            out[name] = {key: _value(value[key], t.elements[1], exact) for key in value}
        elif _is_message(t) and not message.HasField(name):
            out[name] = None
        else:
            out[name] = _value(value, t, exact)
    return out


def _value(value: Any, t: SqlType, exact: bool) -> Any:
    if t.name is TypeName.STRUCT:
        return _read(value, t.fields, exact)
    if t.name in READ:
        return READ[t.name](value, t, exact)
    return base64.b64encode(value).decode("ascii") if t.name is TypeName.BINARY else value


# -- the well-known types ---------------------------------------------------------------
def _put_timestamp(message: Any, _t: SqlType, value: Any) -> None:
    since = _moment(value) - _EPOCH
    message.seconds = since.days * 86400 + since.seconds
    message.nanos = since.microseconds * 1000


def _read_timestamp(message: Any, t: SqlType, exact: bool) -> str:
    moment = _EPOCH + datetime.timedelta(seconds=message.seconds, microseconds=message.nanos // 1000)
    fraction = f"{moment.microsecond:06d}" if exact else f"{moment.microsecond // 1000:03d}"
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{fraction}{'Z' if t.name is TypeName.TIMESTAMP else ''}"


def _put_date(message: Any, _t: SqlType, value: Any) -> None:
    day = datetime.date.fromisoformat(str(value))
    message.year, message.month, message.day = day.year, day.month, day.day


def _put_decimal(message: Any, t: SqlType, value: Any) -> None:
    """Confluent's ``DecimalUtils.fromBigDecimal`` of the value at the column's scale: the
    unscaled value's shortest two's complement bytes, its digits' count, the scale."""
    message.value = _unscaled(t, value)
    message.precision = len(str(abs(int.from_bytes(message.value, "big", signed=True))))
    message.scale = t.scale


def _read_decimal(message: Any, _t: SqlType, exact: bool) -> Any:
    number = decimal.Decimal(int.from_bytes(message.value, "big", signed=True)).scaleb(-message.scale, WIDE)
    return str(number) if exact else float(number)


Put = Callable[[Any, SqlType, Any], None]
Read = Callable[[Any, SqlType, bool], Any]
#: how a value of each well-known type is put into its message
PUT: dict[TypeName, Put] = {
    **dict.fromkeys(TIMESTAMPS, _put_timestamp),
    TypeName.DATE: _put_date,
    TypeName.DECIMAL: _put_decimal,
}
#: how a value of a well-known type is read, as a JSON value
READ: dict[TypeName, Read] = {
    **dict.fromkeys(TIMESTAMPS, _read_timestamp),
    TypeName.DATE: lambda m, _t, _e: f"{m.year:04d}-{m.month:02d}-{m.day:02d}",
    TypeName.DECIMAL: _read_decimal,
}
