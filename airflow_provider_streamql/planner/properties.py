"""The WITH properties of a stream or table, as three tables: those streamql gives a meaning
(:data:`SOURCE_PROPERTIES`), ksqlDB's that it accepts and records where file topics give them
no effect (:data:`RECORDED`), and ksqlDB's it refuses with the reason (:data:`REFUSED`,
:data:`VALUE_FORMATS_REFUSED`). A property ksqlDB users write is never "unknown"; each problem
is given with the property it is about, so the error points at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..catalog import SourceInfo
from ..language.compiler import CompiledQuery
from ..language.expectations import EXPECT, ON_VIOLATION, OnViolation, expectation, on_violation_of
from ..language.rates import RateLimit
from ..language.starting import START
from ..language.statements import Column
from ..language.types import TypeName
from ..storage import avro, kafka_values, topics
from ..storage.deadletter import TOPIC_PROPERTY, dead_letter_name, topic_name_problem

#: a property's check: the problem with its value, or None
Check = Callable[[Any], str | None]


def _text(what: str) -> Check:
    return lambda v: None if isinstance(v, str) and v else f"must be {what}"


def _positive_int(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v > 0 else "must be a whole number above 0"


def _true(reason: str) -> Check:
    return lambda v: None if v is True else reason


def _value_format_problem(fmt: str) -> str | None:
    if fmt in VALUE_FORMATS_REFUSED:
        return f"{fmt} {VALUE_FORMATS_REFUSED[fmt]}"
    known = [*topics.FORMATS, *(f for f in kafka_values.ValueFormat.__members__ if f not in topics.FORMATS)]
    return None if fmt in known else f"must be one of {', '.join(known)}"


# WITH (...) property -> check of its value (None: accepted as is).
SOURCE_PROPERTIES: dict[str, Check | None] = {
    "path": None,  # checked and resolved by the storage layout
    "value_format": lambda v: _value_format_problem(str(v).upper()),
    "kafka_topic": lambda v: None if isinstance(v, str) and v and "," not in v else "must name one Kafka topic",
    "timestamp": _text("the name of a TIMESTAMP column"),
    "timestamp_format": _text("a Spark datetime pattern such as 'yyyy-MM-dd HH:mm:ss'"),
    "value_delimiter": topics.delimiter_problem,  # DELIMITED values only
    # ksqlDB's, with streamql's meaning
    "key_format": _text("one of ksqlDB's key formats (KAFKA, JSON, NONE, ...)"),  # see key_format_problem
    "wrap_single_value": _true(
        "streamql writes every value as a JSON object (ksqlDB's WRAP_SINGLE_VALUE=true); "
        "an unwrapped single value is not read or written"
    ),
    "partitions": _positive_int,
    "replicas": _positive_int,
    "retention_ms": _positive_int,
    # AVRO and PROTOBUF values on a Kafka topic (storage/kafka_values.py)
    "value_schema_id": _positive_int,
    "value_avro_schema_full_name": avro.full_name_problem,
}

#: WITH properties of a persistent query itself (recorded in its settings, kept by a CREATE OR
#: REPLACE that does not restate them), not of its output: its error policy, checked at
#: planning, the Kafka topic of its dead letters (:func:`dead_letter_topic_problem`), its
#: rate limits (:mod:`..language.rates`; ALTER QUERY changes them) and where its new
#: checkpoint starts (``start``, recorded as the settings it stands for)
QUERY_PROPERTIES = frozenset({"on_error", TOPIC_PROPERTY, *RateLimit, START, EXPECT, ON_VIOLATION})

#: ksqlDB's properties accepted and recorded, with what they do here (DESCRIBE ... EXTENDED)
RECORDED: dict[str, str] = {
    "partitions": "recorded: a file topic has no partitions; a Kafka topic is made outside streamql",
    "replicas": "recorded: a file topic has no replicas; a Kafka topic is made outside streamql",
    "retention_ms": "recorded: a file topic keeps its records until DROP ... DELETE TOPIC",
    "wrap_single_value": "every value is a JSON object",
    "key_format": "the key as streamql writes it; a file topic holds its KEY columns in the value record",
}

#: ksqlDB's properties streamql refuses, with the reason
REFUSED: dict[str, str] = {
    "key_schema_id": "streamql reads no schema registry: the declared columns are the schema",
    "key_schema_full_name": "streamql reads no schema registry: the declared columns are the schema",
    "value_schema_full_name": "streamql reads no schema registry: the declared columns are the schema "
    "(an AVRO record's name is value_avro_schema_full_name)",
    "window_type": "a windowed key is not read from a topic: declare the window bounds as columns",
    "window_size": "a windowed key is not read from a topic: declare the window bounds as columns",
    "key_delimiter": "a key is one column's text or a JSON object; a DELIMITED key is not read or written",
}

#: ksqlDB's value formats streamql refuses, with the reason
VALUE_FORMATS_REFUSED: dict[str, str] = {
    "PROTOBUF_NOSR": "is not a format of its own here: value_format='PROTOBUF' without value_schema_id reads and "
    "writes the same bytes (a plain message of the declared columns, no schema registry header)",
    "JSON_SR": "is not read or written: streamql reads no schema registry; use value_format='JSON' (plain JSON "
    "objects) or 'AVRO' with value_schema_id (Confluent's wire format)",
}

#: ksqlDB's key formats
KEY_FORMATS = ("KAFKA", "JSON", "NONE", "DELIMITED", "AVRO", "PROTOBUF", "PROTOBUF_NOSR", "JSON_SR")


def with_format(props: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """ksqlDB's ``FORMAT`` (key and value format at once) as ``key_format`` and
    ``value_format``; the problem when it is given with either of them."""
    if "format" not in props:
        return props, None
    if "key_format" in props or "value_format" in props:
        return props, "give FORMAT or KEY_FORMAT and VALUE_FORMAT, not both (as in ksqlDB)"
    fmt = props["format"]
    rest = {k: v for k, v in props.items() if k != "format"}
    return {**rest, "value_format": fmt, "key_format": fmt}, None


def key_format_problem(value: Any, columns: Sequence[Column], kafka: bool) -> str | None:
    """What is wrong with ``KEY_FORMAT = value`` for a source of ``columns``: a file topic
    holds its KEY columns in the value record (any ksqlDB key format is recorded, with no
    effect); a Kafka topic's key is written and read as streamql writes it, which is one
    ksqlDB key format."""
    fmt = str(value).upper()
    if fmt not in KEY_FORMATS:
        return f"must be one of ksqlDB's key formats ({', '.join(KEY_FORMATS)})"
    if not kafka:
        return None
    keys = [c for c in columns if c.key]
    written: tuple[str, ...]
    if not keys:
        written, how = ("NONE", "KAFKA"), "no key"
    elif len(keys) == 1 and keys[0].type.name in (TypeName.STRING, TypeName.VARCHAR):
        written, how = ("KAFKA",), f"its one STRING key column {keys[0].name} as UTF-8 text"
    elif len(keys) == 1:
        written, how = ("JSON",), f"its one key column {keys[0].name} as a JSON value"
    else:
        written, how = ("JSON",), "its key columns as a JSON object"
    if fmt in written:
        return None
    return f"on a Kafka topic streamql writes {how} (KEY_FORMAT={written[0]!r}); {fmt} is not read or written"


def problems(props: dict[str, Any], columns: Sequence[Column], *, kafka: bool) -> Iterator[tuple[str, str]]:
    """Each (property, problem) of ``props`` for a source of ``columns``, in the order given."""
    for key, value in props.items():
        if key in REFUSED:
            yield key, f"property {key!r} is refused: {REFUSED[key]}"
        elif key not in SOURCE_PROPERTIES:
            yield key, f"unknown property {key!r} (known: {', '.join(SOURCE_PROPERTIES)})"
        elif (check := SOURCE_PROPERTIES[key]) is not None and (problem := check(value)):
            yield key, f"property {key} = {value!r}: {problem}"
        elif key == "key_format" and (problem := key_format_problem(value, columns, kafka)):
            yield key, f"property key_format = {value!r}: {problem}"


def recorded(props: dict[str, Any]) -> list[str]:
    """What each recorded ksqlDB property of a source does here, for DESCRIBE ... EXTENDED."""
    return [f"{key} = {props[key]!r} ({note})" for key, note in RECORDED.items() if key in props]


def dead_letter_topic_problem(
    query_id: str, topic: object, compiled: CompiledQuery, sources: Mapping[str, SourceInfo], sink: SourceInfo
) -> str | None:
    """What is wrong with ``WITH (dead_letter_topic=topic)`` on query ``query_id`` reading
    what ``compiled`` reads into ``sink`` (None: nothing): not a Kafka topic name, a query reading files, a
    dead-letter stream the query has already elsewhere, or the topic of another stream or table."""
    if problem := topic_name_problem(topic):
        return problem
    files = [name for name in compiled.sources if not sources[name].kafka_topic]
    if files:
        return (
            f"a dead-letter topic is for queries reading Kafka topics only; {', '.join(files)} is not one "
            f"(its dead letters go to the stream {dead_letter_name(query_id)} in files)"
        )
    letters = sources.get(dead_letter_name(query_id))
    if letters is not None and letters.kafka_topic != topic:
        where = f"on Kafka topic {letters.kafka_topic!r}" if letters.kafka_topic else "in files"
        return f"the query's dead-letter stream {letters.name} is {where} already (DROP STREAM {letters.name} first)"
    others = [sink, *(s for s in sources.values() if s is not letters)]
    taken = next((s.name for s in others if s.kafka_topic == topic), None)
    if taken is not None:
        return f"it is the topic of {taken}; dead letters go to a topic of their own"
    return None


class PropertyProblem(ValueError):
    """What is wrong with a query's WITH property ``name`` (the error points at it)."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def expectation_settings(props: Mapping[str, Any], sink: SourceInfo) -> dict[str, str]:
    """The settings ``WITH (expect = ..., on_violation = ...)`` records for a query writing
    ``sink`` (none without ``expect``): the condition analyzed over the output's columns
    (:mod:`..language.expectations`). A :class:`PropertyProblem` otherwise."""
    given, mode = props.get(EXPECT), props.get(ON_VIOLATION)
    if given is None:
        if mode is not None:
            raise PropertyProblem(
                ON_VIOLATION,
                f"property {ON_VIOLATION} = {mode!r}: says what a row violating the expectation "
                f"does; give the expectation too (expect = '<boolean expression>')",
            )
        return {}
    try:
        violation = OnViolation.LOG if mode is None else on_violation_of(mode)
    except ValueError as e:
        raise PropertyProblem(ON_VIOLATION, f"property {ON_VIOLATION} = {mode!r}: {e}") from None
    if not sink.kafka_topic and sink.writer_query and sink.kind == "STREAM" and not sink.batch_files:
        raise PropertyProblem(
            EXPECT,
            f"property {EXPECT} = {given!r}: {sink.name} is written by Spark's file sink (an output made "
            f"before several writers were possible), which checks no expectation; create it again to check one",
        )
    try:
        return expectation(given, sink.columns, violation).settings()
    except ValueError as e:
        raise PropertyProblem(EXPECT, f"property {EXPECT} = {given!r}: {e}") from None
