"""Types of expressions and ksqlDB's functions (docs/ksqldb.md sections 6 and 7).

One line per function: the ksqlDB (or Spark) call, the Spark SQL the planner makes of it and
the type of the output column. The fast tests plan each call in a real catalog; the slow one
runs every planned query's Spark SQL on Spark and checks Spark gives the column that type,
so the type table cannot claim what Spark does not do."""

import datetime
import pathlib

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ValidationError
from airflow_provider_streamql.language import functions

SOURCE = """CREATE STREAM fn_src (k STRING KEY, s STRING, n INT, b BIGINT, d DOUBLE, ts TIMESTAMP, dt DATE,
    arr ARRAY<STRING>, m MAP<STRING, INT>, j STRING) WITH (timestamp='ts');"""
ROW = dict(k="a", s="Ab1 x.y", n=3, b=1704067200000, d=2.5, ts=datetime.datetime(2024, 1, 1, 10, 0),
           dt=datetime.date(2024, 1, 2), arr=["b", None, "a"], m={"x": 1}, j='{"a": {"b": 1}, "c": [1, 2]}')
AGGREGATES = ("TOPK", "TOPKDISTINCT", "COUNT", "COUNT_DISTINCT", "COLLECT_LIST", "COLLECT_SET", "STDDEV_SAMPLE",
              "CORRELATION", "SUM", "AVG", "MIN", "MAX", "MAX_BY", "MIN_BY")

