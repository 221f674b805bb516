"""INSERT VALUES takes what Spark SQL takes over literals, checked against the target column:
one line per case (what is stored, or the error naming the value and the column)."""
import json
import os

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ParseError, ValidationError
from airflow_provider_streamql.language import parse_one

SETUP = """
CREATE STREAM s (id INT, name STRING, ts TIMESTAMP, d DATE, amount DOUBLE, price DECIMAL(6, 2), ok BOOLEAN, n BIGINT);
CREATE STREAM minutes (id INT, ts TIMESTAMP) WITH (timestamp='ts', timestamp_format='yyyy-MM-dd HH:mm');
CREATE TABLE t (k STRING PRIMARY KEY, v INT);
CREATE STREAM nested (id INT, a ARRAY<INT>, m MAP<STRING, INT>, s STRUCT<x: INT, y: STRING>, l ARRAY<STRUCT<d: DATE>>);
"""

# INSERT (into s unless it names another source) -> {column: what the file stores}
STORED = [
    ("INSERT INTO s (id) VALUES (1 + 2)", {"id": 3}),
    ("INSERT INTO s (id) VALUES (-(4 * 2) % 5)", {"id": -3}),
    ("INSERT INTO s (id) VALUES (7 DIV 2)", {"id": 3}),
    ("INSERT INTO s (id) VALUES (CAST('7' AS INT))", {"id": 7}),
    ("INSERT INTO s (id) VALUES (2.0)", {"id": 2}),  # a whole number, however written
    ("INSERT INTO s (id) VALUES (NULL)", {"id": None}),
    ("INSERT INTO s (id) VALUES (CASE WHEN 1 > 2 THEN 1 ELSE 2 END)", {"id": 2}),
    ("INSERT INTO s (id) VALUES (LENGTH('abc'))", {"id": 3}),
    ("INSERT INTO s (name) VALUES ('a' || 'b')", {"name": "ab"}),
    ("INSERT INTO s (name) VALUES (CONCAT('a', 'b', 'c'))", {"name": "abc"}),
    ("INSERT INTO s (name) VALUES ('a' || NULL)", {"name": None}),  # Spark's ||: NULL in, NULL out
    ("INSERT INTO s (name) VALUES (UPPER('x'))", {"name": "X"}),
    ("INSERT INTO s (name) VALUES (LCASE(TRIM('  X  ')))", {"name": "x"}),
    ("INSERT INTO s (name) VALUES (SUBSTR('hello', 2, 3))", {"name": "ell"}),
    ("INSERT INTO s (name) VALUES (CAST(12 AS STRING))", {"name": "12"}),
    ("INSERT INTO s (name) VALUES (COALESCE(NULL, 'x'))", {"name": "x"}),
    ("INSERT INTO s (name) VALUES (DATE_FORMAT(TIMESTAMP '2024-03-01 10:00:00', 'yyyy-MM'))", {"name": "2024-03"}),
    ("INSERT INTO s (ts) VALUES (TIMESTAMP '2024-01-01 00:00:00')", {"ts": "2024-01-01 00:00:00"}),
    ("INSERT INTO s (ts) VALUES (TIMESTAMP '2024-01-01 00:00:00' + INTERVAL 90 MINUTES)", {"ts": "2024-01-01 01:30:00"}),
    ("INSERT INTO s (ts) VALUES (TIMESTAMP '2024-01-01T02:00:00+02:00')", {"ts": "2024-01-01 00:00:00"}),  # UTC
    ("INSERT INTO s (ts) VALUES (TIMESTAMP '2024-01-01 00:00:00.250')", {"ts": "2024-01-01 00:00:00.250000"}),
    ("INSERT INTO s (ts) VALUES (CAST('2024-01-02' AS TIMESTAMP))", {"ts": "2024-01-02 00:00:00"}),
    ("INSERT INTO s (ts) VALUES (TO_TIMESTAMP('01/02/2024', 'MM/dd/yyyy'))", {"ts": "2024-01-02 00:00:00"}),
    ("INSERT INTO s (ts) VALUES ('2024-01-01T00:00:00Z')", {"ts": "2024-01-01T00:00:00Z"}),  # text Spark reads, as given
    ("INSERT INTO s (d) VALUES (DATE '2024-02-29')", {"d": "2024-02-29"}),
    ("INSERT INTO s (d) VALUES (DATE_ADD(DATE '2024-02-28', 1))", {"d": "2024-02-29"}),
    ("INSERT INTO s (d) VALUES (CAST(DATE '2024-02-28' + INTERVAL 1 DAY AS DATE))", {"d": "2024-02-29"}),
    ("INSERT INTO s (d) VALUES (TO_DATE('2024-03-01'))", {"d": "2024-03-01"}),
    ("INSERT INTO s (d) VALUES (CAST(TIMESTAMP '2024-03-01 10:00:00' AS DATE))", {"d": "2024-03-01"}),
    ("INSERT INTO s (amount) VALUES (1 / 4)", {"amount": 0.25}),
    ("INSERT INTO s (amount) VALUES (3)", {"amount": 3.0}),  # a whole number widens to DOUBLE
    ("INSERT INTO s (amount) VALUES (1.5e3)", {"amount": 1500.0}),
    ("INSERT INTO s (amount) VALUES (ROUND(2.567, 2))", {"amount": 2.57}),
    ("INSERT INTO s (price) VALUES (CAST('1.25' AS DECIMAL(6, 2)))", {"price": 1.25}),
    ("INSERT INTO s (ok) VALUES (1 < 2 AND NOT FALSE)", {"ok": True}),
    ("INSERT INTO s (ok) VALUES ('a' LIKE 'a%')", {"ok": True}),
    ("INSERT INTO s (n) VALUES (2147483647 * CAST(2 AS BIGINT))", {"n": 4294967294}),
    ("INSERT INTO s (id, name) VALUES (1, 'x')", {"id": 1, "name": "x", "ts": None, "amount": None}),  # the rest NULL
    ("INSERT INTO minutes VALUES (1, TIMESTAMP '2024-01-01 10:30:00')", {"ts": "2024-01-01 10:30"}),
    ("INSERT INTO t VALUES (LOWER('K'), 1 + 1)", {"k": "k", "v": 2}),
]

