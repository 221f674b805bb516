"""Pull queries on an embedded, locked DuckDB: the answers and errors a user sees.

No Spark: declared streams and tables are filled with INSERT VALUES, or with files written
straight into their topics as a producer (or Spark) would.
"""
from __future__ import annotations

import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_streamql.catalog import BadRecord
from airflow_provider_streamql.errors import ParseError, ValidationError
from airflow_provider_streamql.storage import topics
from airflow_provider_streamql.storage.deadletter import append_dead_letters, dead_letter_source

from .support import hhmmss, snapshot, table


def insert(engine, name: str, rows: list[tuple]) -> None:
    """INSERT VALUES each row (support.insert without NULLs: repr(None) is no SQL)."""
    literal = lambda v: "NULL" if v is None else repr(v)
    engine.execute(";".join(f"INSERT INTO {name} VALUES ({', '.join(map(literal, r))})" for r in rows))

SETUP = """
CREATE STREAM s (id INT KEY, user STRING, cost DOUBLE, ts TIMESTAMP, ok BOOLEAN, price DECIMAL(10, 2));
CREATE TABLE t (sku STRING PRIMARY KEY, price DOUBLE);
"""
S_ROWS = [(1, "ann", 5.0, "2024-01-01T00:01:00.000Z", True, 1.25),
          (2, "bob", 20.5, "2024-01-01T00:02:00.000Z", False, 2.5),
          (3, "ann", None, "2024-01-01T02:03:00+02:00", None, None),  # an offset: 00:03 UTC
          (4, "cid", 7.5, "2024-01-02 10:00:00", True, 10.0)]
T_ROWS = [("a", 1.0), ("b", 3.0), ("a", 2.0)]

# query -> the rows a user sees
ANSWERS = [
    ("SELECT id, user FROM s WHERE cost > 6 ORDER BY id", [[2, "bob"], [4, "cid"]]),
    ("SELECT COUNT(*) AS n FROM s", [[4]]),
    ("SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM s GROUP BY user ORDER BY user",
     [["ann", 2, 5.0], ["bob", 1, 20.5], ["cid", 1, 7.5]]),
    ("SELECT user, MAX(id) AS top FROM s GROUP BY user HAVING COUNT(*) > 1", [["ann", 3]]),
    ("SELECT id FROM s ORDER BY cost DESC LIMIT 2", [[2], [4]]),
    ("SELECT cost FROM s ORDER BY cost", [[None], [5.0], [7.5], [20.5]]),  # Spark: NULLs first
    ("SELECT DISTINCT user FROM s ORDER BY user", [["ann"], ["bob"], ["cid"]]),
    ("SELECT CAST(id AS STRING) AS sid, CAST('7' AS INT) AS seven, CAST(cost AS INT) AS c FROM s WHERE id = 2",
     [["2", 7, 20]]),
    # Spark's CAST fails on a value that does not fit (ANSI: REFUSED below); TRY_CAST gives NULL
    ("SELECT TRY_CAST(user AS INT) AS x, TRY_CAST('2024-13-01' AS DATE) AS d FROM s WHERE id = 1", [[None, None]]),
    ("SELECT user, sort_array(collect_list(id)) AS ids FROM s GROUP BY user ORDER BY user",
     [["ann", [1, 3]], ["bob", [2]], ["cid", [4]]]),
    ("SELECT struct(user, ts) AS st FROM s WHERE id = 4", [[{"user": "cid", "ts": "2024-01-02T10:00:00.000Z"}]]),
    ("SELECT id / 2 AS half, id % 2 AS odd, concat(user, '!') AS shout FROM s WHERE id = 3", [[1.5, 1, "ann!"]]),
    ("SELECT id, ts FROM s ORDER BY ts", [[1, "2024-01-01T00:01:00.000Z"], [2, "2024-01-01T00:02:00.000Z"],
                                          [3, "2024-01-01T00:03:00.000Z"], [4, "2024-01-02T10:00:00.000Z"]]),
    ("SELECT id FROM s WHERE ts > '2024-01-01 00:01:30' AND ts < CAST('2024-01-02' AS DATE) ORDER BY id", [[2], [3]]),
    ("SELECT CAST(ts AS DATE) AS d, hour(ts) AS h FROM s WHERE id = 4", [["2024-01-02", 10]]),
    ("SELECT price, ok FROM s ORDER BY id", [[1.25, True], [2.5, False], [None, None], [10.0, True]]),
    ("SELECT SUM(price) AS total FROM s", [[13.75]]),
    ("SELECT * FROM t ORDER BY sku", [["a", 2.0], ["b", 3.0]]),  # the latest row per key
    ("SELECT sku FROM t WHERE price > 2.5", [["b"]]),
    ("SELECT COUNT(*) AS n FROM t", [[2]]),
    ("SELECT s.id AS id, t.price AS p FROM s JOIN t ON s.user = t.sku ORDER BY id", []),
]