# call -> (Spark SQL of the projection, type of the output column)
# fmt: off
MAPPED = [
    ("LCASE(s)", "LOWER(s)", "STRING"),
    ("UCASE(s)", "UPPER(s)", "STRING"),
    ("LEN(s)", "LENGTH(s)", "INT"),
    ("CONCAT(s, '!', k)", "CONCAT_WS('', s, '!', k)", "STRING"),
    ("INSTR(s, 'x')", "LOCATE('x', s)", "INT"),
    ("INSTR(s, 'x', 2)", "LOCATE('x', s, 2)", "INT"),
    ("MASK(s)", "MASK(s, 'X', 'x', 'n', '-')", "STRING"),
    ("MASK(s, '*', NULL)", "MASK(s, '*', NULL, 'n', '-')", "STRING"),
    ("MASK_LEFT(s, 2)", "CONCAT(MASK(LEFT(s, 2), 'X', 'x', 'n', '-'), SUBSTRING(s, 2 + 1))", "STRING"),
    ("MASK_RIGHT(s, 2)", "CONCAT(LEFT(s, GREATEST(LENGTH(s) - 2, 0)), MASK(RIGHT(s, 2), 'X', 'x', 'n', '-'))",
     "STRING"),
    ("MASK_KEEP_LEFT(s, 2)", "CONCAT(LEFT(s, 2), MASK(SUBSTRING(s, 2 + 1), 'X', 'x', 'n', '-'))", "STRING"),
    ("MASK_KEEP_RIGHT(s, 2)", "CONCAT(MASK(LEFT(s, GREATEST(LENGTH(s) - 2, 0)), 'X', 'x', 'n', '-'), RIGHT(s, 2))",
     "STRING"),
    ("SPLIT(s, '.')", "SPLIT(s, '\\\\.')", "ARRAY<STRING>"),
    ("REGEXP_SPLIT_TO_ARRAY(s, '[ .]')", "SPLIT(s, '[ .]')", "ARRAY<STRING>"),
    ("REGEXP_EXTRACT('[a-z]+', s)", "IF(s RLIKE '[a-z]+', REGEXP_EXTRACT(s, '[a-z]+', 0), NULL)", "STRING"),
    ("REGEXP_EXTRACT_ALL('[a-z]', s)", "REGEXP_EXTRACT_ALL(s, '[a-z]', 0)", "ARRAY<STRING>"),
    ("EXTRACTJSONFIELD(j, '$.a.b')", "GET_JSON_OBJECT(j, '$.a.b')", "STRING"),
    ("JSON_KEYS(j)", "JSON_OBJECT_KEYS(j)", "ARRAY<STRING>"),
    ("IS_JSON_STRING(j)", "NOT TRY_PARSE_JSON(j) IS NULL", "BOOLEAN"),
    ("IFNULL(s, 'none')", "COALESCE(s, 'none')", "STRING"),
    ("RANDOM()", "RAND()", "DOUBLE"),
    ("UNIX_TIMESTAMP()", "UNIX_MILLIS(CURRENT_TIMESTAMP())", "BIGINT"),
    ("UNIX_TIMESTAMP(ts)", "UNIX_MILLIS(ts)", "BIGINT"),
    ("UNIX_DATE()", "UNIX_DATE(CURRENT_DATE)", "INT"),
    ("UNIX_DATE(dt)", "UNIX_DATE(dt)", "INT"),
    ("FROM_UNIXTIME(b)", "TIMESTAMP_MILLIS(b)", "TIMESTAMP"),
    ("FROM_DAYS(n)", "DATE_FROM_UNIX_DATE(n)", "DATE"),
    ("STRINGTOTIMESTAMP(s, 'yyyy-MM-dd''T''HH:mm')", "UNIX_MILLIS(TRY_TO_TIMESTAMP(s, 'yyyy-MM-dd\\'T\\'HH:mm'))",
     "BIGINT"),
    ("STRINGTOTIMESTAMP(s, 'yyyy', 'Europe/Paris')",
     "UNIX_MILLIS(TO_UTC_TIMESTAMP(TRY_TO_TIMESTAMP(s, 'yyyy'), 'Europe/Paris'))", "BIGINT"),
    ("TIMESTAMPTOSTRING(b, 'yyyy-MM-dd HH:mm:ss.SSS')", "DATE_FORMAT(TIMESTAMP_MILLIS(b), 'yyyy-MM-dd HH:mm:ss.SSS')",
     "STRING"),
    ("TIMESTAMPTOSTRING(b, 'HH:mm', 'America/New_York')",
     "DATE_FORMAT(FROM_UTC_TIMESTAMP(TIMESTAMP_MILLIS(b), 'America/New_York'), 'HH:mm')", "STRING"),
    ("STRINGTODATE(s, 'yyyy-MM-dd')", "UNIX_DATE(TRY_TO_DATE(s, 'yyyy-MM-dd'))", "INT"),
    ("DATETOSTRING(n, 'yyyy-MM-dd')", "DATE_FORMAT(DATE_FROM_UNIX_DATE(n), 'yyyy-MM-dd')", "STRING"),
    ("PARSE_TIMESTAMP(s, 'yyyy-MM-dd HH:mm')", "TRY_TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm')", "TIMESTAMP"),
    ("PARSE_TIMESTAMP(s, 'yyyy', 'UTC')", "TO_UTC_TIMESTAMP(TRY_TO_TIMESTAMP(s, 'yyyy'), 'UTC')", "TIMESTAMP"),
    ("FORMAT_TIMESTAMP(ts, 'yyyy-MM-dd''T''HH')", "DATE_FORMAT(ts, 'yyyy-MM-dd\\'T\\'HH')", "STRING"),
    ("FORMAT_TIMESTAMP(ts, 'HH', 'Asia/Tokyo')", "DATE_FORMAT(FROM_UTC_TIMESTAMP(ts, 'Asia/Tokyo'), 'HH')", "STRING"),
    ("PARSE_DATE(s, 'yyyy-MM-dd')", "TRY_TO_DATE(s, 'yyyy-MM-dd')", "DATE"),
    ("FORMAT_DATE(dt, 'dd/MM/yyyy')", "DATE_FORMAT(dt, 'dd/MM/yyyy')", "STRING"),
    ("CONVERT_TZ(ts, 'UTC', 'Europe/Paris')", "FROM_UTC_TIMESTAMP(TO_UTC_TIMESTAMP(ts, 'UTC'), 'Europe/Paris')",
     "TIMESTAMP"),
    ("TIMESTAMPADD(SECONDS, 5, ts)", "DATE_ADD(SECOND, 5, ts)", "TIMESTAMP"),
    ("TIMESTAMPSUB(HOURS, n, ts)", "DATE_ADD(HOUR, -(n), ts)", "TIMESTAMP"),
    ("DATEADD(DAYS, 2, dt)", "CAST(DATE_ADD(DAY, 2, dt) AS DATE)", "DATE"),
    ("DATESUB(MONTHS, 1, dt)", "CAST(DATE_ADD(MONTH, -(1), dt) AS DATE)", "DATE"),
    ("ARRAY_LENGTH(arr)", "ARRAY_SIZE(arr)", "INT"),
    ("ARRAY_CONCAT(arr, arr)", "CASE WHEN arr IS NULL THEN arr WHEN arr IS NULL THEN arr ELSE CONCAT(arr, arr) END",
     "ARRAY<STRING>"),
    ("ARRAY_JOIN(arr)", "ARRAY_JOIN(CAST(arr AS ARRAY<STRING>), ',')", "STRING"),
    ("ARRAY_JOIN(arr, '|')", "ARRAY_JOIN(CAST(arr AS ARRAY<STRING>), '|')", "STRING"),
    ("ARRAY_SORT(arr)", "ARRAY_SORT(arr)", "ARRAY<STRING>"),
    ("ARRAY_SORT(arr, 'DESC')", "SORT_ARRAY(arr, FALSE)", "ARRAY<STRING>"),
    ("SLICE(arr, 2, 3)", "SLICE(arr, 2, 3 - 2 + 1)", "ARRAY<STRING>"),
    ("AS_MAP(ARRAY(k), ARRAY(n))", "MAP_FROM_ARRAYS(ARRAY(k), ARRAY(n))", "MAP<STRING, INT>"),
    ("FIELD(s, 'x', 'Ab1 x.y')", "CAST(ARRAY_POSITION(ARRAY('x', 'Ab1 x.y'), s) AS INT)", "INT"),
    ("GENERATE_SERIES(1, n)", "EXPLODE(SEQUENCE(1, n))", "INT"),
    ("URL_EXTRACT_HOST(s)", "TRY_PARSE_URL(s, 'HOST')", "STRING"),
    ("URL_EXTRACT_PATH(s)", "TRY_PARSE_URL(s, 'PATH')", "STRING"),
    ("URL_EXTRACT_PROTOCOL(s)", "TRY_PARSE_URL(s, 'PROTOCOL')", "STRING"),
    ("URL_EXTRACT_QUERY(s)", "TRY_PARSE_URL(s, 'QUERY')", "STRING"),
    ("URL_EXTRACT_FRAGMENT(s)", "TRY_PARSE_URL(s, 'REF')", "STRING"),
    ("URL_EXTRACT_PARAMETER(s, 'q')", "TRY_PARSE_URL(s, 'QUERY', 'q')", "STRING"),
    ("URL_ENCODE_PARAM(s)", "URL_ENCODE(s)", "STRING"),
    ("URL_DECODE_PARAM(s)", "URL_DECODE(s)", "STRING"),
    ("COUNT()", "COUNT(*)", "BIGINT"),
    ("COUNT(s)", "COUNT(s)", "BIGINT"),
    ("COUNT_DISTINCT(s)", "CAST(SIZE(COLLECT_SET(s)) AS BIGINT)", "BIGINT"),
    ("TOPK(n, 2)", "SLICE(SORT_ARRAY(COLLECT_LIST(n), FALSE), 1, 2)", "ARRAY<INT>"),
    ("TOPKDISTINCT(s, 3)", "SLICE(SORT_ARRAY(COLLECT_SET(s), FALSE), 1, 3)", "ARRAY<STRING>"),
    ("COLLECT_LIST(d)", "COLLECT_LIST(d)", "ARRAY<DOUBLE>"),
    ("COLLECT_SET(n)", "COLLECT_SET(n)", "ARRAY<INT>"),
    ("STDDEV_SAMPLE(d)", "STDDEV_SAMP(d)", "DOUBLE"),
    ("CORRELATION(d, n)", "CORR(d, n)", "DOUBLE"),
    # Spark's own functions: types sqlglot does not know (or gets wrong), from the dialect's table
    ("length(s)", "LENGTH(s)", "INT"),
    ("date_format(ts, 'yyyy')", "DATE_FORMAT(ts, 'yyyy')", "STRING"),
    ("get_json_object(j, '$.c')", "GET_JSON_OBJECT(j, '$.c')", "STRING"),
    ("size(arr)", "SIZE(arr)", "INT"),
    ("unix_millis(ts)", "UNIX_MILLIS(ts)", "BIGINT"),
    ("unix_seconds(ts)", "UNIX_SECONDS(ts)", "BIGINT"),
    ("timestamp_millis(b)", "TIMESTAMP_MILLIS(b)", "TIMESTAMP"),
    ("timestamp_seconds(n)", "TIMESTAMP_SECONDS(n)", "TIMESTAMP"),
    ("year(ts)", "YEAR(ts)", "INT"),
    ("weekofyear(dt)", "WEEKOFYEAR(dt)", "INT"),
    ("date_trunc('HOUR', ts)", "DATE_TRUNC('HOUR', ts)", "TIMESTAMP"),
    ("date_part('YEAR', ts)", "DATE_PART('YEAR', ts)", "INT"),
    ("date_part('SECOND', ts)", "DATE_PART('SECOND', ts)", "DECIMAL(8, 6)"),
    ("array_position(arr, 'a')", "ARRAY_POSITION(arr, 'a')", "BIGINT"),
    ("array_max(arr)", "ARRAY_MAX(arr)", "STRING"),
    ("array_union(arr, arr)", "ARRAY_UNION(arr, arr)", "ARRAY<STRING>"),
    ("array_remove(arr, 'a')", "ARRAY_REMOVE(arr, 'a')", "ARRAY<STRING>"),
    ("map_keys(m)", "MAP_KEYS(m)", "ARRAY<STRING>"),
    ("map_values(m)", "MAP_VALUES(m)", "ARRAY<INT>"),
    ("split_part(s, ' ', 1)", "SPLIT_PART(s, ' ', 1)", "STRING"),
    ("substring_index(s, '.', 1)", "SUBSTRING_INDEX(s, '.', 1)", "STRING"),
    ("parse_url('http://h/p', 'HOST')", "PARSE_URL('http://h/p', 'HOST')", "STRING"),
    ("btrim(s)", "BTRIM(s)", "STRING"),
    ("make_date(2024, n, 1)", "MAKE_DATE(2024, n, 1)", "DATE"),
    ("pmod(n, 2)", "PMOD(n, 2)", "INT"),
    ("format_number(d, 1)", "FORMAT_NUMBER(d, 1)", "STRING"),
    ("uuid()", "UUID()", "STRING"),
    ("isnull(s)", "ISNULL(s)", "BOOLEAN"),
    ("nvl2(s, 1, 2)", "NVL2(s, 1, 2)", "INT"),
    ("max_by(s, ts)", "MAX_BY(s, ts)", "STRING"),
    ("min_by(n, ts)", "MIN_BY(n, ts)", "INT"),
]
# call -> a fragment of the error
REFUSED = [
    ("EARLIEST_BY_OFFSET(s)", "EARLIEST_BY_OFFSET is not supported: Spark's sources give no offset order"),
    ("LATEST_BY_OFFSET(s, 2)", "LATEST_BY_OFFSET is not supported"),
    ("HISTOGRAM(s)", "HISTOGRAM is not supported: Spark has no aggregate"),
    ("GEO_DISTANCE(d, d, d, d)", "GEO_DISTANCE is not supported"),
    ("URL_EXTRACT_PORT(s)", "Spark's parse_url has no PORT part"),
    ("ENCODE(s, 'utf8', 'hex')", "ENCODE is not supported"),
    ("TO_BYTES(s, 'utf8')", "TO_BYTES is not supported"),
    ("FROM_BYTES(s, 'utf8')", "FROM_BYTES is not supported"),
    ("PARSE_TIME(s, 'HH')", "PARSE_TIME is not supported: ksqlDB's TIME type"),
    ("FORMAT_TIME(s, 'HH')", "FORMAT_TIME is not supported"),
    ("TIMEADD(SECONDS, 1, s)", "TIMEADD is not supported"),
    ("TIMESUB(SECONDS, 1, s)", "TIMESUB is not supported"),
    ("INSTR(s, 'x', -1)", "INSTR: argument 3 must be a positive whole number, not '-1'"),
    ("INSTR(s, 'x', 1, 2)", "INSTR takes 2 to 3 arguments"),
    ("SPLIT(s, k)", "SPLIT: argument 2 must be a string literal"),
    ("LCASE(s, 1)", "LCASE takes 1 argument (LCASE(s)), not 2"),
    ("TOPK(n, k)", "TOPK: argument 2 must be a positive whole number, not 'k'"),
    ("TOPKDISTINCT(n, 0)", "TOPKDISTINCT: argument 2 must be a positive whole number"),
    ("UNIX_TIMESTAMP(s, 'yyyy')", "UNIX_TIMESTAMP takes 0 to 1 arguments"),
    ("DATEADD(FORTNIGHTS, 1, dt)", "DATEADD: argument 1 must be a time unit"),
    ("no_such_function(s)", "cannot tell the type of column 'V': no_such_function() is not a Spark or ksqlDB"),
]
# fmt: on