# INSERT -> (error class, fragment of its message)
REFUSED = [
    # one bad row of several: none is written, and the error says which row
    ("INSERT INTO t VALUES ('c', 1), (NULL, 2)", ValidationError, "row 2: primary key column 'k' of T cannot be NULL"),
    ("INSERT INTO t (k, v) VALUES ('c', 1), ('d', 'x')", ValidationError, "row 2: value 'x' does not fit column 'v'"),
    ("INSERT INTO t VALUES ('c', 1), ('d')", ParseError, "2 values in the first row but 1 values"),
    ("INSERT INTO t (k, v) VALUES ('c', 1), ('d', 2, 3)", ParseError, "2 columns but 3 values"),
    ("INSERT INTO nested (a) VALUES (ARRAY['x'])", ValidationError, "does not fit column 'a[1]' of type INT"),
    ("INSERT INTO nested (a) VALUES (ARRAY[9999999999])", ValidationError, "does not fit column 'a[1]' of type INT"),
    ("INSERT INTO nested (a) VALUES (MAP('a', 1))", ValidationError, "it is a MAP; write a value of type ARRAY"),
    ("INSERT INTO nested (m) VALUES (MAP('a', 'x'))", ValidationError, "does not fit column \"m['a']\" of type INT"),
    ("INSERT INTO nested (s) VALUES (STRUCT(1 AS z))", ValidationError, "it has a field 'z'; its fields are x, y"),
    ("INSERT INTO nested (l) VALUES (ARRAY[STRUCT('soon' AS d)])", ValidationError, "column 'l[1].d' of type DATE"),
    ("INSERT INTO s (id) VALUES (ARRAY[1])", ValidationError, "it is an ARRAY; write a value of type INT"),
    ("INSERT INTO nested (a) VALUES (ARRAY[id])", ParseError, "'id' is a column reference"),
    # ksqlDB's MAP('k' := v) trips sqlglot's parser: refused with a message, never a traceback
    ("INSERT INTO nested (m) VALUES (MAP('a' := 1))", ParseError, "it cannot be read as Spark SQL"),
    ("INSERT INTO s (ts) VALUES ('not a timestamp')", ValidationError,
     "value 'not a timestamp' does not fit column 'ts' of type TIMESTAMP"),
    ("INSERT INTO s (ts) VALUES (TIMESTAMP 'garbage')", ValidationError, "cannot evaluate TIMESTAMP 'garbage' for column 'ts'"),
    ("INSERT INTO s (d) VALUES ('2023-02-29')", ValidationError, "value '2023-02-29' does not fit column 'd' of type DATE"),
    ("INSERT INTO s (d) VALUES (TIMESTAMP '2024-01-01 00:00:00')", ValidationError,
     "value TIMESTAMP '2024-01-01 00:00:00' does not fit column 'd' of type DATE: it is a TIMESTAMP; CAST it to DATE"),
    ("INSERT INTO s (ts) VALUES (DATE '2024-01-01')", ValidationError, "it is a DATE; CAST it to TIMESTAMP"),
    # as in Spark, DATE + INTERVAL is a TIMESTAMP
    ("INSERT INTO s (d) VALUES (DATE '2024-02-28' + INTERVAL 1 DAY)", ValidationError, "it is a TIMESTAMP; CAST it to DATE"),
    ("INSERT INTO s (ts) VALUES (INTERVAL 1 HOUR)", ValidationError, "an INTERVAL is no column's value"),
    ("INSERT INTO s (name) VALUES (1)", ValidationError, "value 1 does not fit column 'name' of type STRING"),
    ("INSERT INTO s (name) VALUES (1 + 1)", ValidationError,
     "value 2 (the value of 1 + 1) does not fit column 'name' of type STRING"),
    ("INSERT INTO s (name) VALUES (TRUE)", ValidationError, "value True does not fit column 'name'"),
    ("INSERT INTO s (id) VALUES ('1')", ValidationError, "value '1' does not fit column 'id' of type INT"),
    ("INSERT INTO s (id) VALUES (2147483648)", ValidationError, "value 2147483648 does not fit column 'id' of type INT"),
    ("INSERT INTO s (id) VALUES (2147483647 + 1)", ValidationError, "cannot evaluate 2147483647 + 1 for column 'id'"),
    ("INSERT INTO s (id) VALUES (1.5)", ValidationError, "value 1.5 does not fit column 'id' of type INT"),
    ("INSERT INTO s (id) VALUES (CAST('x' AS INT))", ValidationError, "cannot evaluate CAST('x' AS INT) for column 'id'"),
    ("INSERT INTO s (ok) VALUES (1)", ValidationError, "value 1 does not fit column 'ok' of type BOOLEAN"),
    ("INSERT INTO s (price) VALUES (10000)", ValidationError, "value 10000 does not fit column 'price' of type DECIMAL(6, 2)"),
    ("INSERT INTO minutes VALUES (1, TIMESTAMP '2024-01-01 10:30:05')", ValidationError,
     "its timestamp_format 'yyyy-MM-dd HH:mm' cannot hold it"),
    ("INSERT INTO t VALUES (NULL, 1)", ValidationError, "primary key column 'k' of T cannot be NULL"),
    ("INSERT INTO s (colour) VALUES (1)", ValidationError, "S has no column 'colour'"),
    # refused before anything is evaluated: not a value
    ("INSERT INTO s (id) VALUES (id)", ParseError, "'id' is a column reference"),
    ("INSERT INTO s (id) VALUES (id + 1)", ParseError, "'id' is a column reference"),
    ("INSERT INTO s (id) VALUES ((SELECT 1))", ParseError, "a subquery is not a value"),
    ("INSERT INTO s (id) VALUES (RAND())", ParseError, "'RAND()' calls a function INSERT VALUES does not evaluate"),
    ("INSERT INTO s (ts) VALUES (CURRENT_TIMESTAMP())", ParseError, "calls a function INSERT VALUES does not evaluate"),
    ("INSERT INTO s (name) VALUES (read_text('/etc/passwd'))", ParseError, "calls a function INSERT VALUES does not evaluate"),
    ("INSERT INTO s (id) VALUES (1 AS x)", ParseError, "'1 AS x' is not a value"),
    ("INSERT INTO s (id) VALUES (1 +)", ParseError, "invalid value '1 +'"),
    ("INSERT INTO s (id) VALUES ()", ParseError, "expected a value"),
]


