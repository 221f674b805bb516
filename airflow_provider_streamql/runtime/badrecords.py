"""Records a query cannot read with its source's declared schema, on the Spark side.

A JSON or CSV record is bad when Spark cannot parse it with the declared columns (malformed
text, a value of the wrong type) or, for a TABLE, a PRIMARY KEY column is missing or null. A
STREAM record with a null or missing KEY column is a valid record, as in ksqlDB: it flows
through filters and projections, and never matches in a join (SQL equality on NULL). Sources are read in PERMISSIVE
mode with a corrupt-record column (:mod:`.schemas`), and :func:`guard` applies the query's
error policy:

- ``FAIL`` and ``PAUSE``: a bad record fails its micro-batch (so nothing of the batch
  commits); the runtime then finds every bad record of that batch with :func:`scan_files`
  and fails or pauses the query. A file is read in Spark's FAILFAST mode, which fails the
  read at a record it cannot parse (:func:`parse_failed`) and costs nothing more than an
  unchecked read; a TABLE's missing key and a Kafka record fail it with a message starting
  with :data:`MARKER`. Records skipped by ``RESUME ... SKIP BAD RECORDS`` must be told apart
  from the others, so a query that skips some reads PERMISSIVE as under LOG_AND_CONTINUE.
- ``LOG_AND_CONTINUE``: bad records are left out and sent to the dead-letter stream (a
  Kafka topic for a query reading Kafka topics only). Those of a file source are counted as
  the query reads them (:data:`BAD_COUNT`), and a batch that left some out has its files
  read again once it committed (:mod:`.file_dead_letters`); those of a Kafka topic are sent
  by a companion query (:func:`dead_letters`).

Records skipped by ``RESUME ... SKIP BAD RECORDS`` are left out by their ``record_id``: a
hash of the file and the record's text, computed by the same Spark expression wherever it is
needed. PARQUET sources are not checked record by record (a file Spark cannot read fails
the query).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..catalog import BadRecord, BadRecordStatus, SourceInfo
from ..language.types import TypeName
from ..storage.deadletter import append_dead_letters, dead_letter_source, dead_letter_topic
from ..storage.topics import FORMATS, uri_path, value_delimiter
from . import kafka_formats
from .kafka_dead_letters import LOGGED, KafkaDeadLetters
from .schemas import CORRUPT, FILE, checked, ddl_schema, event_time, parse_options, reader_options

MARKER = "STREAMQL_BAD_RECORD"
#: the error class of a record Spark could not parse in FAILFAST mode (in the error's causes)
PARSE_FAILURE = "[MALFORMED_RECORD_IN_PARSING"
RAW_LIMIT = 2000  # characters of a bad record kept in the catalog and the dead-letter stream
#: prefix of the observed metric counting the bad records a query's read of a file source
#: left out under LOG_AND_CONTINUE (one per source, named after it), in each batch's progress
BAD_COUNT = "streamql_bad_records:"


def _text(src: SourceInfo, df: DataFrame | None = None) -> SparkColumn:
    """The record as text: what Spark could not parse, else the parsed row as JSON (``df``:
    a fail-fast read, whose every record was parsed)."""
    parsed = F.to_json(F.struct(*[F.col(f"`{c.name}`") for c in src.columns]))
    return parsed if df is not None and CORRUPT not in df.columns else F.coalesce(F.col(CORRUPT), parsed)


def _required_keys(src: SourceInfo) -> list[str]:
    """The key columns a record cannot do without: a TABLE's PRIMARY KEY (a row of a table
    is its key's latest value). A stream's KEY may be null or missing, as in ksqlDB."""
    return src.key_columns if src.kind == "TABLE" else []


def _bad(src: SourceInfo, df: DataFrame | None = None) -> SparkColumn:
    """A bad record of ``src``: not parsed, a required key null, or an event time written as
    text that its ``timestamp_format`` does not read (``df``: a fail-fast read, without the
    corrupt-record column, whose unparsed records fail the read instead)."""
    condition = F.lit(False) if df is not None and CORRUPT not in df.columns else F.col(CORRUPT).isNotNull()
    for key in _required_keys(src):
        condition = condition | F.col(f"`{key}`").isNull()
    if src.text_time is not None:
        text = F.col(f"`{src.timestamp_column}`")
        condition = condition | (text.isNotNull() & event_time(src, lenient=True).isNull())
    return condition


def _record_id(src: SourceInfo) -> SparkColumn:
    return F.sha2(F.concat_ws("\u0001", F.col(FILE), _text(src)), 256)


@dataclass(frozen=True)
class RecordGuard:
    """A query's error policy and the records it was told to skip."""

    query_id: str
    policy: str
    skipped: frozenset[str] = frozenset()

    @property
    def fails_fast(self) -> bool:
        """Whether a file is read in FAILFAST mode: a bad record fails the batch and no
        record has to be told apart from the others (none skipped)."""
        return self.policy in ("FAIL", "PAUSE") and not self.skipped

    @property
    def sends_dead_letters(self) -> bool:
        """Whether bad records are sent to the dead-letter stream (those of files after their
        batch, those of Kafka topics by a companion query)."""
        return self.policy == "LOG_AND_CONTINUE"

    def apply(self, df: DataFrame, src: SourceInfo) -> DataFrame:
        return guard(df, src, self.query_id, self.policy, self.skipped)