@pytest.fixture
def filled(engine):
    engine.execute(SETUP)
    insert(engine, "s", S_ROWS)
    insert(engine, "t", T_ROWS)
    return engine


@pytest.mark.parametrize("sql, rows", ANSWERS)
def test_answers(filled, sql, rows):
    result = filled.execute(sql)[0]
    assert result.rows == rows
    assert json.loads(json.dumps(result.rows)) == rows  # plain JSON values


def test_columns_and_support_helpers(filled):
    result = filled.execute("SELECT id, ts AS at FROM s WHERE id = 1")[0]
    assert result.columns == ["id", "at"]
    assert [hhmmss(r[0]) for r in filled.execute("SELECT ts FROM s ORDER BY ts")[0].rows] == \
        ["00:01:00", "00:02:00", "00:03:00", "2024-01-02 10:00:00"]
    assert table(filled, "t") == {"a": (2.0,), "b": (3.0,)}


# statement -> (error class, what the message says); {tmp} is the test's own folder
REFUSED = [
    # sqlglot's Python executor evaluated this as code; it must stay text
    ("SELECT extract(`'x' + str(__import__('os').system('id > {tmp}/p')) + 'y'` FROM ts) AS j FROM s",
     ParseError, "\"'X' + STR(__IMPORT__('OS').SYSTEM('ID > {TMP}/P')) + 'Y'\" is not a unit or keyword"),
    ("SELECT timestampadd(`x) AS q FROM s; SELECT (1`, 1, ts) AS q FROM s", ParseError, "is not a unit or keyword"),
    ("SELECT * FROM read_csv('/etc/passwd')", ValidationError, "unknown stream or table"),
    ("SELECT * FROM `/etc/passwd`", ValidationError, "unknown stream or table '/etc/passwd'"),
    ("SELECT CAST(read_text('/etc/passwd') AS STRING) AS x FROM s", ValidationError,
     "pull query failed: Binder Error: Function \"read_text\" is a table function"),
    # the analyzer takes `/etc/passwd` for the CTE; DuckDB would read the file: locked
    ("SELECT a.id FROM s AS a JOIN `/etc/passwd.csv` AS p ON true WHERE a.id IN "
     "(SELECT c FROM (WITH `/etc/passwd.csv` AS (SELECT 1 AS c) SELECT c FROM `/etc/passwd.csv`))",
     ValidationError, "pull query failed: Permission Error: Cannot access file \"/etc/passwd.csv\" - "
                      "file system operations are disabled by configuration"),
    ("SELECT a.id FROM s AS a JOIN `{tmp}/out.parquet` AS p ON true WHERE a.id IN "
     "(SELECT c FROM (WITH `{tmp}/out.parquet` AS (SELECT 1 AS c) SELECT c FROM `{tmp}/out.parquet`))",
     ValidationError, "file system operations are disabled by configuration"),
    ("COPY s TO '{tmp}/out.csv'", ParseError, "expected a StreamQL statement"),
    ("ATTACH '{tmp}/other.db' AS other", ParseError, "expected a StreamQL statement"),
    ("INSTALL httpfs", ParseError, "expected a StreamQL statement"),
    ("LOAD httpfs", ParseError, "expected a StreamQL statement"),
    ("PRAGMA database_list", ParseError, "expected a StreamQL statement"),
    ("SET 'enable_external_access' = 'true'", ValidationError, "unknown property 'enable_external_access'"),
    ("SET threads = 1", ParseError, "expected a quoted property name"),
    ("SELECT * FROM s; COPY s TO '{tmp}/out.csv'", ParseError, "expected a StreamQL statement"),
    ("SELECT no_such_function(id) AS x FROM s", ValidationError, "cannot tell the type of column 'x'"),
    ("SELECT CAST(no_such_function(id) AS INT) AS x FROM s", ValidationError,
     "pull query failed: Catalog Error: Scalar Function with name no_such_function does not exist!"),
    ("SELECT id FROM s WHERE id = (SELECT id FROM s)", ValidationError, "pull query failed: Invalid Input "
     "Error: More than one row returned by a subquery used as an expression"),
    ("SELECT id FROM s WHERE user rlike '('", ValidationError, "pull query failed: Invalid Input Error: missing ): ("),
]


