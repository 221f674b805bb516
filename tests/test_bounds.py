"""Issue 28, section 4: one cheap statement must not take the house down. Each finding is one
line: what a user ran -> the clear error (naming the limit, the value and how to raise it)
it gets now, on SQLite and PostgreSQL, with nothing changed. Limits are set small per Engine
so that a test shows a bound with small numbers; the defaults are for production."""
from __future__ import annotations

import os
import re
import threading

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ParseError, StreamQLError, ValidationError, first_line
from airflow_provider_streamql.language.limits import Limits
from airflow_provider_streamql.runtime.reconcile import start_failure
from airflow_provider_streamql.storage import sandbox, topics

from .test_statements import dump, topic_files

SETUP = """
CREATE STREAM s (id INT, name STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM d (id INT, name STRING) WITH (value_format='DELIMITED');
CREATE STREAM c (id INT, name STRING) WITH (value_format='CSV');
"""
ROWS = [{"id": i, "name": f"name-{i:03d}", "ts": f"2024-01-01 00:00:{i % 60:02d}"} for i in range(100)]
RAISE = "(raise it with STREAMQL_MAX_{} or Engine(limits=Limits({}=...)))"
CROSS = " CROSS JOIN ".join(f"s AS s{i}" for i in range(7))  # 100 rows: 10^14 combinations, ~7 hours

