"""Column types are typed values from a closed table (issue 28, section 2): read once from the
grammar, refused with the reason when they are none, and rendered for Spark, DuckDB and sqlglot
from the typed value, never from the text a statement holds."""
import pytest

from airflow_provider_streamql.errors import ParseError
from airflow_provider_streamql.language import parse_one
from airflow_provider_streamql.language.types import SqlType, TypeName, TypeProblem, parse_type

from .test_errors import catalog_dump, home_listing

INJECTION = "DECIMAL(`10, 2)); CREATE OR REPLACE TABLE X AS SELECT CONTENT AS A FROM READ_TEXT(LOWER('/ETC/PASSWD')); --`)"

# (declared type, the reason it is refused)
REFUSED = [
    (INJECTION, "DECIMAL takes whole-number parameters, not \"10, 2)); CREATE OR REPLACE TABLE X"),
    ("DECIMAL(39, 2)", "DECIMAL precision must be from 1 to 38 (Spark's widest), not 39"),
    ("DECIMAL(38, 40)", "DECIMAL scale must be from 0 to the precision (38), not 40"),
    ("DECIMAL(99999999999)", "DECIMAL precision must be from 1 to 38 (Spark's widest), not 99999999999"),
    ("DECIMAL(0)", "DECIMAL precision must be from 1 to 38"),
    ("DECIMAL(1.5)", "DECIMAL takes whole-number parameters, not '1.5'"),
    ("DECIMAL(1, 2, 3)", "DECIMAL takes a precision and a scale, not 3 parameters"),
    ("OBJECT", "OBJECT is not a type a stream or table column can have"),
    ("INT UNSIGNED", "UINT is not a type a stream or table column can have"),
    ("INTERVAL", "INTERVAL is not a type a stream or table column can have"),
    ("VARIANT", "VARIANT is not a type a stream or table column can have"),
    ("JSON", "JSON is not a type a stream or table column can have"),
    ("BIGINT(20)", "BIGINT takes no parameters, not (20)"),
    ("VARCHAR(0)", "VARCHAR takes one length from 1 to 2147483647, not (0)"),
    ("CHAR(256)", "CHAR takes one length from 1 to 255, not (256)"),
    ("STRUCT<`a b` INT>", "STRUCT field 'a b': a name has letters, digits and _ only"),
    ("STRUCT<a INT, A STRING>", "STRUCT field 'A' is given twice"),
    ("ARRAY<DECIMAL(50, 1)>", "DECIMAL precision must be from 1 to 38"),
    ("MAP<STRING, INTERVAL>", "INTERVAL is not a type"),
    ("ARRAY<" * 17 + "INT" + ">" * 17, "types nest at most 16 levels deep"),
    ("TIME", "Spark 4.3 does not support the TIME type"),
    ("INTT", "unknown type 'INTT'"),
]


@pytest.mark.parametrize("declared, reason", REFUSED)
def test_a_type_outside_the_table_is_refused_with_the_reason(declared, reason):
    with pytest.raises(ParseError) as e:
        parse_one(f"CREATE STREAM x (a STRING, b {declared})")
    assert reason in str(e.value)
    with pytest.raises(ParseError) as e:
        parse_one(f"ALTER STREAM x ADD COLUMN b {declared}")
    assert reason in str(e.value)


# (declared, its one spelling, DuckDB's)
ACCEPTED = [
    ("INT", "INT", "INTEGER"), ("INTEGER", "INT", "INTEGER"), ("LONG", "BIGINT", "BIGINT"),
    ("SHORT", "SMALLINT", "SMALLINT"), ("BYTE", "TINYINT", "TINYINT"), ("REAL", "FLOAT", "FLOAT"),
    ("DOUBLE", "DOUBLE", "DOUBLE"), ("DECIMAL", "DECIMAL(10, 0)", "DECIMAL(10, 0)"),
    ("NUMERIC(5)", "DECIMAL(5, 0)", "DECIMAL(5, 0)"), ("DECIMAL(38,0)", "DECIMAL(38, 0)", "DECIMAL(38, 0)"),
    ("STRING", "STRING", "VARCHAR"), ("VARCHAR", "STRING", "VARCHAR"), ("VARCHAR(10)", "VARCHAR(10)", "VARCHAR"),
    ("BYTES", "BINARY", "BLOB"), ("BINARY", "BINARY", "BLOB"), ("BOOLEAN", "BOOLEAN", "BOOLEAN"),
    ("DATE", "DATE", "DATE"), ("TIMESTAMP", "TIMESTAMP", "TIMESTAMP"), ("TIMESTAMP_LTZ", "TIMESTAMP", "TIMESTAMP"),
    ("TIMESTAMP_NTZ", "TIMESTAMP_NTZ", "TIMESTAMP"), ("ARRAY<BYTES>", "ARRAY<BINARY>", "BLOB[]"),
    ("MAP<STRING, ARRAY<INT>>", "MAP<STRING, ARRAY<INT>>", "MAP(VARCHAR, INTEGER[])"),
    ("STRUCT<a INT, b STRUCT<c DECIMAL(6,2)>>", "STRUCT<a: INT, b: STRUCT<c: DECIMAL(6, 2)>>",
     'STRUCT("a" INTEGER, "b" STRUCT("c" DECIMAL(6, 2)))'),
]