def parse_failed(error: object) -> bool:
    """Whether a query failed because Spark could not parse a record of a fail-fast read."""
    return PARSE_FAILURE in str(error)


def guard(df: DataFrame, src: SourceInfo, query_id: str, policy: str, skipped: Iterable[str]) -> DataFrame:
    """Apply ``policy`` to the bad records of a streaming read of ``src`` (read with its
    corrupt-record column, or fail-fast, :mod:`.schemas`); returns the declared columns only,
    so plans and state schemas are the same as without checking."""
    if not checked(src):
        return df
    if CORRUPT not in df.columns and not _required_keys(src) and src.text_time is None:  # Spark checks
        return df.select(*_declared(src))
    skipped = sorted(skipped)
    if policy not in ("FAIL", "PAUSE"):
        if not src.kafka_topic:  # counted as read: the batch's files are read again only if any
            df = df.observe(f"{BAD_COUNT}{src.name}", F.count(F.when(_bad(src), 1)).alias("records"))
        return df.where(~_bad(src)).select(*_declared(src))
    left_out = F.lit(False)
    if skipped:  # a skipped record is known by its position: read it for every record
        df = _with_position(df)
        left_out = _record_id(src).isin(skipped)
        df = df.where(~(_bad(src) & left_out))
    # A file's records have no position column unless skipped ones must be told apart: a
    # per-row _metadata column costs about a tenth of a scan, and input_file_name() is
    # evaluated only for the bad record that raises (Kafka reads carry their position).
    position = F.col(FILE) if FILE in df.columns else F.input_file_name()
    message = F.concat(
        F.lit(f"{MARKER} {query_id} cannot read a record of {src.name} in "),
        position,
        F.lit(": "),
        F.substring(_text(src, df), 1, 300),
    )
    # Every column of a bad record raises: whatever the query reads, its bad records fail
    # the batch. (A filter would not do: the optimizer would evaluate the query's own
    # filters, or the "x IS NOT NULL" it infers from them, first and drop the record.)
    held = _bad(src, df) & ~left_out
    return df.select(
        *[F.when(held, F.raise_error(message)).otherwise(F.col(f"`{c.name}`")).alias(c.name) for c in src.columns]
    )


def _declared(src: SourceInfo) -> list[SparkColumn]:
    return [F.col(f"`{c.name}`") for c in src.columns]


def _with_position(df: DataFrame) -> DataFrame:
    """Where each record comes from: its file (Kafka reads carry topic/partition@offset)."""
    return df if FILE in df.columns else df.withColumn(FILE, F.col("_metadata.file_path"))