def spark_schema():
    """ROW's columns as a Spark schema (SOURCE's types)."""
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("k", T.StringType()), T.StructField("s", T.StringType()), T.StructField("n", T.IntegerType()),
        T.StructField("b", T.LongType()), T.StructField("d", T.DoubleType()), T.StructField("ts", T.TimestampType()),
        T.StructField("dt", T.DateType()), T.StructField("arr", T.ArrayType(T.StringType())),
        T.StructField("m", T.MapType(T.StringType(), T.IntegerType())), T.StructField("j", T.StringType()),
    ])


def statement(i: int, call: str) -> str:
    name = call.split("(")[0].upper()
    if name in AGGREGATES:
        return f"CREATE TABLE fn_{i} AS SELECT k, {call} AS v FROM fn_src GROUP BY k"
    return f"CREATE STREAM fn_{i} AS SELECT {call} AS v FROM fn_src"


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """Every call of MAPPED planned in one catalog: call -> (query, output column type)."""
    path = tmp_path_factory.mktemp("functions")
    engine = Engine(f"sqlite:///{path}/catalog.db", home=str(path), issuer="test")
    engine.execute(SOURCE)
    out = {}
    for i, (call, _, _) in enumerate(MAPPED):
        try:
            [result] = engine.execute(statement(i, call))
        except Exception as e:
            out[call] = e
            continue
        source = engine.catalog.source(f"FN_{i}")
        out[call] = (engine.catalog.query(result.query_id), next(c.type.spark() for c in source.columns if c.name == "v"))
    yield engine, out
    engine.close()