@pytest.fixture
def insert_engine(tmp_path):
    home = tmp_path / "home"
    engine = Engine(f"sqlite:///{tmp_path}/catalog.db", home=str(home), issuer="test")
    engine.execute(SETUP)
    yield engine
    engine.close()


def written(engine: Engine, name: str) -> list[dict]:
    path = engine.catalog.source(name.upper()).path
    rows = []
    for root, _dirs, files in os.walk(path):
        for f in sorted(files):
            if not f.startswith((".", "_")):
                with open(os.path.join(root, f)) as fh:
                    rows += [json.loads(line) for line in fh if line.strip()]
    return rows


@pytest.mark.parametrize("sql, expected", STORED)
def test_insert_values_stores(insert_engine, sql, expected):
    target = parse_one(sql).target
    insert_engine.execute(sql)
    (row,) = written(insert_engine, target)
    assert {k: row[k] for k in expected} == expected


# several rows in one INSERT (issue 31): (INSERT, every record written, in order)
ROWS = [
    ("INSERT INTO t VALUES ('a', 1), ('b', 2)", "t", [{"k": "a", "v": 1}, {"k": "b", "v": 2}]),
    ("INSERT INTO s (id) VALUES (1), (2 + 1), (NULL)", "s", [{"id": 1}, {"id": 3}, {"id": None}]),
    ("INSERT INTO s (id, name) VALUES\n  (1, 'ann'),\n  (2, 'bob')", "s", [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}]),
]


