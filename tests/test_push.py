"""Push queries (issue 31): ``SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]`` streams
the rows committed to s after it starts (from its first with auto.offset.reset earliest),
through its projection and WHERE, until LIMIT or Ctrl-C, as ksqlDB's CLI does; on the
committed output of file topics, never creating a query or writing a file. On Kafka topics:
tests/test_kafka_engine.py."""
import json
import re
import signal
import subprocess

import pytest

from airflow_provider_streamql.errors import NotFoundError, ParseError, ValidationError

from .support import CLI, snapshot

SETUP = """
CREATE STREAM s (id INT KEY, item STRING, cost DOUBLE);
CREATE TABLE t (id INT PRIMARY KEY, v STRING);
INSERT INTO s VALUES (1, 'tea', 2.5), (2, 'cup', 0.5);
INSERT INTO t VALUES (1, 'x');
"""
LATER = "INSERT INTO s VALUES (3, 'pot', 9.0); INSERT INTO s VALUES (4, 'jar', 0.25); INSERT INTO t VALUES (1, 'y')"
EARLIEST = {"auto.offset.reset": "earliest"}

# (session settings, push query, its columns, the rows shown once LATER is committed)
PUSHED = [
    ({}, "SELECT * FROM s EMIT CHANGES", ["id", "item", "cost"], [[3, "pot", 9.0], [4, "jar", 0.25]]),
    (EARLIEST, "SELECT * FROM s EMIT CHANGES", ["id", "item", "cost"],
     [[1, "tea", 2.5], [2, "cup", 0.5], [3, "pot", 9.0], [4, "jar", 0.25]]),
    (EARLIEST, "SELECT item, cost * 2 AS twice FROM s WHERE cost > 1 EMIT CHANGES", ["item", "twice"],
     [["tea", 5.0], ["pot", 18.0]]),
    (EARLIEST, "SELECT id FROM s EMIT CHANGES LIMIT 3", ["id"], [[1], [2], [3]]),
    ({}, "SELECT id FROM s LIMIT 1 EMIT CHANGES", ["id"], [[3]]),
    ({}, "SELECT UPPER(item) AS item FROM s x WHERE x.id > 3 EMIT CHANGES", ["item"], [["JAR"]]),
    # a table's changes, each as it comes (ksqlDB's push query over a table)
    ({}, "SELECT * FROM t EMIT CHANGES", ["id", "v"], [[1, "y"]]),
    (EARLIEST, "SELECT v FROM t WHERE id = 1 EMIT CHANGES", ["v"], [["x"], ["y"]]),
    # a hostile alias is a column name, quoted where it is rendered; nothing runs it
    ({}, 'SELECT id AS `x"; DROP TABLE s; --` FROM s EMIT CHANGES LIMIT 1', ['x"; DROP TABLE s; --'], [[3]]),
]


def follow(engine, first, looks: int = 3):
    """The rows of ``first`` and of ``looks`` more looks at what was committed since."""
    rows, result = list(first.rows), first
    for _ in range(looks):
        result = engine.follow_push(result)
        rows += result.rows
    return rows


@pytest.mark.parametrize("settings, sql, columns, rows", PUSHED)
def test_a_push_query_shows_the_rows_committed_since_it_started(engine, settings, sql, columns, rows):
    engine.execute(SETUP)
    [pushed] = engine.execute(sql, settings=settings)
    assert pushed.columns == columns
    engine.execute(LATER)
    assert follow(engine, pushed) == rows


def test_earliest_set_in_the_same_script_reads_from_the_first_row(engine):
    engine.execute(SETUP)
    _, pushed = engine.execute("SET 'auto.offset.reset' = 'earliest'; SELECT id FROM s EMIT CHANGES LIMIT 2")
    assert pushed.rows == [[1], [2]] and pushed.details["push"]["shown"] == 2


def test_a_push_query_creates_no_query_and_writes_no_file(engine, home):
    engine.execute(SETUP + "CREATE STREAM big AS SELECT * FROM s WHERE cost > 1;")
    before = engine.execute("SHOW QUERIES")[0].rows, snapshot(home)
    [pushed] = engine.execute("SELECT * FROM big EMIT CHANGES", settings=EARLIEST)
    follow(engine, pushed)
    assert (engine.execute("SHOW QUERIES")[0].rows, snapshot(home)) == before


def test_a_dropped_source_ends_a_push_query(engine):
    engine.execute(SETUP)
    [pushed] = engine.execute("SELECT * FROM s EMIT CHANGES")
    engine.execute("DROP STREAM s")
    with pytest.raises(NotFoundError, match="no stream or table 'S': it was dropped while pushed"):
        engine.follow_push(pushed)


