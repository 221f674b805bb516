"""How a Kafka topic's values are laid out (its ``VALUE_FORMAT``), as one typed value the
planner checks and every reader and writer of the topic takes: the runtime's decoder and
encoder (:mod:`..runtime.kafka_formats`), ``INSERT INTO ... VALUES``, ``PRINT`` and pull queries.

- ``JSON``: an object of the value columns (:mod:`.kafka_records`).
- ``AVRO``: Avro binary of the value columns' record (:mod:`.avro`); with ``VALUE_SCHEMA_ID``,
  in Confluent's wire format (magic byte 0, the schema id as 4 bytes big-endian, then the Avro
  payload), the id written on every record and required of every record read. streamql reads
  no schema registry: the declared columns are the schema; the id names it for consumers that
  do (register the schema :func:`avro.schema` gives: docs/deployment.md says its rules).
- ``PROTOBUF``: a proto3 message of the value columns, the schema ksqlDB makes of them
  (:mod:`.protobuf`); with ``VALUE_SCHEMA_ID``, in Confluent's wire format: the header as
  AVRO's, then the message indexes (one 0 byte: the file's first message), then the message.
- ``KAFKA``: ksqlDB's single primitive value, as Kafka's serializers write it: INT as 4 bytes
  big-endian, BIGINT as 8, DOUBLE as IEEE 754's 8 bytes big-endian, STRING as UTF-8, BYTES as is.
"""

from __future__ import annotations

import base64
import enum
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..catalog import SourceInfo
from ..language.statements import Column
from ..language.types import TypeName
from . import avro, protobuf

#: the magic byte of Confluent's wire format
MAGIC = b"\x00"


class ValueFormat(enum.Enum):
    """The value formats of a Kafka topic."""

    JSON = "JSON"
    AVRO = "AVRO"
    PROTOBUF = "PROTOBUF"
    KAFKA = "KAFKA"


#: a KAFKA value's type -> how Kafka's serializer packs it (struct format; None: the bytes as
#: they are, UTF-8 for text)
KAFKA_TYPES: dict[TypeName, str | None] = {
    TypeName.INT: ">i",
    TypeName.BIGINT: ">q",
    TypeName.DOUBLE: ">d",
    TypeName.STRING: None,
    TypeName.VARCHAR: None,
    TypeName.BINARY: None,
}
#: what a file topic says of a Kafka-only value format
NOT_ON_FILES = (
    "is read and written on Kafka topics (kafka_topic=...): a file topic holds JSON, CSV, DELIMITED "
    "or PARQUET values (pull queries read its files with DuckDB, which has no Avro, Protobuf or Kafka "
    "serializer's reader)"
)
#: the value formats that take VALUE_SCHEMA_ID (Confluent's wire format)
WITH_SCHEMA_ID = ("AVRO", "PROTOBUF")
#: the message indexes of Confluent's Protobuf wire format naming a file's first message
FIRST_MESSAGE = b"\x00"


