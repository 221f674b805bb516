"""Parsing: one line per case."""
import pytest

from airflow_provider_streamql.errors import ParseError
from airflow_provider_streamql.language import parse_one
from airflow_provider_streamql.language import statements as st

# text -> (statement class, {field: expected value})
PARSES = [
    ("CREATE STREAM s (id INT KEY, cost DOUBLE) WITH (value_format='json')", st.CreateSource,
     {"kind": "STREAM", "name": "S", "properties": {"value_format": "json"},
      "columns": [st.Column.of("id", "INT", True), st.Column.of("cost", "DOUBLE")]}),
    ("create or replace table t (id BIGINT PRIMARY KEY, tags ARRAY<STRING>)", st.CreateSource,
     {"kind": "TABLE", "or_replace": True, "columns": [st.Column.of("id", "BIGINT", True), st.Column.of("tags", "ARRAY<STRING>")]}),
    ("CREATE STREAM s (amount DECIMAL(10,2)) WITH (path='in/s', value_format='CSV')", st.CreateSource,
     {"columns": [st.Column.of("amount", "DECIMAL(10, 2)")], "properties": {"path": "in/s", "value_format": "CSV"}}),
    ("CREATE STREAM v AS SELECT * FROM s WHERE cost > 0 EMIT CHANGES", st.CreateAsSelect,
     {"kind": "STREAM", "name": "V", "emit": "CHANGES", "select": "SELECT * FROM s WHERE cost > 0"}),
    ("CREATE TABLE t WITH (value_format='parquet') AS SELECT k, COUNT(*) AS n FROM s GROUP BY k", st.CreateAsSelect,
     {"kind": "TABLE", "properties": {"value_format": "parquet"}, "emit": None}),
    ("ALTER STREAM s ADD COLUMN c INT, ADD COLUMN d STRING", st.AlterSource,
     {"name": "S", "add_columns": [st.Column.of("c", "INT"), st.Column.of("d", "STRING")]}),
    ("INSERT INTO s2 SELECT * FROM s", st.InsertSelect, {"target": "S2", "select": "SELECT * FROM s"}),
    ("INSERT INTO s (id, cost) VALUES (1, -9.5)", st.InsertValues, {"target": "S", "columns": ["id", "cost"], "value_sql": ["1", "-9.5"]}),
    ("INSERT INTO s VALUES ('a', NULL, TRUE)", st.InsertValues, {"columns": None, "value_sql": ["'a'", "NULL", "TRUE"]}),
    ("INSERT INTO s VALUES (1), (2)", st.InsertValues, {"columns": None, "value_sql": ["1"]}),
    ("INSERT INTO s VALUES (TIMESTAMP '2024-01-01 00:00:00', 1 + 2, UPPER('x' || 'y'))", st.InsertValues,
     {"value_sql": ["CAST('2024-01-01 00:00:00' AS TIMESTAMP)", "1 + 2", "UPPER('x' || 'y')"]}),
    ("SELECT * FROM t WHERE n > 1 LIMIT 5", st.PullQuery, {"select": "SELECT * FROM t WHERE n > 1 LIMIT 5"}),
    ("SELECT id FROM s WHERE n > 1 EMIT CHANGES LIMIT 3", st.PushQuery, {"select": "SELECT id FROM s WHERE n > 1", "limit": 3}),
    ("SELECT id FROM s LIMIT 2 EMIT CHANGES", st.PushQuery, {"select": "SELECT id FROM s", "limit": 2}),
    ("SELECT * FROM s EMIT CHANGES", st.PushQuery, {"select": "SELECT * FROM s", "limit": None}),
    ("PAUSE csas_v_1", st.QueryControl, {"action": "PAUSE", "query_id": "CSAS_V_1"}),
    ("RESUME ALL", st.QueryControl, {"action": "RESUME", "query_id": None}),
    ("TERMINATE ALL", st.QueryControl, {"action": "TERMINATE", "query_id": None}),
    ("RESUME csas_v_1 SKIP BAD RECORDS", st.QueryControl,
     {"action": "RESUME", "query_id": "CSAS_V_1", "skip_bad_records": True}),
    ("resume all skip bad records", st.QueryControl, {"query_id": None, "skip_bad_records": True}),
    ("CREATE STREAM v WITH (on_error='PAUSE') AS SELECT * FROM s", st.CreateAsSelect,
     {"properties": {"on_error": "PAUSE"}}),
    ("DROP STREAM IF EXISTS s DELETE TOPIC", st.DropSource, {"kind": "STREAM", "if_exists": True, "delete_topic": True}),
    ("DROP TABLE t", st.DropSource, {"kind": "TABLE", "if_exists": False, "delete_topic": False}),
    ("SHOW QUERIES EXTENDED", st.Show, {"what": "QUERIES", "extended": True}),
    ("LIST STREAMS", st.Show, {"what": "STREAMS", "extended": False}),
    ("DESCRIBE t EXTENDED", st.Describe, {"name": "T", "extended": True}),
    ("EXPLAIN CTAS_T_3", st.Explain, {"query_id": "CTAS_T_3"}),
    ("DESCRIBE ctas_t_3 STATE", st.Describe, {"name": "CTAS_T_3", "state": True, "state_limit": 20}),
    ("DESCRIBE CTAS_T_3 STATE LIMIT 5", st.Describe, {"state": True, "state_limit": 5}),
    ("SNAPSHOT csas_s_1", st.TakeSnapshot, {"query_id": "CSAS_S_1", "keep": None, "max_age_hours": None}),
    ("SNAPSHOT CSAS_S_1 WITH (keep=3, max_age_hours=1.5)", st.TakeSnapshot, {"keep": 3, "max_age_hours": 1.5}),
    ("RESTORE CSAS_S_1 TO SNAPSHOT 4", st.RestoreQuery, {"query_id": "CSAS_S_1", "number": 4}),
    ("SHOW SNAPSHOTS", st.Show, {"what": "SNAPSHOTS"}),
    ("SET 'auto.offset.reset' = 'earliest'", st.SetProperty, {"key": "auto.offset.reset", "value": "earliest"}),
    ("UNSET 'auto.offset.reset'", st.SetProperty, {"key": "auto.offset.reset", "value": None}),
    ("CREATE STREAM IF NOT EXISTS s (id INT)", st.CreateSource, {"name": "S", "if_not_exists": True}),
    ("CREATE TABLE IF NOT EXISTS t AS SELECT k, COUNT(*) AS n FROM s GROUP BY k", st.CreateAsSelect,
     {"name": "T", "if_not_exists": True}),
    ("SHOW TOPICS", st.Show, {"what": "TOPICS"}),
    ("LIST PROPERTIES", st.Show, {"what": "PROPERTIES"}),
]