# finding -> (limits set, statement, error, what the message says)
FINDINGS = [
    ("INSERT VALUES RPAD to 2 GB (ran 95 s, 6 GB, wrote a 2 GB file)", {},
     "INSERT INTO s (id, name) VALUES (1, RPAD('a', 2000000000, 'b'))", ValidationError,
     "RPAD/LPAD would build a value of about 2000000000 bytes, more than the limit value_bytes = 1,048,576"),
    ("INSERT VALUES REPLACE that multiplies a value", {"value_bytes": 1000},
     "INSERT INTO s (id, name) VALUES (1, REPLACE(RPAD('a', 900, 'a'), 'a', 'bb'))", ValidationError,
     "REPLACE would build a value of about 1800 bytes, more than the limit value_bytes = 1,000"),
    ("INSERT VALUES literal over value_bytes", {"value_bytes": 100},
     f"INSERT INTO s (id, name) VALUES (1, '{'x' * 101}')", ValidationError,
     "the value of column 'name' is 101 bytes, more than the limit value_bytes = 100"),
    ("INSERT VALUES record over row_bytes", {"row_bytes": 100},
     f"INSERT INTO s (id, name) VALUES (1, '{'x' * 90}')", ValidationError,
     "the record is 123 bytes (as JSON), more than the limit row_bytes = 100"),
    ("a statement over statement_chars", {"statement_chars": 100},
     f"INSERT INTO s (id, name) VALUES (1, '{'x' * 100}')", ParseError,
     "the statement is 139 characters long, more than the limit statement_chars = 100"),
    ("a script over script_chars", {"script_chars": 100},
     "SHOW STREAMS; " * 10, ParseError, "the script is 140 characters long, more than the limit script_chars = 100"),
    ("a 10,000-term expression (50 s to plan)", {},
     "SELECT " + " + ".join(["id"] * 10_000) + " AS x FROM s", ParseError,
     "the expression has 30,005 nodes, more than the limit expression_nodes = 10,000"),
    ("an expression over the engine's expression_nodes", {"expression_nodes": 300},
     "SELECT " + " + ".join(["id"] * 100) + " AS x FROM s", ParseError,
     "the expression has 305 nodes, more than the limit expression_nodes = 300"),
    ("INSERT VALUES of many terms", {"expression_nodes": 300},
     "INSERT INTO s (id) VALUES (" + " + ".join(["1"] * 200) + ")", ParseError,
     "the expression has 399 nodes, more than the limit expression_nodes = 300"),
    ("pull SIZE(SEQUENCE(1, 500000000)) (12.7 GB)", {},
     "SELECT SIZE(SEQUENCE(1, 500000000)) AS n FROM s", ValidationError,
     "SEQUENCE would build a value of about 4000000000 bytes, more than the limit value_bytes = 1,048,576"),
    ("pull REPEAT over a column", {"value_bytes": 1000},
     "SELECT REPEAT(name, 200) AS r FROM s", ValidationError,
     "REPEAT would build a value of about 1600 bytes, more than the limit value_bytes = 1,000"),
    ("pull a DuckDB function sqlglot passes on: RANGE", {},
     "SELECT CAST(range(0, 900000000) AS STRING) AS r FROM s", ValidationError,
     "RANGE would build a value of about 7200000008 bytes"),
    ("pull returning 27M rows (7.5 GB)", {"pull_rows": 99},
     "SELECT * FROM s", ValidationError,
     "the pull query returns more than 99 rows (add a LIMIT or a WHERE), more than the limit pull_rows = 99"),
    ("pull answer over pull_bytes", {"pull_bytes": 1000},
     "SELECT a.name AS a, b.name AS b FROM s a CROSS JOIN s b", ValidationError,
     "more than the limit pull_bytes = 1,000"),
    ("pull over DuckDB's memory", {"pull_memory_bytes": 128_000_000},
     "SELECT COUNT(DISTINCT concat(rpad(a.name, 1000, 'x'), b.name, c.name)) AS n "
     "FROM s a CROSS JOIN s b CROSS JOIN s c", ValidationError,
     "the pull query needs more memory than DuckDB may use"),
    ("a self cross join past 30 s", {"pull_seconds": 0.5},
     f"SELECT COUNT(*) AS n FROM {CROSS}", ValidationError,
     "the pull query ran longer than 0.5 s and was cancelled, more than the limit pull_seconds = 0.5"),
    ("HOPPING (SIZE 1 DAY, ADVANCE BY 1 MILLISECOND): driver out of memory", {},
     "CREATE TABLE w AS SELECT name, COUNT(*) AS n FROM s\n  WINDOW HOPPING (SIZE 1 DAY, ADVANCE BY 1 MILLISECOND) "
     "GROUP BY name", ValidationError, "line 2, column 3: a hopping window of SIZE 86400 SECONDS advancing by 0.001 "
     "SECONDS puts each record in 86,400,000 windows"),
    ("more windows per record than the engine's limit", {"windows_per_record": 59},
     "CREATE TABLE w AS SELECT name, COUNT(*) AS n FROM s WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 1 SECOND) "
     "GROUP BY name", ValidationError, "puts each record in 60 windows"),
    ("ADVANCE BY 0.0001 MILLISECONDS rounds to 0", {},
     "CREATE TABLE w AS SELECT name, COUNT(*) AS n FROM s WINDOW HOPPING (SIZE 1 DAY, ADVANCE BY 0.0001 "
     "MILLISECONDS) GROUP BY name", ParseError,
     "ADVANCE BY 0.0001 MILLISECONDS is not a whole number of milliseconds (it would run as 0 ms)"),
    ("TUMBLING (SIZE 1e300 DAYS)", {},
     "CREATE TABLE w AS SELECT name, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1e300 DAYS) GROUP BY name",
     ParseError, "window SIZE 1e+300 DAYS is out of range: Spark computes with durations up to 100,000 DAYS"),
    ("a grace period past what Spark holds", {},
     "CREATE TABLE w AS SELECT name, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 DAY, GRACE PERIOD 100001 DAYS) "
     "GROUP BY name", ParseError, "GRACE PERIOD 100001 DAYS is out of range"),
    ("a newline inside a DELIMITED value", {},
     "INSERT INTO d VALUES (1, 'a\nb')", ValidationError,
     "value 'a\\nb' of column 'name' holds a line break, which a DELIMITED record cannot"),
    ("a carriage return inside a CSV value", {},
     "INSERT INTO c VALUES (1, 'a\rb')", ValidationError,
     "value 'a\\rb' of column 'name' holds a line break, which a CSV record cannot"),
]


@pytest.fixture
def filled(engine):
    engine.execute(SETUP)
    src = engine.catalog.source("S")
    topics.append(src.path, src.format, src.columns, ROWS)  # one file, as a producer writes it
    return engine