def dead_letters(df: DataFrame, src: SourceInfo) -> DataFrame:
    """The bad records of a streaming read of ``src``: source, file, text, record_id and
    the parsed values as JSON (for telling which column was wrong)."""
    return (
        _with_position(df)
        .where(_bad(src))
        .select(
            F.lit(src.name).alias("source"),
            F.col(FILE).alias("file"),
            _text(src).alias("text"),
            _record_id(src).alias("record_id"),
            F.col(CORRUPT).isNotNull().alias("corrupt"),
            F.to_json(F.struct(*[F.col(f"`{c.name}`") for c in src.columns])).alias("parsed"),
        )
    )


def scan_files(
    spark: SparkSession, src: SourceInfo, files: Iterable[str], *, query_id: str, batch_id: int, status: BadRecordStatus
) -> list[BadRecord]:
    """Every bad record of ``files`` (data files of ``src``), as Spark reads them, with its
    line and what is wrong with it."""
    files = sorted(f for f in files if os.path.exists(f))
    if not checked(src) or not files:
        return []
    df = (
        spark.read.format(FORMATS[src.format][0])
        .schema(ddl_schema(src.columns, corrupt=True))
        .options(**reader_options(src), **parse_options(src))
        .load(files)
    )
    return describe(
        dead_letters(df, src).collect(), {src.name: src}, query_id=query_id, batch_id=batch_id, status=status
    )


def describe(
    rows, sources: dict[str, SourceInfo], *, query_id: str, batch_id: int, status: BadRecordStatus
) -> list[BadRecord]:
    """Rows of :func:`dead_letters` as bad records: the line each sits on in its file, the
    raw text (truncated to :data:`RAW_LIMIT`) and the reason."""
    lines: dict[str, list[str]] = {}
    used: set[tuple[str, int]] = set()
    records = []
    now = time.time()
    for row in rows:
        src = sources[row["source"]]
        path = row["file"] if row["file"].startswith("kafka:") else uri_path(row["file"])
        if path not in lines:
            lines[path] = _read_lines(path)
        line, raw = _locate(lines[path], row, src, path, used)
        records.append(
            BadRecord(
                query_id=query_id,
                record_id=row["record_id"],
                batch_id=batch_id,
                source=src.name,
                file=path,
                line=line,
                raw=raw[:RAW_LIMIT],
                error=_reason(raw, row, src),
                status=status,
                recorded_at=now,
            )
        )
    return records


def _read_lines(path: str) -> list[str]:
    if path.startswith("kafka:"):
        return []  # a Kafka record's position is its topic, partition and offset
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def _locate(lines: list[str], row, src: SourceInfo, path: str, used: set) -> tuple[int | None, str]:
    """(line number, raw text) of the bad record in its file; the first line (after a CSV
    header) that is exactly the text Spark could not parse, or, for a missing key, that
    holds the same values."""
    start = 1 if src.format == "CSV" else 0
    for number, text in enumerate(lines[start:], start=start + 1):
        if (path, number) in used:
            continue
        if text == row["text"] if row["corrupt"] else _same_values(text, row["parsed"], src):
            used.add((path, number))
            return number, text
    return None, row["text"]


def _same_values(text: str, parsed: str, src: SourceInfo) -> bool:
    """The line holds the values Spark parsed (dates and times aside: their text differs)."""
    values = _raw_values(text, src)
    if values is None:
        return False
    want = json.loads(parsed)
    return all(
        _plain(values.get(c.name)) == _plain(want.get(c.name))
        for c in src.columns
        if not (c.type.is_timestamp or c.type.name is TypeName.DATE)
    )


def _plain(value):
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _raw_values(text: str, src: SourceInfo) -> dict | None:
    """The record's fields by declared column name, as written (None if unreadable)."""
    if src.format == "JSON":
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        by_lower = {k.lower(): v for k, v in data.items()}
        return {c.name: by_lower.get(c.name.lower()) for c in src.columns}
    cells = _cells(text, src)
    return {c.name: cells[i] if i < len(cells) else None for i, c in enumerate(src.columns)}


def _cells(text: str, src: SourceInfo) -> list[str]:
    """The fields of a CSV or DELIMITED record."""
    delimiter = value_delimiter(src.properties) if src.format == "DELIMITED" else ","
    return next(csv.reader(io.StringIO(text), delimiter=delimiter), [])