@pytest.mark.parametrize("call, spark_sql, type_", MAPPED, ids=[c for c, _, _ in MAPPED])
def test_a_call_becomes_spark_sql_of_a_type(planned, call, spark_sql, type_):
    _, out = planned
    assert not isinstance(out[call], Exception), f"{call!r} was refused: {out[call]}"
    query, column_type = out[call]
    assert f"{spark_sql} AS `v`" in query.plan.spark_sql  # every output under its one spelling, quoted
    assert column_type == type_


@pytest.mark.parametrize("call, fragment", REFUSED, ids=[c for c, _ in REFUSED])
def test_a_call_streamql_cannot_run_is_a_clear_error(planned, call, fragment):
    engine, _ = planned
    before = len(engine.catalog.queries())
    with pytest.raises(ValidationError) as info:
        engine.execute(statement(999, call).replace(" AS v ", " AS V "))
    assert fragment in str(info.value)
    assert len(engine.catalog.queries()) == before


def test_every_mapped_or_refused_ksqldb_function_has_a_line_here():
    called = {c.split("(")[0].upper() for c, _, _ in MAPPED} | {c.split("(")[0].upper() for c, _ in REFUSED}
    assert {f.name for f in functions.KSQL_FUNCTIONS if not f.same} - called == set()


def test_the_docs_table_is_the_function_table():
    page = (pathlib.Path(__file__).parent.parent / "docs" / "ksqldb.md").read_text()
    assert functions.markdown_table() in page, "regenerate docs/ksqldb.md section 7 from functions.markdown_table()"