# (push query, error, what the message says): what needs state across rows runs as a persistent query
REFUSED = [
    ("SELECT item, COUNT(*) AS n FROM s GROUP BY item EMIT CHANGES", ValidationError,
     "push query refused: an aggregation: ksqlDB runs it as a transient stateful query; streamql runs it as a "
     "persistent query: CREATE TABLE t AS SELECT ... GROUP BY ..., then SELECT * FROM t EMIT CHANGES"),
    ("SELECT COUNT(*) AS n FROM s EMIT CHANGES", ValidationError, "push query refused: an aggregation"),
    ("SELECT item, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY item EMIT CHANGES", ValidationError,
     "push query refused: a windowed aggregation or join"),
    ("SELECT s.id AS id, t.v AS v FROM s JOIN t ON s.id = t.id EMIT CHANGES", ValidationError,
     "persistent query: CREATE STREAM t AS SELECT ... JOIN ..., then SELECT * FROM t EMIT CHANGES"),
    ("SELECT id FROM s WHERE id IN (SELECT id FROM t) EMIT CHANGES", ValidationError,
     "push query refused: a push query reads one stream or table"),
    ("SELECT DISTINCT item FROM s EMIT CHANGES", ValidationError, "push query refused: SELECT DISTINCT"),
    ("SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS r FROM s EMIT CHANGES", ValidationError,
     "push query refused: a window function"),
    ("SELECT id FROM s ORDER BY id EMIT CHANGES", ValidationError, "a push query shows rows as they arrive: ORDER BY and OFFSET"),
    ("SELECT * FROM nope EMIT CHANGES", ValidationError, "unknown stream or table"),
    ("SELECT * FROM s EMIT FINAL", ParseError, "EMIT FINAL is a push query of a windowed aggregation"),
    ("SELECT * FROM s EMIT CHANGES LIMIT -1", ParseError, "expected a whole number from 1"),
]


@pytest.mark.parametrize("sql, error, fragment", REFUSED)
def test_a_push_query_it_cannot_run_is_refused_with_the_reason(engine, sql, error, fragment):
    engine.execute(SETUP)
    with pytest.raises(error, match=re.escape(fragment)):
        engine.execute(sql)


@pytest.mark.parametrize("args, lines", [
    # the header, then the rows committed after the push query started, until its LIMIT
    (["SELECT id, item FROM s WHERE cost > 1 EMIT CHANGES LIMIT 1"], ["id | item", "3 | pot"]),
    (["--json", "SELECT id, item FROM s EMIT CHANGES LIMIT 2"],
     [{"columns": ["id", "item"]}, {"id": 3, "item": "pot"}, {"id": 4, "item": "jar"}]),
])
def test_the_cli_streams_the_rows_until_its_limit(sqlite_engine, env, args, lines):
    sqlite_engine.execute(SETUP)
    proc = subprocess.Popen(CLI + ["exec", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # the push query has started: what is committed now is behind it
    sqlite_engine.execute(LATER)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    shown = [first.rstrip("\n"), *out.splitlines()]
    assert (shown if "--json" not in args else [json.loads(line) for line in shown]) == lines


def test_ctrl_c_ends_exec_of_a_push_query(sqlite_engine, env):
    sqlite_engine.execute(SETUP)
    proc = subprocess.Popen(CLI + ["exec", "SELECT id FROM s EMIT CHANGES"], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "id\n"
    proc.send_signal(signal.SIGINT)  # it keeps reading until then
    assert proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_a_push_query_follows_what_a_running_query_commits(sqlite_engine, runtimes):
    """Through a real runtime: Spark runs the persistent query writing ``big``; a push query
    over it shows the rows each of its batches commits, and changes no query."""
    engine = sqlite_engine
    engine.execute(SETUP + "CREATE STREAM big AS SELECT id, item FROM s WHERE cost > 1;")
    runtimes.start(engine)
    engine.wait_caught_up("CSAS_BIG_1", timeout=120)  # tea is behind the push query
    queries = [q.id for q in engine.query_infos()]
    [pushed] = engine.execute("SELECT item FROM big WHERE id > 1 EMIT CHANGES LIMIT 1")
    assert pushed.rows == []
    engine.execute(LATER)
    engine.wait_caught_up("CSAS_BIG_1", timeout=120)
    more = engine.follow_push(pushed)
    assert more.rows == [["pot"]] and more.details["push"]["shown"] == 1
    assert engine.follow_push(more).rows == []  # its LIMIT is reached
    assert [q.id for q in engine.query_infos()] == queries