@pytest.mark.parametrize("sql, target, expected", ROWS)
def test_insert_values_stores_every_row(insert_engine, sql, target, expected):
    [result] = insert_engine.execute(sql)
    assert result.message == f"Inserted {len(expected)} records into {target.upper()}"
    assert [{k: row[k] for k in want} for row, want in zip(written(insert_engine, target), expected, strict=True)] == expected


@pytest.mark.parametrize("sql, error, fragment", REFUSED)
def test_insert_values_refuses_and_writes_nothing(insert_engine, sql, error, fragment):
    with pytest.raises(error) as info:
        insert_engine.execute(sql)
    assert fragment in info.value.message
    assert written(insert_engine, "s") == written(insert_engine, "minutes") == written(insert_engine, "t") == []
    assert written(insert_engine, "nested") == []


def test_one_bad_value_writes_nothing_of_the_script(insert_engine):
    with pytest.raises(ValidationError, match="'name'"):
        insert_engine.execute("INSERT INTO s (id) VALUES (1); INSERT INTO s (id, name) VALUES (2, 3)")
    assert written(insert_engine, "s") == []


def test_the_evaluator_is_locked():
    """Even a tree that skipped the parser's check is checked again, and the DuckDB that
    evaluates values reads no file."""
    import sqlglot
    from sqlglot import exp

    from airflow_provider_streamql.storage.values import ValueEvaluator

    with ValueEvaluator() as evaluator:
        with pytest.raises(ValidationError, match="calls a function"):
            evaluator.value(sqlglot.parse_one("read_text('/etc/passwd')"))
        assert evaluator.value(exp.Add(this=exp.Literal.number(1), expression=exp.Literal.number(2))) == 3
        assert evaluator.con.execute("SELECT current_setting('enable_external_access')").fetchone()[0] is False