@dataclass(frozen=True)
class KafkaValue:
    """A Kafka topic's value format, resolved once from its source's properties."""

    format: ValueFormat
    columns: tuple[Column, ...]
    #: the schema id of Confluent's wire header (AVRO), None: plain Avro binary
    schema_id: int | None = None
    full_name: str = avro.DEFAULT_FULL_NAME

    @classmethod
    def of(cls, src: SourceInfo) -> KafkaValue:
        """The value format of ``src`` (a source on a Kafka topic)."""
        props = src.properties
        return cls(
            ValueFormat(src.format if src.format in ValueFormat.__members__ else "JSON"),
            tuple(c for c in src.columns if not c.key),
            props.get("value_schema_id"),
            props.get("value_avro_schema_full_name", avro.DEFAULT_FULL_NAME),
        )

    @property
    def header(self) -> bytes:
        """Confluent's wire header every value starts with (empty without a schema id); a
        PROTOBUF one ends with the message indexes of the first message."""
        if self.schema_id is None:
            return b""
        indexes = FIRST_MESSAGE if self.format is ValueFormat.PROTOBUF else b""
        return MAGIC + self.schema_id.to_bytes(4, "big") + indexes

    @property
    def avro_schema(self) -> str:
        """The Avro schema of the value columns, as JSON text (what Spark and a registry take)."""
        return json.dumps(avro.schema(self.columns, self.full_name))

    @property
    def proto_schema(self) -> str:
        """The ``.proto`` text of the value columns (what a registry takes for the schema id)."""
        return protobuf.text(self.columns)

    @property
    def single(self) -> Column:
        """The one value column of a KAFKA value."""
        return self.columns[0]

    def encode(self, row: Mapping[str, Any]) -> bytes | None:
        """``row``'s value columns as this format's bytes (JSON: see :mod:`.kafka_records`);
        a KAFKA value that is null is no bytes (a null record value, as Kafka's serializers)."""
        if self.format is ValueFormat.AVRO:
            return self.header + avro.encode(row, self.columns)
        if self.format is ValueFormat.PROTOBUF:
            return self.header + protobuf.encode(row, self.columns)
        value = row.get(self.single.name)
        if value is None:
            return None
        packing = KAFKA_TYPES[self.single.type.name]
        if packing is not None:
            return struct.pack(packing, value)
        if self.single.type.name is TypeName.BINARY:  # BYTES as JSON values hold them: base64
            return value if isinstance(value, bytes) else base64.b64decode(str(value))
        return str(value).encode("utf-8")

    def decode(self, data: bytes, *, exact: bool = False) -> dict[str, Any] | None:
        """The value columns of ``data`` (JSON values, as :mod:`.kafka_records` gives them),
        None when it is not a value of this format (``exact``: PROTOBUF's DECIMAL as text and
        TIMESTAMP to the microsecond, see :func:`.protobuf.decode`)."""
        if self.format in (ValueFormat.AVRO, ValueFormat.PROTOBUF):
            if not data.startswith(self.header):
                return None
            if self.format is ValueFormat.PROTOBUF:
                return protobuf.decode(data[len(self.header) :], self.columns, exact=exact)
            return avro.decode(data[len(self.header) :], self.columns)
        packing = KAFKA_TYPES[self.single.type.name]
        if packing is None:
            text = self.single.type.name is not TypeName.BINARY
            shown = data.decode("utf-8", "replace") if text else base64.b64encode(data).decode("ascii")
            return {self.single.name: shown}
        if len(data) != struct.calcsize(packing):
            return None
        return {self.single.name: struct.unpack(packing, data)[0]}


def problem(fmt: str, props: Mapping[str, Any], columns: Sequence[Column], *, kafka: bool) -> tuple[str, str] | None:
    """(property, problem) of a source's value format ``fmt`` with its ``props`` and
    ``columns``; None when there is none."""
    value_columns = [c for c in columns if not c.key]
    if fmt in ValueFormat.__members__ and fmt != "JSON" and not kafka:
        return "value_format", f"value_format {fmt!r} {NOT_ON_FILES}"
    if kafka and fmt not in ValueFormat.__members__:
        formats = ", ".join(ValueFormat.__members__)
        return "value_format", f"Kafka topics hold {formats} values: value_format {fmt!r} is for file topics"
    if "value_schema_id" in props and fmt not in WITH_SCHEMA_ID:
        return "value_schema_id", f"value_schema_id is for value_format='AVRO' or 'PROTOBUF', not {fmt}"
    if "value_avro_schema_full_name" in props and fmt != "AVRO":
        return "value_avro_schema_full_name", f"value_avro_schema_full_name is for value_format='AVRO', not {fmt}"
    if fmt == "PROTOBUF" and (why := protobuf.columns_problem(value_columns)):
        return "value_format", why
    if fmt == "AVRO":
        full_name = props.get("value_avro_schema_full_name", avro.DEFAULT_FULL_NAME)
        why = avro.full_name_problem(full_name) or avro.columns_problem(value_columns)
        if why:
            return ("value_avro_schema_full_name" if avro.full_name_problem(full_name) else "value_format"), why
    if fmt == "KAFKA":
        types = ", ".join(t.value for t in KAFKA_TYPES if t is not TypeName.VARCHAR)
        if len(value_columns) != 1 or value_columns[0].type.name not in KAFKA_TYPES:
            shown = ", ".join(f"{c.name} {c.type}" for c in value_columns) or "none"
            return "value_format", (
                f"a KAFKA value is one column of type {types} (as Kafka's serializers write it); "
                f"the value columns here: {shown}"
            )
    return None
