"""Types and shapes (issue 15, items 9 and 10) at the planner: declared types, `->` and
subscripts on the sqlglot tree and in the Spark SQL, PARTITION BY, DELIMITED values, names.
The same statements run on real records in tests/ksqldb/cases_shapes.py."""

from __future__ import annotations

import os

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ParseError, ValidationError
from airflow_provider_streamql.language import parse_one

SOURCE = ("CREATE STREAM s (id INT KEY, st STRUCT<a STRUCT<b INT>, c STRING>, arr ARRAY<INT>, "
          "m MAP<STRING, DOUBLE>, raw BYTES, name STRING);")


@pytest.fixture
def engine(tmp_path):
    e = Engine(f"sqlite:///{tmp_path}/catalog.db", home=str(tmp_path), issuer="test")
    e.execute(SOURCE)
    yield e
    e.close()


@pytest.mark.parametrize("declared, spark_type", [
    ("BYTES", "BINARY"),
    ("STRUCT<a INT, b STRING>", "STRUCT<a: INT, b: STRING>"),
    ("STRUCT<a STRUCT<b INT>>", "STRUCT<a: STRUCT<b: INT>>"),
    ("ARRAY<BYTES>", "ARRAY<BINARY>"),
    ("MAP<STRING, ARRAY<INT>>", "MAP<STRING, ARRAY<INT>>"),
    ("STRUCT<bytes BYTES, date DATE>", "STRUCT<bytes: BINARY, date: DATE>"),
])
def test_declared_types(declared, spark_type):
    assert parse_one(f"CREATE STREAM x (id INT KEY, v {declared})").columns[1].type.spark() == spark_type


@pytest.mark.parametrize("sql, fragment", [
    ("CREATE STREAM x (t TIME)", "column 't' of type 'TIME': Spark 4.3 does not support the TIME type"),
    ("CREATE STREAM x (t STRUCT<at TIME>)", "does not support the TIME type"),
    ("CREATE STREAM x AS SELECT CAST(name AS TIME) AS t FROM s", "type TIME is not supported"),
    ("CREATE STREAM x AS SELECT \"name\" FROM s", "\"name\" is ambiguous: a quoted name in ksqlDB, a string"),
    ("SELECT id FROM s WHERE name = \"ann\"", "write `ann` for a column or 'ann' for a string"),
    ("CREATE STREAM x AS SELECT id FROM s PARTITION BY id + 1", "PARTITION BY takes names of output columns"),
    ("CREATE TABLE x AS SELECT id, COUNT(*) AS n FROM s GROUP BY id PARTITION BY id",
     "a TABLE is keyed by its GROUP BY"),
    ("INSERT INTO s SELECT * FROM s PARTITION BY name", "INSERT INTO keeps its target's declared key"),
    ("SELECT * FROM s PARTITION BY name", "a pull query has no output to key"),
    ("SELECT st->'a' AS x FROM s", "expected a field name after ->"),
])
def test_refused_at_parse(sql, fragment):
    with pytest.raises(ParseError) as e:
        parse_one(sql)
    assert fragment in str(e.value)


@pytest.mark.parametrize("select, spark_sql, columns", [
    ("st->c, st->a->b", "st.c AS `c`, st.a.b AS `b`", [("c", "STRING"), ("b", "INT")]),
    ("st->a AS inner_struct", "st.a AS `inner_struct`", [("inner_struct", "STRUCT<b: INT>")]),
    ("arr[1] AS x", "TRY_ELEMENT_AT(arr, 1) AS `x`", [("x", "INT")]),
    ("arr[-1] AS x", "TRY_ELEMENT_AT(arr, -1) AS `x`", [("x", "INT")]),
    ("arr[0] AS x", "TRY_ELEMENT_AT(arr, CAST(NULL AS INT)) AS `x`", [("x", "INT")]),
    ("arr[id] AS x", "TRY_ELEMENT_AT(arr, id) AS `x`", [("x", "INT")]),
    ("m['k'] AS x", "TRY_ELEMENT_AT(m, 'k') AS `x`", [("x", "DOUBLE")]),
    ("raw", "raw", [("raw", "BINARY")]),
])
def test_struct_array_map_access(engine, select, spark_sql, columns):
    result = engine.execute(f"CREATE STREAM o AS SELECT id, {select} FROM s")[0]
    assert f"SELECT id, {spark_sql} FROM" in engine.query(result.query_id).select_sql
    assert [(c.name, c.type.spark()) for c in engine.catalog.source("O").columns][1:] == columns


def test_nested_access_in_a_filter(engine):
    result = engine.execute("CREATE STREAM o AS SELECT id FROM s WHERE st->a->b > 1 AND arr[2] = 3")[0]
    assert "WHERE st.a.b > 1 AND TRY_ELEMENT_AT(arr, 2) = 3" in engine.query(result.query_id).select_sql