@pytest.mark.parametrize("finding, limits, sql, error, message", FINDINGS, ids=[f[0] for f in FINDINGS])
def test_each_finding_is_refused_with_its_limit_and_changes_nothing(filled, home, finding, limits, sql, error,
                                                                     message):
    filled.limits = Limits(**limits)
    before, files = dump(filled), topic_files(home)
    with pytest.raises(error) as info:
        filled.execute(sql)
    assert message in str(info.value)
    limit = re.search(r"more than the limit (\w+) = ", str(info.value))
    assert limit is None or RAISE.format(limit[1].upper(), limit[1]) in str(info.value)
    assert "Traceback" not in str(info.value)
    assert dump(filled) == before and topic_files(home) == files


# what stays accepted next to each bound (the same limits)
ACCEPTED = [
    ({"value_bytes": 1000}, "INSERT INTO s (id, name) VALUES (1, RPAD('a', 1000, 'b'))", "Inserted 1 record"),
    ({"pull_rows": 99}, "SELECT * FROM s LIMIT 99", 99),
    ({"pull_rows": 99}, "SELECT COUNT(*) AS n FROM s", [[100]]),
    ({}, "SELECT SIZE(SEQUENCE(1, 5)) AS n, LENGTH(RPAD(name, 10)) AS l FROM s WHERE id = 1", [[5, 10]]),
    ({}, "SELECT SIZE(SEQUENCE(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', INTERVAL 1 HOUR)) AS n FROM s "
         "WHERE id = 1", [[25]]),
    ({}, "SELECT RPAD(name, 3, '_') AS r, COUNT(*) AS n FROM s GROUP BY RPAD(name, 3, '_')", [["nam", 100]]),
    ({"windows_per_record": 60}, "CREATE TABLE w AS SELECT name, COUNT(*) AS n FROM s WINDOW HOPPING "
                                 "(SIZE 1 MINUTE, ADVANCE BY 1 SECOND) GROUP BY name", "Created query CTAS_W_"),
    ({}, "INSERT INTO d VALUES (1, 'a, \"b\"')", "Inserted 1 record"),
]


@pytest.mark.parametrize("limits, sql, expected", ACCEPTED)
def test_what_stays_within_the_limits_runs(filled, limits, sql, expected):
    filled.limits = Limits(**limits)
    result = filled.execute(sql)[-1]
    if isinstance(expected, str):
        assert result.message.startswith(expected)
    elif isinstance(expected, int):
        assert len(result.rows) == expected
    else:
        assert result.rows == expected


@pytest.mark.parametrize("script", [
    "SELECT COUNT(*) AS n FROM {cross}",  # a script of reads: planned in a read transaction
    "INSERT INTO s (id) VALUES (1000); SELECT COUNT(*) AS n FROM {cross}",  # reads after the commit
])
def test_a_slow_pull_query_never_holds_the_catalogs_write_lock(filled, home, monkeypatch, script):
    """While a pull query runs (a cross join of 10^14 rows, cancelled at the end), another
    engine writes to the catalog: the database is not locked, every statement is not waiting."""
    running, connections = threading.Event(), []
    one_select = sandbox.one_select

    def check_and_tell(con, sql):  # the pull query's user SELECT runs right after this check
        connections.append(con)
        running.set()
        return one_select(con, sql)

    monkeypatch.setattr(sandbox, "one_select", check_and_tell)
    failure: list[BaseException] = []

    def pull():
        try:
            filled.execute(script.format(cross=CROSS))
        except StreamQLError as e:
            failure.append(e)

    reader = threading.Thread(target=pull)
    reader.start()
    other = Engine(filled.catalog.url, home=home, issuer="other")
    try:
        assert running.wait(60), "the pull query did not start"
        writer = threading.Thread(target=other.execute, args=("CREATE STREAM written_meanwhile (id INT)",))
        writer.start()
        writer.join(60)
        assert not writer.is_alive(), "the write waited for the pull query"
        assert reader.is_alive(), "the pull query ended before the write"
        assert other.catalog.source("WRITTEN_MEANWHILE") is not None
    finally:
        connections[-1].interrupt() if connections else None
        reader.join(60)
        other.close()
    assert failure and "INTERRUPT" in str(failure[0])