def _json_problem(text: str) -> str | None:
    """What is wrong with a JSON record as far as its text alone tells (None: a JSON object)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        return f"malformed JSON: {getattr(e, 'msg', e)} (column {getattr(e, 'colno', '?')})"
    return None if isinstance(data, dict) else f"not a JSON object: {type(data).__name__}"


def _reason(raw: str, row, src: SourceInfo) -> str:
    """What is wrong with a bad record, in words."""
    if src.format in ("AVRO", "PROTOBUF", "KAFKA"):  # Kafka values: the decoder said why
        return kafka_formats.reason(raw) or "cannot be read with the declared schema"
    if src.format == "JSON":
        if problem := _json_problem(raw):
            return problem
    else:
        cells = _cells(raw, src)
        if len(cells) != len(src.columns):
            return f"expected {len(src.columns)} {src.format} fields, found {len(cells)}"
    values, parsed = _raw_values(raw, src) or {}, json.loads(row["parsed"])
    for c in src.columns:
        given = values.get(c.name)
        if given not in (None, "") and parsed.get(c.name) is None:
            return f"value {given!r} does not fit column {c.name!r} of type {c.type}"
    for key in _required_keys(src):
        if values.get(key) in (None, ""):
            return f"missing required column {key!r} (the table's PRIMARY KEY)"
    return "cannot be read with the declared schema"


def records_in_error(error: str, query_id: str, batch_id: int, status: BadRecordStatus) -> list[BadRecord]:
    """The bad record the guard's error names (its position and text), when it cannot be
    found again in files: a Kafka record. Its id matches the guard's unless the text was
    longer than the error shows."""
    match = re.search(rf"{MARKER} {re.escape(query_id)} cannot read a record of (\S+) in (\S+): (.*)", error, re.DOTALL)
    if not match:
        return []
    source, position, text = match.groups()
    text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", text.strip())
    return [
        BadRecord(
            query_id=query_id,
            batch_id=batch_id,
            source=source,
            file=position,
            line=None,
            raw=text[:RAW_LIMIT],
            error=kafka_formats.reason(text) or _json_problem(text) or "cannot be read with the declared schema",
            record_id=hashlib.sha256(f"{position}\u0001{text}".encode()).hexdigest(),
            status=status,
            recorded_at=time.time(),
        )
    ]


class DeadLetterWriter:
    """The query's bad records to its dead-letter stream and the catalog, once per batch: a
    Kafka topic when the query reads only Kafka topics (:mod:`.kafka_dead_letters`), else one
    file per batch. Called, it is the foreachBatch of the LOG_AND_CONTINUE companion query."""

    def __init__(self, catalog, query, sources: dict[str, SourceInfo]):
        self.catalog, self.query, self.sources = catalog, query, sources
        self.kafka: KafkaDeadLetters | None = (
            None  # the Kafka writer, made at the first batch with dead letters for a topic
        )

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.collect()
        if not rows:
            return
        records = describe(rows, self.sources, query_id=self.query.id, batch_id=batch_id, status=BadRecordStatus.LOGGED)
        self.log(df.sparkSession, records, batch_id, f"logged-b{batch_id:012d}")

    def log(self, spark: SparkSession, records: list[BadRecord], batch_id: int, name: str) -> None:
        """``records`` (left out by batch ``batch_id``) to the dead-letter stream, then the catalog."""
        self.send(spark, records, batch_id, name)
        self.catalog.bad_records.record(records)

    def send(self, spark: SparkSession, records: list[BadRecord], batch_id: int, name: str) -> None:
        """``records`` of batch ``batch_id`` to the dead-letter stream (a file ``name``, written
        once, or the Kafka topic); also the rows an expectation drops."""
        topic = dead_letter_topic(self.query, self.sources)
        target = self.catalog.ensure_source(dead_letter_source(self.query, topic=topic))  # an older one stays
        if target.kafka_topic:
            if self.kafka is None:
                self.kafka = KafkaDeadLetters(self.query, target.kafka_topic, LOGGED)
            self.kafka.send(spark, records, batch_id)
        else:
            append_dead_letters(target, records, name=name)
