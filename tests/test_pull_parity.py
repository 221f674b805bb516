"""A pull query (DuckDB) gives the value a persistent query (Spark) gives for the same
expression: datetime patterns, ROWTIME over text time, and every mapped function.

Each case runs through a real pull query on the engine and, in the slow tests, the Spark
SQL the planner makes of the same SELECT on the shared Spark session; the values must be
equal (an error on both sides counts as equal). What a pull query cannot compute as Spark
does is refused with the reason (fast tests)."""

import datetime
import decimal
import itertools

import pytest
from sqlglot import exp

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ValidationError
from airflow_provider_streamql.language import datetime_patterns
from tests.test_functions import AGGREGATES, MAPPED, ROW, SOURCE, spark_schema

TS = "2024-01-02 03:04:05.678912"  # a TIMESTAMP value every case may read as ts
LATE = "0987-11-22 15:04:05.6"  # another: a short year, an afternoon hour

# expression over s (STRING) and ts (TIMESTAMP), s, ts: datetime calls first
# fmt: off
CASES = [
    # formatting: quoted text, padding, fractions, am/pm, names, offsets (times are UTC)
    ("date_format(ts, 'yyyy-MM-dd''T''HH')", "", TS),
    ("date_format(ts, '''day'' d, ''''yy''''')", "", TS),
    ("date_format(ts, 'y yy yyy yyyy yyyyy')", "", LATE),
    ("date_format(ts, 'y yy yyy yyyy')", "", TS),
    ("date_format(ts, 'M MM MMM MMMM L LL')", "", LATE),
    ("date_format(ts, 'd dd D DD DDD')", "", LATE),
    ("date_format(ts, 'H HH h hh k K a')", "", LATE),
    ("date_format(ts, 'h:mm a')", "", TS),
    ("date_format(ts, 'm mm s ss')", "", TS),
    ("date_format(ts, 'S SS SSS SSSS SSSSSS SSSSSSSSS')", "", TS),
    ("date_format(ts, 'E EEE EEEE G Q')", "", LATE),
    ("date_format(ts, 'X XXX x xx xxx Z ZZZZ ZZZZZ z VV O')", "", TS),
    ("date_format(ts, '100% yyyy-MM-dd')", "", TS),
    ("date_format(CAST(NULL AS TIMESTAMP), '''x''')", "", TS),
    ("FORMAT_TIMESTAMP(ts, 'yyyy-MM-dd HH:mm:ss.SSS')", "", TS),
    ("FORMAT_TIMESTAMP(ts, 'HH:mm', 'Asia/Tokyo')", "", TS),
    ("TIMESTAMPTOSTRING(1704164645678, 'yyyy-MM-dd''T''HH:mm:ss.SSS')", "", TS),
    ("FORMAT_DATE(CAST(ts AS DATE), 'dd/MM/yyyy')", "", TS),
    ("DATETOSTRING(19724, 'yyyy-MM-dd')", "", TS),
    # parsing: exact widths, quoted text, fractions, names, am/pm, offsets, the 1970 year
    ("to_timestamp(s, 'yyyy-MM-dd''T''HH:mm:ss.SSS')", "2024-01-02T03:04:05.678", TS),
    ("to_timestamp(s, 'yyyy-MM-dd HH:mm:ss.SSS')", "2024-01-02 03:04:05.67", TS),
    ("to_timestamp(s, 'yyyy-MM-dd HH:mm:ss.SSSSSS')", "2024-01-02 03:04:05.678912", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd')", "2024-1-2", TS),
    ("try_to_timestamp(s, 'yyyy-M-d')", "2024-1-2", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd')", "12024-01-02", TS),
    ("try_to_timestamp(s, 'y-MM-dd')", "224-01-02", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd')", "2024-02-30", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd')", " 2024-01-02", TS),
    ("try_to_timestamp(s, 'yyyy ''day'' d')", "2024 day 2", TS),
    ("try_to_timestamp(s, 'h:mm a')", "3:04 pm", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd hh:mm a')", "2024-01-02 12:00 AM", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd hh:mm a')", "2024-01-02 13:00 PM", TS),
    ("try_to_timestamp(s, 'HH:mm')", "15:04", TS),
    ("try_to_timestamp(s, 'MMM d yyyy')", "jan 2 2024", TS),
    ("try_to_timestamp(s, 'MMMM d yyyy')", "January 2 2024", TS),
    ("try_to_timestamp(s, 'MMM d yyyy')", "January 2 2024", TS),
    ("try_to_timestamp(s, 'yyyy-DDD')", "2024-002", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd HH:mm:ssxxx')", "2024-01-02 03:04:05+02:00", TS),
    ("try_to_timestamp(s, 'yyyy-MM-dd HH:mm:ssZ')", "2024-01-02 03:04:05-0130", TS),
    ("try_to_timestamp(s, 'yyyy%MM')", "2024%01", TS),
    ("to_timestamp(s, 'yyyy-MM-dd')", "2024-01-02T03", TS),
    ("to_date(s, 'yyyy-MM-dd''T''HH')", "2024-01-02T03", TS),
    ("try_to_date(s, 'dd.MM.yyyy')", "02.01.2024", TS),
    ("PARSE_TIMESTAMP(s, 'yyyy-MM-dd''T''HH:mm:ss.SSS')", "2024-01-02T03:04:05.678", TS),
    ("PARSE_TIMESTAMP(s, 'yyyy-MM-dd HH:mm', 'Europe/Paris')", "2024-07-02 03:04", TS),
    ("PARSE_TIMESTAMP(s, 'yyyy-MM-dd')", "not a date", TS),
    ("STRINGTOTIMESTAMP(s, 'yyyy-MM-dd''T''HH:mm:ss.SSS')", "2024-01-02T03:04:05.678", TS),
    ("PARSE_DATE(s, 'yyyy/MM/dd')", "2024/01/02", TS),
    ("STRINGTODATE(s, 'yyyy/MM/dd')", "2024/01/02", TS),
    ("date_format(to_timestamp(s, 'dd/MM/yyyy HH:mm'), 'yyyy-MM-dd''T''HH:mm')", "02/01/2024 03:04", TS),
    # other functions whose DuckDB form differed
    ("URL_ENCODE_PARAM(s)", "a b~*é/?&=+", TS),
    ("URL_DECODE_PARAM(s)", "a+b%20c%7e", TS),
    ("FROM_DAYS(19724)", "", TS),
    ("array_remove(array(s, NULL, 'x'), 'x')", "a", TS),
    ("CONVERT_TZ(ts, 'America/New_York', 'Europe/Paris')", "", TS),
    # CAST fails where it cannot convert (ANSI, Spark 4's default), never a silent NULL
    ("CAST(s AS INT)", "12", TS),
    ("CAST(s AS INT)", "twelve", TS),
    ("CAST(s AS DOUBLE)", "1.5x", TS),
    ("CAST(s AS DATE)", "2024-02-30", TS),
    ("TRY_CAST(s AS INT)", "twelve", TS),
    ("date_add(CAST(ts AS DATE), 1)", "", TS),
]
# timestamp_format of a text event time, its text: ROWTIME
ROWTIMES = [
    ("yyyy-MM-dd''T''HH:mm:ss", "2024-01-02T03:04:05"),
    ("yyyy-MM-dd''T''HH:mm:ss.SSS", "2024-01-02T03:04:05.678"),
    ("h:mm a", "3:04 PM"),
    ("dd MMM yyyy HH:mm", "02 Jan 2024 03:04"),
    ("yyyy-MM-dd HH:mm:ssxxx", "2024-01-02 03:04:05+02:00"),
]
# a pull query's SELECT -> a fragment of its refusal
REFUSED = [
    ("SELECT date_format(ts, s) FROM par", "pull queries read a datetime pattern only as a string literal"),
    ("SELECT date_format(ts, 'yyyy GGGG') FROM par", "cannot write pattern letter 'G' (GGGG)"),
    ("SELECT date_format(ts, 'YYYY') FROM par", "pattern letter 'Y' (YYYY) of datetime pattern 'YYYY': Spark refuses"),
    ("SELECT date_format(ts, '[yyyy]') FROM par", "'[' is reserved"),
    ("SELECT to_timestamp(s, 'yy-MM-dd') FROM par", "Spark reads two-digit years as 20yy"),
    ("SELECT to_timestamp(s, 'EEE, d MMM yyyy') FROM par", "cannot read pattern letter 'E' (EEE)"),
    ("SELECT try_to_timestamp(s, 'HH:mm:ss.SSSSSSSSS') FROM par", "at most six digits of a fraction"),
    ("SELECT PARSE_TIMESTAMP(s, 'yyyy-MM-dd HH:mm VV') FROM par", "cannot read pattern letter 'V' (VV)"),
    ("SELECT to_timestamp(s, 'yyyy-MM-dd''T''HH:mm:ssXXX') FROM par", "does not read 'Z' for UTC"),
    ("SELECT to_date(s, 'yyyy-MM-dd''T') FROM par", "has a quote that is not closed"),
    ("SELECT MASK(s) FROM par", "pull queries cannot run mask(): DuckDB has no function"),
    ("SELECT URL_EXTRACT_HOST(s) FROM par", "cannot run try_parse_url()"),
    ("SELECT substring_index(s, '.', 1) FROM par", "cannot run substring_index()"),
    # a push query runs on the same DuckDB
    ("SELECT date_format(ts, 'yyyy GGGG') FROM par EMIT CHANGES", "cannot write pattern letter 'G' (GGGG)"),
    ("SELECT JSON_KEYS(s) FROM par EMIT CHANGES", "cannot run json_object_keys()"),
]
# fmt: on
NUMBERS = itertools.count()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("parity")
    engine = Engine(f"sqlite:///{path}/catalog.db", home=str(path), issuer="test")
    engine.execute("CREATE STREAM par (id INT, s STRING, ts TIMESTAMP);")
    rows = {(s, ts) for _, s, ts in CASES}
    ids = {}
    for i, (s, ts) in enumerate(sorted(rows)):
        engine.execute(f"INSERT INTO par VALUES ({i}, '{s}', TIMESTAMP '{ts}')")
        ids[(s, ts)] = i
    for i, (pattern, text) in enumerate(ROWTIMES):
        engine.execute(f"CREATE STREAM rt_{i} (id INT, s STRING) WITH (timestamp='s', timestamp_format='{pattern}');"
                       f"INSERT INTO rt_{i} VALUES (1, '{text}');")
    engine.execute(SOURCE)
    engine.execute("INSERT INTO fn_src VALUES ('a', 'Ab1 x.y', 3, 1704067200000, 2.5, TIMESTAMP '2024-01-01 10:00:00', "
                   "DATE '2024-01-02', ARRAY['b', NULL, 'a'], MAP('x', 1), '{\"a\": {\"b\": 1}, \"c\": [1, 2]}')")
    yield engine, ids
    engine.close()


def pulled(engine: Engine, sql: str):
    """The pull query's values (one per row), or "error", and the error."""
    try:
        [result] = engine.execute(sql)
    except ValidationError as e:
        return "error", str(e)
    return [row[0] for row in result.rows], None


def plain(value):
    """A Spark value as a pull query's answer holds it (JSON-ready, milliseconds)."""
    if isinstance(value, datetime.datetime):
        return value.isoformat(timespec="milliseconds") + "Z"
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    return value


def on_spark(spark, engine: Engine, select: str, frames: dict):
    """The value Spark gives for ``select`` planned as a persistent query (its Spark SQL, on
    the rows of ``frames``: source name -> DataFrame), or "error"."""
    name = f"pp_{next(NUMBERS)}"
    try:
        [result] = engine.execute(f"CREATE STREAM {name} AS {select}")
    except ValidationError as e:
        return "error", str(e)
    query = engine.catalog.query(result.query_id)
    for source, view in query.plan.views.items():
        frames[source].createOrReplaceTempView(view)
    try:
        rows = spark.sql(query.plan.spark_sql).collect()
    except Exception as e:  # Spark's own error: the pull query must fail too
        return "error", str(e).splitlines()[0][:200]
    return [plain(row[0]) for row in rows], None


@pytest.mark.parametrize("sql, fragment", REFUSED, ids=[s for s, _ in REFUSED])
def test_a_pull_query_refuses_what_duckdb_cannot_compute_as_spark_does(engine, sql, fragment):
    e, _ = engine
    with pytest.raises(ValidationError) as info:
        e.execute(sql)
    assert fragment in str(info.value)


def test_every_refused_letter_names_the_letter_and_the_pattern():
    for letter in "YwWuecBnNAF":
        with pytest.raises(ValidationError, match=rf"pattern letter '{letter}'.* of datetime pattern 'yyyy {letter}'"):
            datetime_patterns.formatted(f"yyyy {letter}", exp.column("t"))


def test_a_persistent_query_hands_spark_the_pattern_as_written(engine):
    e, _ = engine
    [result] = e.execute("CREATE STREAM pw AS SELECT to_timestamp(s, '''day'' yyyy-MM-dd''T''HH:mm:ss.SSS') AS v, "
                         "date_format(ts, '''yy'' yy') AS w FROM par")
    sql = e.catalog.query(result.query_id).plan.spark_sql
    assert "TO_TIMESTAMP(s, '\\'day\\' yyyy-MM-dd\\'T\\'HH:mm:ss.SSS')" in sql
    assert "DATE_FORMAT(ts, '\\'yy\\' yy')" in sql


@pytest.fixture(scope="module")
def frames(spark):
    return {"FN_SRC": spark.createDataFrame([tuple(ROW.values())], spark_schema())}


@pytest.mark.slow
@pytest.mark.parametrize("expr, s, ts", CASES, ids=[f"{e} <- {s!r}" for e, s, _ in CASES])
def test_a_datetime_call_gives_in_a_pull_query_what_it_gives_on_spark(engine, spark, expr, s, ts, frames):
    from pyspark.sql import types as T

    e, ids = engine
    i = ids[(s, ts)]
    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("s", T.StringType()),
                           T.StructField("ts", T.TimestampType())])
    at = datetime.datetime.fromisoformat(ts)
    frames = {**frames, "PAR": spark.createDataFrame([(i, s, at)], schema)}
    expected, why = on_spark(spark, e, f"SELECT {expr} AS v FROM par WHERE id = {i}", frames)
    got, error = pulled(e, f"SELECT {expr} AS v FROM par WHERE id = {i}")
    assert got == expected, f"pull query: {got!r} ({error}); Spark: {expected!r} ({why})"


@pytest.mark.slow
@pytest.mark.parametrize("pattern, text", ROWTIMES, ids=[p for p, _ in ROWTIMES])
def test_rowtime_over_text_time_is_the_time_spark_reads(engine, spark, pattern, text):
    from pyspark.sql import functions as F

    from airflow_provider_streamql.runtime.schemas import event_time

    e, _ = engine
    i = [p for p, _ in ROWTIMES].index(pattern)
    src = e.catalog.source(f"RT_{i}")
    frame = spark.createDataFrame([(1, text)], "id INT, s STRING")
    [[expected]] = frame.select(F.unix_millis(event_time(src))).collect()
    assert pulled(e, f"SELECT ROWTIME FROM rt_{i}") == ([expected], None)


SCALARS = [(call, spark_sql) for call, spark_sql, _ in MAPPED if call.split("(")[0].upper() not in AGGREGATES]
NONDETERMINISTIC = ("RANDOM", "UUID", "UNIX_TIMESTAMP()", "UNIX_DATE()")


@pytest.mark.slow
def test_every_mapped_call_gives_in_a_pull_query_what_it_gives_on_spark(engine, spark, frames):
    """Every scalar call of tests/test_functions.py's MAPPED on its ROW: the pull query's value
    is Spark's, or the pull query refuses the call with a reason (never another value)."""
    e, _ = engine
    differ = []
    for call, _ in SCALARS:
        if call.upper().startswith(NONDETERMINISTIC):
            continue
        expected, why = on_spark(spark, e, f"SELECT {call} AS v FROM fn_src", dict(frames))
        got, error = pulled(e, f"SELECT {call} AS v FROM fn_src")
        refused = error is not None and "pull queries" in error
        if got != expected and not refused:
            differ.append(f"{call}: pull query {got!r} ({error}), Spark {expected!r} ({why})")
    assert differ == [], "\n".join(differ)