@pytest.mark.parametrize("sql, error, message", REFUSED)
def test_refused(filled, tmp_path, sql, error, message):
    before = snapshot(tmp_path)
    with pytest.raises(error) as caught:
        filled.execute(sql.replace("{tmp}", str(tmp_path)))
    text = str(caught.value)
    assert message.replace("{tmp}", str(tmp_path)).replace("{TMP}", str(tmp_path).upper()) in text
    assert "Traceback" not in text and "\n" not in caught.value.message
    assert snapshot(tmp_path) == before  # nothing written: no file, no catalog change


@pytest.mark.parametrize("fmt", ["JSON", "CSV", "PARQUET"])
def test_every_format(engine, fmt):
    engine.execute(f"CREATE STREAM f (id INT, name STRING, ok BOOLEAN, ts TIMESTAMP, x DOUBLE) "
                   f"WITH (value_format='{fmt}');"
                   f"CREATE TABLE g (k STRING PRIMARY KEY, v BIGINT) WITH (value_format='{fmt}')")
    insert(engine, "f", [(1, "a,\"b\"", True, "2024-01-01T00:01:00.000Z", 0.5), (2, None, False, None, None)])
    insert(engine, "g", [("k", 1), ("j", 2), ("k", 3)])
    assert engine.execute("SELECT * FROM f ORDER BY id")[0].rows == [
        [1, "a,\"b\"", True, "2024-01-01T00:01:00.000Z", 0.5], [2, None, False, None, None]]
    assert engine.execute("SELECT k, v FROM g ORDER BY k")[0].rows == [["j", 2], ["k", 3]]


def test_a_table_keeps_the_latest_row_per_key(engine):
    engine.execute("CREATE TABLE t (sku STRING PRIMARY KEY, region STRING PRIMARY KEY, price DOUBLE)")
    path = engine.catalog.source("T").path
    columns = engine.catalog.source("T").columns
    row = lambda sku, region, price: {"sku": sku, "region": region, "price": price}
    # changelog entries are read in name order; within a file, the later row wins
    topics.append(path, "JSON", columns, [row("a", "eu", 1.0), row("a", "us", 5.0), row("a", "eu", 2.0)], name="e1")
    topics.append(path, "JSON", columns, [row("b", "eu", 7.0), row("a", "eu", 3.0)], name="e2")
    assert engine.execute("SELECT * FROM t")[0].rows == [["a", "eu", 3.0], ["a", "us", 5.0], ["b", "eu", 7.0]]
    assert engine.execute("SELECT * FROM t WHERE price < 4")[0].rows == [["a", "eu", 3.0]]


def test_files_a_producer_wrote(engine):
    engine.execute("CREATE STREAM j (id INT, name STRING); CREATE STREAM c (id INT, name STRING, n INT) "
                   "WITH (value_format='CSV')")
    with open(os.path.join(engine.catalog.source("J").path, "p1.json"), "w") as f:
        f.write('{"ID": 1, "Name": "upper"}\n\n{"id": 2, "other": true}\n{"name": "no id"}\n')
    with open(os.path.join(engine.catalog.source("C").path, "p1.csv"), "w") as f:
        f.write('whatever,the,header\n1,"x, y",3\n2,short\n3,"",,extra\n')
    assert engine.execute("SELECT * FROM j")[0].rows == [[1, "upper"], [2, None], [None, "no id"]]
    assert engine.execute("SELECT * FROM c")[0].rows == [[1, "x, y", 3], [2, "short", None], [3, None, None]]


# a file's content -> what the error says (after "cannot read STREAM B: ")
MALFORMED = [
    ('{"id": 1}\n{"id": 2\n', "line 2 of file '{file}' is not JSON (Expecting ',' delimiter): '{{\"id\": 2'"),
    ('{"id": 1}\n\n[1, 2]\n', "line 3 of file '{file}' is not a JSON object: '[1, 2]'"),
    ('{"id": 1}\n{"id": "one"}\n', "file '{file}': Invalid Input Error: JSON transform error in file \"{file}\""),
]


@pytest.mark.parametrize("content, message", MALFORMED)
def test_a_malformed_line_names_source_file_and_line(engine, content, message):
    engine.execute("CREATE STREAM b (id INT)")
    insert(engine, "b", [(7,)])
    path = os.path.join(engine.catalog.source("B").path, "zz-bad.json")
    with open(path, "w") as f:
        f.write(content)
    with pytest.raises(ValidationError) as caught:
        engine.execute("SELECT COUNT(*) AS n FROM b")
    assert caught.value.message.startswith("pull query failed: cannot read STREAM B: ")
    assert message.format(file=os.path.realpath(path)) in caught.value.message
    assert "\n" not in caught.value.message