def test_a_skipped_delimited_line_is_counted_and_said(filled):
    """A DELIMITED file written before newlines were refused (a quoted value across lines, which
    blocked every pull query) and a line that is no record: the pull query reads the rest."""
    path = filled.catalog.source("D").path
    with open(os.path.join(path, "old.csv"), "w") as f:
        f.write('1,"a\nb"\n2,c\nthree,d\n4,e\n')
    result = filled.execute("SELECT * FROM d")[0]
    assert result.rows == [[1, "a\nb"], [2, "c"], [4, "e"]]
    assert result.message.startswith(f"Skipped 1 line of STREAM D that cannot be read, the first: line 4 of file "
                                     f"{os.path.realpath(os.path.join(path, 'old.csv'))!r}")


@pytest.mark.parametrize("environ, limits", [
    ({}, Limits()),
    ({"STREAMQL_MAX_PULL_ROWS": "5", "STREAMQL_MAX_PULL_SECONDS": "1.5"}, Limits(pull_rows=5, pull_seconds=1.5)),
    ({"STREAMQL_MAX_WINDOWS_PER_RECORD": " "}, Limits()),
])
def test_an_operator_sets_limits_in_the_environment(environ, limits):
    assert Limits.from_env(environ) == limits


@pytest.mark.parametrize("environ, message", [
    ({"STREAMQL_MAX_PULL_ROWS": "many"}, "STREAMQL_MAX_PULL_ROWS = 'many' is not a number"),
    ({"STREAMQL_MAX_PULL_ROWS": "2.5"}, "STREAMQL_MAX_PULL_ROWS = '2.5' is not a number"),
    ({"STREAMQL_MAX_VALUE_BYTES": "0"}, "limit value_bytes = 0 must be a positive whole number"),
    ({"STREAMQL_MAX_PULL_SECONDS": "inf"}, "limit pull_seconds = inf must be a positive number"),
])
def test_a_wrong_limit_setting_is_a_clear_error(environ, message):
    with pytest.raises(StreamQLError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Limits.from_env(environ)


def test_the_environment_reaches_an_engine(catalog_url, home, monkeypatch):
    monkeypatch.setenv("STREAMQL_MAX_PULL_ROWS", "1")
    engine = Engine(catalog_url, home=home)
    try:
        engine.execute("CREATE STREAM s (id INT); INSERT INTO s VALUES (1); INSERT INTO s VALUES (2)")
        with pytest.raises(ValidationError, match="more than the limit pull_rows = 1 "):
            engine.execute("SELECT * FROM s")
    finally:
        engine.close()


#: recorded from a real run (Spark 4.3, a 512 MB driver): spark.sql of window(ts, '86400000
#: milliseconds', '1 milliseconds'), which is what HOPPING (SIZE 1 DAY, ADVANCE BY 1 MILLISECOND)
#: planned; Py4J's error text, cut after its first frames
OUT_OF_MEMORY = (
    "An error occurred while calling o40.sql.\n: java.lang.OutOfMemoryError: Java heap space\n"
    "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n"
    "\tat org.apache.spark.sql.catalyst.analysis.TimeWindowResolution$.getWindow$1(TimeWindowResolution.scala:73)\n"
)


@pytest.mark.parametrize("error, message, retried", [
    (OUT_OF_MEMORY, "the Spark driver ran out of memory starting version 3 (java.lang.OutOfMemoryError: Java heap "
                    "space); not retried: PAUSE and RESUME the query, or replace it", False),
    ("An error occurred while calling o12.start.\n: org.apache.spark.SparkException: no such path\n\tat x",
     "org.apache.spark.SparkException: no such path", True),
    ("[PATH_NOT_FOUND] Path does not exist", "[PATH_NOT_FOUND] Path does not exist", True),
])
def test_a_start_that_runs_the_driver_out_of_memory_is_an_error_with_its_reason(error, message, retried):
    """Classified from the recorded text: provoking the real error costs a 512 MB heap filled
    by Spark's analyzer (the recorded run), too slow for the suite; the query then goes to
    ERROR with this reason and is not started again (STARTING forever) until resumed."""
    shown, retry = start_failure(RuntimeError(error), 3)
    assert shown.startswith(message) and retry is retried
    assert first_line(RuntimeError(OUT_OF_MEMORY)) == "java.lang.OutOfMemoryError: Java heap space"
