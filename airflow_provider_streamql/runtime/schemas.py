"""How a source's records are read on the Spark side: the declared columns as a DDL schema,
the reader options of each format, the session settings under which a parser reads every
field of every record, and the two columns that tell a bad record apart (the text Spark
could not parse and where the record comes from).

The file connector (:mod:`.connectors`), the Kafka connector (:mod:`.kafka`) and the
bad-record guard (:mod:`.badrecords`) all read records this way; they import it, never one
another for it, so their imports form a tree with this module at its root.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..catalog import SourceInfo
from ..language.statements import Column
from ..language.types import SqlType, TypeName
from ..storage.topics import value_delimiter

#: the column holding a record's text when Spark cannot parse it (PERMISSIVE mode)
CORRUPT = "_corrupt_record"
#: the column holding where a record comes from: its file, or kafka:topic/partition@offset
FILE = "__sq_file"
#: formats whose records are checked one by one (a PARQUET file Spark cannot read fails the
#: query); AVRO, PROTOBUF and KAFKA values are on Kafka topics only (:mod:`.kafka_formats`)
CHECKED_FORMATS = ("JSON", "CSV", "DELIMITED", "AVRO", "PROTOBUF", "KAFKA")
#: format -> extra reader/writer options (DELIMITED adds its separator, :func:`format_options`)
FORMAT_OPTIONS = {"JSON": {}, "CSV": {"header": "true"}, "DELIMITED": {"header": "false"}, "PARQUET": {}}


def checked(src: SourceInfo) -> bool:
    """Whether ``src``'s records are checked one by one for bad records."""
    return src.format in CHECKED_FORMATS


#: each type without parameters or elements -> its Spark type
SPARK_TYPES: dict[TypeName, T.DataType] = {
    TypeName.BOOLEAN: T.BooleanType(),
    TypeName.TINYINT: T.ByteType(),
    TypeName.SMALLINT: T.ShortType(),
    TypeName.INT: T.IntegerType(),
    TypeName.BIGINT: T.LongType(),
    TypeName.FLOAT: T.FloatType(),
    TypeName.DOUBLE: T.DoubleType(),
    TypeName.STRING: T.StringType(),
    TypeName.BINARY: T.BinaryType(),
    TypeName.DATE: T.DateType(),
    TypeName.TIMESTAMP: T.TimestampType(),
    TypeName.TIMESTAMP_NTZ: T.TimestampNTZType(),
}


def spark_type(t: SqlType) -> T.DataType:
    """The Spark type of a column type, built from the typed value (never from text)."""
    if t.name is TypeName.DECIMAL:
        return T.DecimalType(t.precision, t.scale)
    if t.name in (TypeName.VARCHAR, TypeName.CHAR):
        # a record schema: Spark refuses char/varchar outside a table's (ksqlDB's VARCHAR is
        # STRING; pull queries on DuckDB read both as VARCHAR alike)
        return T.StringType()
    if t.name is TypeName.ARRAY:
        return T.ArrayType(spark_type(t.elements[0]))
    if t.name is TypeName.MAP:
        return T.MapType(spark_type(t.elements[0]), spark_type(t.elements[1]))
    if t.name is TypeName.STRUCT:
        return T.StructType([T.StructField(name, spark_type(f)) for name, f in t.fields])
    return SPARK_TYPES[t.name]


def event_time(src: SourceInfo, *, lenient: bool = False) -> SparkColumn:
    """The event time of a source whose timestamp column is text: that column read with its
    ``timestamp_format`` (``lenient``: NULL where the text does not match, to tell such a
    record apart; else Spark's ANSI ``to_timestamp``, which fails on it)."""
    text, pattern = F.col(f"`{src.timestamp_column}`"), src.text_time or ""
    return F.try_to_timestamp(text, F.lit(pattern)) if lenient else F.to_timestamp(text, pattern)


def ddl_schema(columns: Iterable[Column], *, corrupt: bool = False) -> T.StructType:
    """``columns`` as a Spark schema under their canonical names; ``corrupt``: with the
    corrupt-record column last."""
    fields = [T.StructField(c.name, spark_type(c.type)) for c in columns]
    return T.StructType(fields + ([T.StructField(CORRUPT, T.StringType())] if corrupt else []))


def format_options(src: SourceInfo) -> dict[str, str]:
    """The options reading and writing ``src``'s files take: a CSV header; a DELIMITED
    source's separator."""
    options = dict(FORMAT_OPTIONS[src.format])
    if src.format == "DELIMITED":
        options["sep"] = value_delimiter(src.properties)
    return options


def reader_options(src: SourceInfo) -> dict[str, str]:
    """The options reading ``src``'s files takes (a CSV header, a timestamp format)."""
    options = format_options(src)
    if src.properties.get("timestamp_format") and src.text_time is None:  # else it is the text column's
        options["timestampFormat"] = src.properties["timestamp_format"]
    return options


def parse_options(src: SourceInfo, *, fail_fast: bool = False) -> dict[str, str]:
    """For a checked source: keep a record Spark cannot parse, its text in :data:`CORRUPT`;
    ``fail_fast``: fail the read at the first such record instead (no :data:`CORRUPT`)."""
    if not checked(src):
        return {}
    return {"mode": "FAILFAST"} if fail_fast else {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


#: settings under which Spark's parsers read every field of every record, so a record bad in
#: any field fails a fail-fast read: with a filter pushed into it, the JSON or CSV parser drops
#: a record at the first field that fails the filter, before it reads the rest; with column
#: pruning, the CSV parser tokenizes only the columns the query reads and misses a record
#: short of fields (only those columns are converted either way, as for JSON)
WHOLE_RECORDS = {
    "spark.sql.json.filterPushdown.enabled": "false",
    "spark.sql.csv.filterPushdown.enabled": "false",
    "spark.sql.csv.parser.columnPruning.enabled": "false",
}
_reading_whole_records: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def read_whole_records(spark: SparkSession) -> None:
    """Set :data:`WHOLE_RECORDS` on ``spark`` before a query starts (it keeps the settings it
    started with), once per session: nothing in streamql sets them otherwise, and each is a
    call into the JVM (three in every start of a RESUME ALL's, 8-10 ms under its load)."""
    if spark in _reading_whole_records:
        return
    for key, value in WHOLE_RECORDS.items():
        spark.conf.set(key, value)
    _reading_whole_records.add(spark)