@pytest.mark.slow
def test_spark_gives_each_planned_call_its_type(planned, spark):
    """Each query's Spark SQL runs on Spark over a row of the source, and Spark's type of the
    column is the one the planner recorded."""
    _, out = planned
    frame = spark.createDataFrame([tuple(ROW.values())], spark_schema())
    wrong = []
    for call, (query, column_type) in ((c, o) for c, o in out.items() if not isinstance(o, Exception)):
        for view in query.plan.views.values():
            frame.createOrReplaceTempView(view)
        try:
            result = spark.sql(query.plan.spark_sql)
            result.collect()
        except Exception as e:
            wrong.append((call, column_type, str(e).splitlines()[0][:200]))
            continue
        got = next(f.dataType for f in result.schema.fields if f.name == "v").simpleString()
        if got.replace(",", ", ").upper() != column_type:
            wrong.append((call, column_type, got))
    assert wrong == [], "\n".join(map(str, wrong))


# statement -> (Spark SQL fragment, output columns) or an error fragment
PSEUDO = [
    ("CREATE STREAM ps_1 AS SELECT ROWTIME, s FROM fn_src WHERE ROWTIME > 0",
     ("SELECT UNIX_MILLIS(`ts`) AS `ROWTIME`, s FROM", [("ROWTIME", "BIGINT"), ("s", "STRING")])),
    ("CREATE STREAM ps_2 AS SELECT ROWKEY AS key_copy, ROWTIME AS at FROM fn_src",
     ("SELECT `k` AS `key_copy`, UNIX_MILLIS(`ts`) AS `at` FROM", [("key_copy", "STRING"), ("at", "BIGINT")])),
    ("CREATE TABLE ps_3 AS SELECT k, MAX(ROWTIME) AS last_ms FROM fn_src GROUP BY k",
     ("MAX(UNIX_MILLIS(`ts`)) AS `last_ms`", [("k", "STRING"), ("last_ms", "BIGINT")])),
    ("CREATE TABLE ps_4 AS SELECT k, COUNT(*) AS n, WINDOWSTART, WINDOWEND FROM fn_src "
     "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k HAVING WINDOWEND > '2024-01-01'",
     # HAVING is computed as a column (tests/test_having.py), where the window column resolves
     ("COALESCE(WINDOW(`ts`, '60000 milliseconds').end > '2024-01-01', FALSE)",
      [("k", "STRING"), ("n", "BIGINT"), ("WINDOWSTART", "TIMESTAMP"), ("WINDOWEND", "TIMESTAMP")])),
    ("CREATE STREAM ps_5 AS SELECT ROWTIME FROM fn_plain", "FN_PLAIN has no timestamp column"),
    ("CREATE STREAM ps_6 AS SELECT ROWKEY FROM fn_plain", "ROWKEY is the single KEY column of the source, and it has"),
    ("CREATE STREAM ps_7 AS SELECT ROWKEY AS r FROM fn_src a JOIN fn_keyed b ON a.k = b.id",
     "ROWKEY is ambiguous in a join: qualify it"),
    ("CREATE STREAM ps_8 AS SELECT a.ROWKEY AS r, b.ROWKEY AS r2 FROM fn_src a JOIN fn_keyed b ON a.k = b.id",
     ("SELECT `a`.`k` AS `r`, `b`.`id` AS `r2` FROM", [("r", "STRING"), ("r2", "STRING")])),
    ("CREATE STREAM ps_9 AS SELECT WINDOWSTART FROM fn_src", "WINDOWSTART is defined only in a query with a WINDOW"),
]


