"""PRINT <topic> [FROM BEGINNING] [INTERVAL n] [LIMIT n] on file topics (issue 31): the records
as stored, with their event time and key, as ksqlDB's PRINT shows them; the CLI keeps reading
what is written since, until LIMIT or Ctrl-C."""
import json
import signal
import subprocess

import pytest

from airflow_provider_streamql.errors import NotFoundError, ParseError, StateError

from .support import CLI

SETUP = """
CREATE STREAM s (id INT KEY, v STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM pairs (a INT KEY, b INT KEY, n INT);
CREATE STREAM plain (n INT);
INSERT INTO s VALUES (1, 'a', '2024-01-01 00:00:00'), (2, 'b', '2024-01-01 00:00:01');
INSERT INTO s VALUES (3, 'c', NULL);
INSERT INTO pairs VALUES (1, 2, 3);
INSERT INTO plain VALUES (4);
"""

# (PRINT, the (rowtime, key, value) of each record shown)
PRINTED = [
    ("PRINT s FROM BEGINNING", [("2024-01-01 00:00:00", "1", '{"id":1,"v":"a","ts":"2024-01-01 00:00:00"}'),
                                ("2024-01-01 00:00:01", "2", '{"id":2,"v":"b","ts":"2024-01-01 00:00:01"}'),
                                (None, "3", '{"id":3,"v":"c","ts":null}')]),
    ("PRINT s FROM BEGINNING LIMIT 2", [("2024-01-01 00:00:00", "1", '{"id":1,"v":"a","ts":"2024-01-01 00:00:00"}'),
                                        ("2024-01-01 00:00:01", "2", '{"id":2,"v":"b","ts":"2024-01-01 00:00:01"}')]),
    ("PRINT 's' FROM BEGINNING INTERVAL 2", [("2024-01-01 00:00:00", "1", '{"id":1,"v":"a","ts":"2024-01-01 00:00:00"}'),
                                             (None, "3", '{"id":3,"v":"c","ts":null}')]),
    ("PRINT s", []),  # from now on: what is written after it
    ("PRINT pairs FROM BEGINNING", [(None, '{"a":1,"b":2}', '{"a":1,"b":2,"n":3}')]),
    ("PRINT plain FROM BEGINNING", [(None, None, '{"n":4}')]),
]


@pytest.mark.parametrize("sql, records", PRINTED)
def test_print_shows_the_records_as_stored(engine, sql, records):
    engine.execute(SETUP)
    [result] = engine.execute(sql)
    assert [tuple(row[:3]) for row in result.rows] == records


@pytest.mark.parametrize("sql, error, fragment", [
    ("PRINT nope", NotFoundError, "unknown stream or table 'NOPE'"),
    ("PRINT s LIMIT 0", ParseError, "expected a whole number from 1"),
    ("PRINT 's; DROP STREAM s'", ParseError, "a name has letters, digits and _ only"),
    # an engine without Kafka settings (PRINT on a topic: tests/test_kafka_engine.py)
    ("PRINT k FROM BEGINNING", StateError, r"PRINT K \(Kafka topic 'k'\) talks to Kafka, and this engine has no"),
])
def test_print_refuses_what_it_cannot_show(engine, sql, error, fragment):
    engine.execute(SETUP + "CREATE STREAM k (n INT) WITH (kafka_topic='k');")
    with pytest.raises(error, match=fragment):
        engine.execute(sql)


@pytest.mark.parametrize("args, lines", [
    # the CLI keeps reading: the two records inserted after PRINT started, then LIMIT ends it
    (["PRINT plain LIMIT 2"], ["Format: JSON", "rowtime: N/A, key: <null>, value: {\"n\":5}, file: ",
                               "rowtime: N/A, key: <null>, value: {\"n\":6}, file: "]),
    (["--json", "PRINT plain LIMIT 2"], [{"format": "JSON"}, {"rowtime": None, "key": None, "value": '{"n":5}'},
                                         {"rowtime": None, "key": None, "value": '{"n":6}'}]),
])
def test_the_cli_prints_what_is_written_since_until_its_limit(sqlite_engine, env, args, lines):
    engine = sqlite_engine  # the catalog the CLI opens (env)
    engine.execute(SETUP)
    proc = subprocess.Popen(CLI + ["exec", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # PRINT has started: what is stored now is behind it
    engine.execute("INSERT INTO plain VALUES (5)")
    engine.execute("INSERT INTO plain VALUES (6)")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    printed = [first.rstrip("\n"), *out.splitlines()] if "--json" not in args else [first, *out.splitlines()]
    if "--json" in args:
        assert [{k: v for k, v in json.loads(line).items() if k != "file"} for line in printed] == lines
    else:
        assert [line.split("file: ")[0] + ("file: " if "file: " in line else "") for line in printed] == lines


def test_ctrl_c_ends_a_print(sqlite_engine, env):
    sqlite_engine.execute(SETUP)
    proc = subprocess.Popen(CLI + ["exec", "PRINT s FROM BEGINNING"], env=env, stdout=subprocess.PIPE, text=True)
    printed = [proc.stdout.readline() for _ in range(4)]  # its format, then the 3 stored records
    assert printed[0] == "Format: JSON\n" and printed[3].startswith("rowtime: N/A, key: 3, ")
    proc.send_signal(signal.SIGINT)  # it keeps reading until then
    assert proc.wait(timeout=30) == 0
