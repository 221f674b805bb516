"""Item 4: queries over TABLE sources (a changelog in, a changelog out).

Every input is in the tables before the queries start, so each query sees the tables' final
state: u1 moved from 'eu' to 'us' (the filter on 'eu' deletes it), region 'eu' was relabelled.
"""

from .harness import Case

SOURCES = """
CREATE TABLE t_users (id STRING PRIMARY KEY, name STRING, region STRING, age INT);
CREATE TABLE t_regions (code STRING PRIMARY KEY, label STRING);
CREATE STREAM t_clicks (id STRING, ts TIMESTAMP) WITH (timestamp='ts');
"""
INPUTS = [
    "INSERT INTO t_users VALUES ('u1', 'ann', 'eu', 30)",
    "INSERT INTO t_users VALUES ('u2', 'bob', 'us', 40)",
    "INSERT INTO t_users VALUES ('u3', 'cid', 'eu', 25)",
    "INSERT INTO t_users VALUES ('u1', 'ann', 'us', 31)",
    "INSERT INTO t_users VALUES ('u4', 'dan', 'eu', 50)",
    "INSERT INTO t_users VALUES ('u5', 'eve', 'apac', 20)",
    "INSERT INTO t_regions VALUES ('eu', 'Europe')",
    "INSERT INTO t_regions VALUES ('us', 'United States')",
    "INSERT INTO t_regions VALUES ('eu', 'EU')",
]
CASES = [
    Case(4, "filter that deletes", "CREATE TABLE t_eu AS SELECT id, name FROM t_users WHERE region = 'eu'",
         "t_eu", [("u3", "cid"), ("u4", "dan")]),
    Case(4, "projection", "CREATE TABLE t_next AS SELECT id AS uid, age + 1 AS next_age FROM t_users",
         "t_next", [("u1", 32), ("u2", 41), ("u3", 26), ("u4", 51), ("u5", 21)], columns=["uid", "next_age"]),
    Case(4, "count per group", "CREATE TABLE t_per_region AS SELECT region, COUNT(*) AS n FROM t_users GROUP BY region",
         "t_per_region", [("eu", 2), ("us", 2), ("apac", 1)]),
    Case(4, "sum with having", "CREATE TABLE t_big AS SELECT region, SUM(age) AS total FROM t_users "
         "GROUP BY region HAVING COUNT(*) > 1", "t_big", [("eu", 75), ("us", 71)]),
    Case(4, "table-table join", "CREATE TABLE t_labeled AS SELECT u.id AS id, u.name AS name, r.label AS label "
         "FROM t_users u JOIN t_regions r ON u.region = r.code", "t_labeled",
         [("u1", "ann", "United States"), ("u2", "bob", "United States"), ("u3", "cid", "EU"), ("u4", "dan", "EU")]),
    Case(4, "left table-table join", "CREATE TABLE t_all_labeled AS SELECT u.id AS id, r.label AS label "
         "FROM t_users u LEFT JOIN t_regions r ON u.region = r.code", "t_all_labeled",
         [("u1", "United States"), ("u2", "United States"), ("u3", "EU"), ("u4", "EU"), ("u5", None)]),
    Case(4, "aggregate a table-table join", "CREATE TABLE t_per_label AS SELECT r.label AS label, COUNT(*) AS n "
         "FROM t_users u JOIN t_regions r ON u.region = r.code GROUP BY r.label", "t_per_label",
         [("United States", 2), ("EU", 2)]),
    Case(4, "stream from a table", "CREATE STREAM t_s AS SELECT id, name FROM t_users",
         refused="a query over a table makes a TABLE"),
    Case(4, "window over a table", "CREATE TABLE t_w AS SELECT region, COUNT(*) AS n FROM t_users "
         "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY region", refused="WINDOW needs a STREAM"),
    Case(4, "table joined to a stream", "CREATE TABLE t_tc AS SELECT u.id AS id, COUNT(*) AS n FROM t_users u "
         "JOIN t_clicks c ON u.id = c.id GROUP BY u.id", refused="put the stream first"),
    Case(4, "key not selected", "CREATE TABLE t_nokey AS SELECT name FROM t_users",
         refused="selects its PRIMARY KEY"),
    Case(4, "join not on the key", "CREATE TABLE t_byname AS SELECT u.id AS id, r.code AS code FROM t_users u "
         "JOIN t_regions r ON u.name = r.label", refused="ON must equate T_REGIONS's PRIMARY KEY"),
]