def test_a_malformed_csv_line_is_skipped_counted_and_named(engine):
    """One bad line a producer wrote never blocks a topic's pull queries (issue 28): it is
    skipped, and the answer says how many lines were, naming the first's file and line."""
    engine.execute("CREATE STREAM c (id INT, name STRING) WITH (value_format='CSV')")
    insert(engine, "c", [(1, "a")])
    path = os.path.join(engine.catalog.source("C").path, "zz-bad.csv")
    with open(path, "w") as f:
        f.write("id,name\n2,b\nthree,c\n")
    result = engine.execute("SELECT * FROM c")[0]
    assert result.rows == [[1, "a"], [2, "b"]]
    assert result.message.startswith(f"Skipped 1 line of STREAM C that cannot be read, the first: line 3 of file "
                                     f"{os.path.realpath(path)!r}: ")
    assert 'Could not convert string "three"' in result.message and result.details["notes"] == [result.message]


@pytest.mark.parametrize("sql, rows", [
    ("SELECT * FROM e", []),
    ("SELECT COUNT(*) AS n, SUM(x) AS total FROM e", [[0, None]]),
    ("SELECT * FROM et", []),
    ("SELECT e.id AS id FROM e JOIN et ON e.id = et.id", []),
])
def test_empty_sources(engine, sql, rows):
    engine.execute("CREATE STREAM e (id INT, x DOUBLE); CREATE TABLE et (id INT PRIMARY KEY, v STRING);"
                   "CREATE STREAM p (id INT) WITH (value_format='PARQUET')")
    assert engine.execute(sql)[0].rows == rows


def test_dead_letter_stream(engine):
    engine.execute("CREATE STREAM s (id INT); CREATE STREAM copy AS SELECT * FROM s")
    target = engine.catalog.ensure_source(dead_letter_source(engine.query("CSAS_COPY_1"), engine.home))
    append_dead_letters(target, [BadRecord("CSAS_COPY_1", "r1", 0, "S", "/in/f.json", 3, "{oops", "malformed",
                                           status="LOGGED", recorded_at=1704067260.0)])
    rows = engine.execute("SELECT raw, line, status, recorded_at, handled_by FROM CSAS_COPY_1_DLQ")[0].rows
    assert rows == [["{oops", 3, "LOGGED", "2024-01-01T00:01:00Z", None]]



EXAMPLES = itertools.count()
FILES = st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.none() | st.integers(-9, 9)),
                          max_size=6), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["JSON", "CSV", "PARQUET"]), kind=st.sampled_from(["STREAM", "TABLE"]), files=FILES)
def test_the_rows_topics_reads(sqlite_engine, fmt, kind, files):
    """Whatever the files, a pull query sees the rows (and order) topics.read_* sees."""
    key = "PRIMARY KEY" if kind == "TABLE" else "KEY"
    name = f"h{next(EXAMPLES)}"
    sqlite_engine.execute(f"CREATE {kind} {name} (k STRING {key}, v INT) WITH (value_format='{fmt}')")
    src = sqlite_engine.catalog.source(name.upper())
    for i, rows in enumerate(files):
        topics.append(src.path, fmt, src.columns, [{"k": k, "v": v} for k, v in rows], name=f"f{i:02d}")
    expected = (topics.read_table(src.path, fmt, src.columns, ["k"]) if kind == "TABLE"
                else topics.read_stream(src.path, fmt, src.columns))
    assert sqlite_engine.execute(f"SELECT * FROM {name}")[0].rows == [[r["k"], r["v"]] for r in expected]


@pytest.mark.parametrize("statement, params", [
    ("SELECT * FROM read_text(?)", ["other"]),                       # a file it was not opened to read
    ("SELECT * FROM read_json_auto(?)", ["other"]),
    ("COPY (SELECT 1 AS x) TO ?", ["written"]),                      # writing anywhere
    ("SET allowed_paths = ?", [["/"]]),                              # widening what it reads
    ("SET enable_external_access = true", []),
    ("INSTALL httpfs", []),
])
def test_the_pull_sandbox_is_locked_before_its_first_statement(tmp_path, statement, params):
    """streamql's own loading runs under the lockdown too: it reads the files it was opened
    to read (a pull query's sources) and nothing else, and nothing can widen that."""
    import duckdb

    from airflow_provider_streamql.storage import sandbox
    allowed, other = tmp_path / "allowed.json", tmp_path / "other.txt"
    allowed.write_text('{"a": 1}\n')
    other.write_text("secret\n")
    con = sandbox.connect(readable=[str(allowed)])
    assert con.execute("SELECT a FROM read_json_auto(?)", [str(allowed)]).fetchall() == [(1,)]
    paths = {"other": str(other), "written": str(tmp_path / "written.csv")}
    with pytest.raises(duckdb.Error):
        con.execute(statement, [paths.get(p, p) if isinstance(p, str) else p for p in params])
    assert not (tmp_path / "written.csv").exists()