@pytest.mark.parametrize("sql, keyed", [
    ("SELECT * FROM s PARTITION BY name", [("name", True), ("id", False), ("st", False), ("arr", False),
                                          ("m", False), ("raw", False)]),
    ("SELECT id, name AS who FROM s PARTITION BY who", [("who", True), ("id", False)]),
    ("SELECT id, st->c FROM s PARTITION BY c", [("c", True), ("id", False)]),
    ("SELECT id, name FROM s PARTITION BY name, id", [("name", True), ("id", True)]),
])
def test_partition_by_rekeys_the_output(engine, sql, keyed):
    result = engine.execute(f"CREATE STREAM o AS {sql}")[0]
    assert [(c.name, c.key) for c in engine.catalog.source("O").columns] == keyed
    first_projection = engine.query(result.query_id).select_sql.split(",")[0]
    assert first_projection.strip("`").endswith(keyed[0][0])  # the key first, in the plan as in the output


def test_partition_by_a_column_not_selected(engine):
    with pytest.raises(ValidationError, match="PARTITION BY name: the key must be a column of the output"):
        engine.execute("CREATE STREAM o AS SELECT id FROM s PARTITION BY name")


@pytest.mark.parametrize("sql, fragment", [
    ("CREATE STREAM d (id INT, a ARRAY<INT>) WITH (value_format='DELIMITED')",
     "DELIMITED values cannot hold column 'a' of type ARRAY<INT>"),
    ("CREATE STREAM d (id INT, b BYTES) WITH (value_format='CSV')", "CSV values cannot hold column 'b'"),
    ("CREATE STREAM d (id INT) WITH (value_format='DELIMITED', value_delimiter='ab')",
     "value_delimiter = 'ab': must be one character"),
    ("CREATE STREAM d (id INT) WITH (value_format='JSON', value_delimiter='|')",
     "value_delimiter is for value_format='DELIMITED', not JSON"),
    ("CREATE STREAM d WITH (value_format='DELIMITED') AS SELECT id, st FROM s",
     "DELIMITED values cannot hold column 'st'"),
    ("CREATE STREAM d (`Foo` INT, FOO STRING)", "column 'foo' is declared twice ('Foo' and 'FOO')"),
    ("CREATE STREAM d AS SELECT name->first AS f FROM s", "name->first: name is STRING, not a STRUCT"),
    ("CREATE STREAM d AS SELECT st->z AS z FROM s", "st->z: the STRUCT st has no field 'z' (its fields: a, c)"),
    ("CREATE STREAM d AS SELECT st->a->q AS q FROM s", "a->q: the STRUCT a has no field 'q' (its fields: b)"),
])
def test_refused_at_plan(engine, sql, fragment):
    with pytest.raises(ValidationError) as e:
        engine.execute(sql)
    assert fragment in str(e.value)


@pytest.mark.parametrize("delimiter, written", [
    (None, ['1,"a,b",1.5', "2,,"]),
    ("'|'", ["1|a,b|1.5", "2||"]),
    ("'TAB'", ["1\ta,b\t1.5", "2\t\t"]),
])
def test_delimited_insert_and_pull(engine, delimiter, written):
    extra = f", value_delimiter={delimiter}" if delimiter else ""
    engine.execute(f"CREATE STREAM d (id INT KEY, name STRING, v DOUBLE) WITH (value_format='DELIMITED'{extra});"
                   "INSERT INTO d VALUES (1, 'a,b', 1.5); INSERT INTO d (id) VALUES (2)")
    path = engine.catalog.source("D").path
    lines = [open(os.path.join(path, f)).read().rstrip("\r\n") for f in sorted(os.listdir(path))]
    assert lines == written  # no header line
    assert engine.execute("SELECT * FROM d")[0].rows == [[1, "a,b", 1.5], [2, None, None]]


def test_pull_reads_structs_arrays_maps_and_bytes(engine):
    path = engine.catalog.source("S").path
    with open(os.path.join(path, "a.json"), "w") as f:
        f.write('{"id": 1, "st": {"a": {"b": 2}, "c": "x"}, "arr": [1, 3, 5], "m": {"k": 7.5}, "raw": "aGk="}\n'
                '{"id": null, "name": "no key"}\n')
    rows = engine.execute("SELECT id, st->a->b, st->c, arr[1] AS f, arr[-1] AS l, arr[0] AS z, arr[9] AS n, "
                          "m['k'] AS k, m['q'] AS q, raw FROM s")[0]
    assert rows.columns == ["id", "b", "c", "f", "l", "z", "n", "k", "q", "raw"]
    assert rows.rows == [[1, 2, "x", 1, 5, None, None, 7.5, None, "aGk="],
                         [None, None, None, None, None, None, None, None, None, None]]