# text -> (fragment of the message, line, column)
ERRORS = [
    ("CREATE STREAM `a/b` (id INT)", "'a/b' is not a plain SQL name", 1, 15),
    ("CREATE STREAM a..b (id INT)", "'a..b' is not a plain SQL name", 1, 15),
    ("CREATE STREAM s (id INTT)", "unknown type 'INTT'", 1, 21),
    ("CREATE STREAM s (id INT PRIMARY KEY)", "PRIMARY KEY is for tables", 1, 25),
    ("CREATE STREAM s\n  AS SELECT FROM WHERE", "invalid SELECT", 2, 18),
    ("PAUSE", "expected a stream, table or query name", 1, 6),
    ("FROB s", "expected a StreamQL statement", 1, 1),
    ("CREATE STREAM s (id INT) WITH (path=)", "expected a string, number or boolean", 1, 37),
    ("CREATE STREAM s (id INT) WITH (path='a', path='b')", "property 'path' is given twice", 1, 42),
    ("INSERT INTO s (a, b) VALUES (1)", "2 columns but 1 values", 1, 1),
    ("SHOW THINGS", "expected STREAMS, TABLES, QUERIES, TOPICS, PROPERTIES or SNAPSHOTS", 1, 6),
    ("CREATE STREAM v AS SELECT * FROM s EMIT SOMETIMES", "expected EMIT CHANGES or EMIT FINAL", 1, 41),
    ("CREATE OR REPLACE STREAM IF NOT EXISTS s (id INT)", "OR REPLACE and IF NOT EXISTS cannot go together", 1, 33),
    ("SELECT * FROM s EMIT FINAL", "EMIT FINAL is a push query of a windowed aggregation", 1, 17),
    ("SELECT * FROM s LIMIT 1 EMIT CHANGES LIMIT 2", "a push query has one LIMIT", 1, 25),
    ("SELECT * FROM s EMIT CHANGES LIMIT 0", "expected a whole number from 1", 1, 36),
    # ksqlDB statements streamql refuses, each with its reason
    ("CREATE TYPE addr AS STRUCT<street STRING>", "CREATE TYPE is not supported", 1, 1),
    ("CREATE SOURCE TABLE t (id INT PRIMARY KEY)", "CREATE SOURCE TABLE (a read-only table) is not supported", 1, 1),
    ("CREATE SINK CONNECTOR c WITH ('a' = 'b')", "Kafka Connect connectors are outside streamql", 1, 1),
    ("SHOW CONNECTORS", "Kafka Connect connectors are outside streamql", 1, 1),
    ("RUN SCRIPT '/etc/passwd'", "RUN SCRIPT is not supported: a statement never reads a file", 1, 1),
    ("DEFINE table_name = 'x'", "variables (DEFINE) are not supported", 1, 1),
    ("ASSERT TOPIC pageviews", "ASSERT is not supported", 1, 1),
    ("PAUSE q1 now", "unexpected text after the statement", 1, 10),
    ("SELECT MAP('a' := 1) FROM s", "invalid SELECT: it cannot be read as Spark SQL", 1, 1),
    ("RESTORE q1 TO SNAPSHOT 0", "expected a whole number from 1 to 2147483647, got '0'", 1, 24),
    ("RESTORE q1 TO SNAPSHOT 1.5", "expected a whole number from 1 to 2147483647, got '1.5'", 1, 24),
    ("RESTORE q1 SNAPSHOT 1", "expected TO", 1, 12),
    ("SNAPSHOT q1 WITH (keep=-1)", "keep must be a whole number of snapshots from 1 to 2147483647, not -1", 1, 13),
    ("RESTORE q1 TO SNAPSHOT 99999999999", "from 1 to 2147483647, got '99999999999'", 1, 24),
    ("DESCRIBE q1 STATE LIMIT 5000", "DESCRIBE ... STATE shows at most 1000 rows per operator, not 5000", 1, 29),
    ("SNAPSHOT q1 WITH (max_age_hours='1 day')", "max_age_hours must be a positive number of hours", 1, 13),
    ("SNAPSHOT q1 WITH (path='/etc')", "unknown property 'path' of SNAPSHOT", 1, 13),
    ("DESCRIBE q1 STATE LIMIT many", "expected a whole number from 1 to 2147483647, got 'many'", 1, 25),
    ("RESUME q1 SKIP RECORDS", "expected BAD", 1, 16),
    ("PAUSE q1 SKIP BAD RECORDS", "unexpected text after the statement", 1, 10),
    ("PAUSE " + "q" * 129, "a name has at most 128 characters; this one has 129", 1, 7),
    ("CREATE STREAM `s\n` (id INT)", "'s\\n' is not a plain SQL name", 2, 1),
    ("INSERT INTO s (a, b, A) VALUES (1, 2, 3)", "column 'A' is listed twice", 1, 22),
    ("SELECT 1e999 FROM s", "number '1e999' is out of range of a DOUBLE", 1, 8),
    ("INSERT INTO s VALUES (1e)", "number '1e' is not a number", 1, 23),
    ("SELECT " + "(" * 33 + "1" + ")" * 33 + " FROM s", "more than 32 levels of parentheses", 1, 40),
    ("CREATE TABLE v AS SELECT k, COUNT(*) FROM s WINDOW TUMBLING (SIZE 1e308 DAYS) GROUP BY k",
     "window SIZE 1e+308 DAYS is out of range", 1, 67),
    ("CREATE STREAM s (id INT) WITH (path='\x00')", "the text holds a NUL character", 1, 38),
]


@pytest.mark.parametrize("text, cls, fields", PARSES)
def test_parses(text, cls, fields):
    stmt = parse_one(text)
    assert isinstance(stmt, cls)
    for name, value in fields.items():
        got = getattr(stmt, name)
        assert (got.sql(dialect="spark") if name == "select" else got) == value  # a SELECT is a tree


@pytest.mark.parametrize("text, fragment, line, col", ERRORS)
def test_errors_name_the_problem_and_place(text, fragment, line, col):
    with pytest.raises(ParseError) as info:
        parse_one(text)
    assert fragment in info.value.message
    assert (info.value.line, info.value.col) == (line, col)


def test_script_positions_are_per_statement():
    from airflow_provider_streamql.language import parse
    stmts = parse("SHOW STREAMS;\nPAUSE ALL;\n  RESUME ALL")
    assert [(s.line, s.col) for s in stmts] == [(1, 1), (2, 1), (3, 3)]