@pytest.mark.parametrize("declared, spark, duckdb", ACCEPTED)
def test_a_type_is_read_once_and_rendered_from_the_typed_value(declared, spark, duckdb):
    t = parse_type(declared)
    assert (t.spark(), t.duckdb()) == (spark, duckdb)
    assert SqlType.from_sqlglot(t.to_sqlglot()) == t == parse_type(spark)  # one value, whatever the spelling


@pytest.mark.parametrize("make, reason", [
    (lambda: SqlType(TypeName.DECIMAL, (10,)), "DECIMAL takes a precision and a scale"),
    (lambda: SqlType(TypeName.INT, (True,)), "INT takes whole-number parameters, not True"),
    (lambda: SqlType(TypeName.ARRAY), "ARRAY takes 1 element type"),
    (lambda: SqlType(TypeName.STRUCT), "a STRUCT has at least one field"),
    (lambda: SqlType.of("DECIMAL", 10, "2); --"), "DECIMAL takes whole-number parameters"),
    (lambda: SqlType.of("TEXT"), "'TEXT' is not a type"),
])
def test_a_type_cannot_be_made_outside_the_table(make, reason):
    with pytest.raises(TypeProblem, match=reason):
        make()


@pytest.mark.parametrize("sql", [
    f"CREATE STREAM x (A STRING, B {INJECTION})",
    "CREATE STREAM x (A STRING); ALTER STREAM x ADD COLUMN B DECIMAL(`1)); SELECT 1; --`)",
    "CREATE STREAM x (A STRING); SELECT CAST(A AS DECIMAL(`1)); SELECT 1; --`)) FROM x",
    "CREATE STREAM x (A STRING); CREATE STREAM y AS SELECT CAST(A AS VARIANT) AS i FROM x",
])
def test_the_column_type_injection_is_refused_and_changes_nothing(engine, home, sql):
    """The issue's payload stored a column type that became DuckDB DDL in whichever process
    later read the stream; now it never gets in, and the script changes nothing."""
    before, listing = catalog_dump(engine.catalog.url), home_listing(home)
    with pytest.raises(ParseError):
        engine.execute(sql)
    assert catalog_dump(engine.catalog.url) == before and home_listing(home) == listing


def test_an_output_type_no_stream_can_hold_is_refused_at_create(engine):
    from airflow_provider_streamql.errors import ValidationError
    engine.execute("CREATE STREAM s (ts TIMESTAMP)")
    with pytest.raises(ValidationError, match="output column 'gap': INTERVAL is not a type a stream or table column"):
        engine.execute("CREATE STREAM o AS SELECT INTERVAL 1 HOUR AS gap FROM s")
    assert engine.catalog.source("O") is None
    engine.execute("SELECT INTERVAL 1 HOUR AS gap FROM s")  # a pull query's value is only shown


#: (declared type, the value inserted, what reads back): every family through Spark
THROUGH_SPARK = [
    ("VARCHAR(5)", "'hello'", "hello"),
    ("CHAR(3)", "'abc'", "abc"),
    ("STRING", "'ann'", "ann"),
    ("DECIMAL(10, 2)", "12.50", 12.5),
    ("BIGINT", "9000000000", 9000000000),
    ("BOOLEAN", "TRUE", True),
    ("DOUBLE", "1.5", 1.5),
    ("DATE", "'2024-01-02'", "2024-01-02"),
    ("ARRAY<INT>", "ARRAY[1, 2]", [1, 2]),
    ("MAP<STRING, DOUBLE>", "MAP('a', 1.5)", {"a": 1.5}),
    ("STRUCT<x: INT, y: ARRAY<STRING>>", "STRUCT(1 AS x, ARRAY['q'] AS y)", {"x": 1, "y": ["q"]}),
]


def test_every_declared_type_reads_and_writes_through_a_real_runtime(sqlite_engine, runtimes):
    """A stream declared with each type is read by Spark (a VARCHAR(n) too: Spark refuses it
    in a record schema, so it reads as STRING) and a query over it writes the same values."""
    engine = sqlite_engine
    declared = ", ".join(f"C{i} {t}" for i, (t, _, _) in enumerate(THROUGH_SPARK))
    [_, created] = engine.execute(f"CREATE STREAM typed (ID INT KEY, {declared}); CREATE STREAM out AS SELECT * FROM typed")
    runtimes.start(engine)
    engine.wait_for_state(created.query_id, "RUNNING", timeout=120)
    engine.execute(f"INSERT INTO typed VALUES (1, {', '.join(v for _, v, _ in THROUGH_SPARK)})")
    engine.wait_caught_up(created.query_id, timeout=120)
    [row] = engine.execute("SELECT * FROM out")[0].rows
    assert row == [1, *(expected for _, _, expected in THROUGH_SPARK)]