@pytest.mark.parametrize("sql, expected", PSEUDO, ids=[s.split(" AS ")[0] for s, _ in PSEUDO])
def test_pseudo_columns_are_the_columns_they_stand_for(planned, sql, expected):
    engine, _ = planned
    engine.execute("CREATE STREAM IF NOT EXISTS fn_plain (id INT, v STRING);"
                   "CREATE TABLE IF NOT EXISTS fn_keyed (id STRING PRIMARY KEY, name STRING);")
    if isinstance(expected, str):
        with pytest.raises(ValidationError, match=expected):
            engine.execute(sql)
        return
    fragment, columns = expected
    [result] = engine.execute(sql)
    query = engine.catalog.query(result.query_id)
    assert fragment in query.plan.spark_sql
    assert [(c.name, c.type.spark()) for c in engine.catalog.source(sql.split()[2].upper()).columns] == columns


def test_a_pull_query_reads_rowkey_and_the_window_bounds(planned):
    engine, _ = planned
    engine.execute("CREATE TABLE IF NOT EXISTS fn_keyed (id STRING PRIMARY KEY, name STRING);"
                   "CREATE TABLE ps_win AS SELECT k, COUNT(*) AS n FROM fn_src WINDOW TUMBLING (SIZE 1 MINUTE) "
                   "GROUP BY k")
    assert engine.execute("SELECT ROWKEY AS id, name FROM fn_keyed")[0].columns == ["id", "name"]
    result = engine.execute("SELECT k, n, WINDOWSTART, WINDOWEND FROM ps_win WHERE WINDOWSTART >= '2024-01-01'")[0]
    assert result.columns == ["k", "n", "WINDOWSTART", "WINDOWEND"]
