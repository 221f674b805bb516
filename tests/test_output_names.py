"""The names of a query's output columns, as ksqlDB gives them (issue 15, items 1 and 2):
``SELECT *`` over a join as ``<ALIAS>_<COLUMN>`` with the join key once, qualified columns
more than one joined source has named the same way, ``KSQL_COL_<n>`` for expressions without
``AS``. One line per case; each checks the sink's columns and that the Spark SQL the runtime
runs outputs exactly those names. No JVM: a real SQLite catalog."""
import pytest
import sqlglot

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.language.dialect import DIALECT

SOURCES = """
CREATE STREAM orders (oid INT, user STRING, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM shipments (oid INT, carrier STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE users (id STRING PRIMARY KEY, name STRING, region STRING);
CREATE STREAM pageviews (user STRING, page STRING, ms INT, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM gen (KSQL_COL_0 INT, v INT);
"""
W = "WITHIN 1 MINUTE"
OS = f"FROM orders o JOIN shipments s {W} ON o.oid = s.oid"
ALL_O = "O_OID INT, O_USER STRING, O_AMOUNT DOUBLE, O_TS TIMESTAMP"

# (statement, its output's columns: "NAME TYPE [KEY]", ...)
NAMES = [
    # 1. joins: SELECT * names every column <ALIAS>_<COLUMN>, the ON key once (from the left)
    (f"CREATE STREAM x AS SELECT * {OS}", f"{ALL_O}, S_CARRIER STRING, S_TS TIMESTAMP"),
    (f"CREATE STREAM x AS SELECT * FROM orders o LEFT JOIN shipments s {W} ON o.oid = s.oid", f"{ALL_O}, S_CARRIER STRING, S_TS TIMESTAMP"),
    (f"CREATE STREAM x AS SELECT * FROM orders o JOIN shipments s {W} ON s.oid = o.oid WHERE o.amount > 0", f"{ALL_O}, S_CARRIER STRING, S_TS TIMESTAMP"),
    (f"CREATE STREAM x AS SELECT * FROM orders JOIN shipments {W} ON orders.oid = shipments.oid",
     "ORDERS_OID INT, ORDERS_USER STRING, ORDERS_AMOUNT DOUBLE, ORDERS_TS TIMESTAMP, SHIPMENTS_CARRIER STRING, SHIPMENTS_TS TIMESTAMP"),
    ("CREATE STREAM x AS SELECT * FROM orders o LEFT JOIN users u ON o.user = u.id", f"{ALL_O}, U_NAME STRING, U_REGION STRING"),
    ("CREATE STREAM x AS SELECT * FROM pageviews p JOIN users u ON u.id = p.user",
     "P_USER STRING, P_PAGE STRING, P_MS INT, P_TS TIMESTAMP, U_NAME STRING, U_REGION STRING"),
    (f"CREATE STREAM x AS SELECT o.*, s.carrier {OS}", f"{ALL_O}, carrier STRING"),
    (f"CREATE STREAM x AS SELECT s.* {OS}", "S_OID INT, S_CARRIER STRING, S_TS TIMESTAMP"),  # o.* keeps all its columns
    # qualified columns two sources have get the alias; the others keep their name
    (f"CREATE STREAM x AS SELECT o.oid, s.oid, o.ts, carrier, o.user {OS}", "O_OID INT, S_OID INT, O_TS TIMESTAMP, carrier STRING, user STRING"),
    (f"CREATE STREAM x AS SELECT s.carrier, o.amount {OS}", "carrier STRING, amount DOUBLE"),
    (f"CREATE STREAM x AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier {OS}", "oid INT, amount DOUBLE, carrier STRING"),
    (f"CREATE STREAM x AS SELECT o.oid AS oid, s.oid {OS}", "oid INT, S_OID INT"),
    ("CREATE STREAM x AS SELECT p.user, u.name, u.id FROM pageviews p JOIN users u ON p.user = u.id", "user STRING, name STRING, id STRING"),
    (f"CREATE STREAM x AS SELECT o.oid AS oid, o.amount * 2 {OS}", "oid INT, KSQL_COL_0 DOUBLE"),
    # 2. an expression without AS is KSQL_COL_<n>, n in SELECT order, skipping names in use
    ("CREATE STREAM x AS SELECT user, ms * 2, UPPER(page) FROM pageviews", "user STRING, KSQL_COL_0 INT, KSQL_COL_1 STRING"),
    ("CREATE STREAM x AS SELECT ms + 1 AS KSQL_COL_0, ms * 2 FROM pageviews", "KSQL_COL_0 INT, KSQL_COL_1 INT"),
    ("CREATE STREAM x AS SELECT ms * 2, ms + 1 AS ksql_col_0, page FROM pageviews", "KSQL_COL_1 INT, ksql_col_0 INT, page STRING"),
    ("CREATE STREAM x AS SELECT v + 1, v FROM gen", "KSQL_COL_1 INT, v INT"),  # a source column's name is in use
    ("CREATE STREAM x AS SELECT user, CASE WHEN ms > 100 THEN 'slow' ELSE 'fast' END FROM pageviews", "user STRING, KSQL_COL_0 STRING"),
    ("CREATE TABLE x AS SELECT user, COUNT(*), SUM(ms) FROM pageviews GROUP BY user", "user STRING KEY, KSQL_COL_0 BIGINT, KSQL_COL_1 BIGINT"),
    ("CREATE TABLE x AS SELECT UPPER(user), COUNT(*) AS n FROM pageviews GROUP BY UPPER(user)", "KSQL_COL_0 STRING KEY, n BIGINT"),
    ("CREATE TABLE x AS SELECT page, COUNT(*) FROM pageviews WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY page",
     "page STRING KEY, KSQL_COL_0 BIGINT, WINDOWSTART TIMESTAMP KEY, WINDOWEND TIMESTAMP KEY"),
    # names that were already there stay as they were
    ("CREATE STREAM x AS SELECT * FROM pageviews", "user STRING, page STRING, ms INT, ts TIMESTAMP"),
    ("CREATE STREAM x AS SELECT p.user, p.ms AS ms FROM pageviews p", "user STRING, ms INT"),
    # 3. * over a subquery is its output columns; over a UNION ALL, its first branch's
    ("CREATE STREAM x AS SELECT * FROM (SELECT user, ms FROM pageviews)", "user STRING, ms INT"),
    ("CREATE STREAM x AS SELECT * FROM (SELECT * FROM pageviews WHERE ms > 0)", "user STRING, page STRING, ms INT, ts TIMESTAMP"),
    ("CREATE STREAM x AS SELECT v.* FROM (SELECT user, ms * 2 AS ms2 FROM pageviews) v", "user STRING, ms2 INT"),
    ("CREATE STREAM x AS SELECT * FROM (SELECT oid, user FROM orders UNION ALL SELECT oid, carrier AS user FROM shipments)", "oid INT, user STRING"),
    ("CREATE STREAM x AS SELECT *, 1 AS one FROM (SELECT * FROM (SELECT user, page FROM pageviews))", "user STRING, page STRING, one INT"),
]

REFUSED = [
    (f"CREATE STREAM x AS SELECT o.oid AS o_oid, * {OS}", "column 'O_OID' appears twice in the output"),
    (f"CREATE STREAM x AS SELECT o.oid, o.oid {OS}", "column 'O_OID' appears twice in the output"),
    ("CREATE STREAM x AS SELECT user, user FROM pageviews", "column 'user' appears twice in the output"),
    (f"CREATE STREAM x AS SELECT oid {OS}", "column 'oid' is ambiguous: more than one joined source has it; qualify it (o.oid or s.oid)"),
    (f"CREATE STREAM x AS SELECT o.oid AS oid FROM orders o JOIN shipments s {W} ON oid = s.oid", "column 'oid' is ambiguous"),
    ("CREATE STREAM x AS SELECT * FROM (SELECT user, ms * 2 FROM pageviews)", "* reads a subquery whose ms * 2 has no name: give it one with AS"),
    ("CREATE STREAM x AS SELECT v.* FROM (SELECT * FROM (SELECT user, ms * 2 FROM pageviews)) v", "has no name: give it one with AS"),
    (f"CREATE STREAM x AS SELECT * FROM (SELECT oid, user FROM orders) v JOIN shipments s {W} ON v.oid = s.oid", "* over a join with a subquery: name the columns"),
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("names")
    engine = Engine(f"sqlite:///{path}/c.db", home=str(path), issuer="test")
    engine.execute(SOURCES)
    yield engine
    engine.close()


def columns_of(engine, name):
    return ", ".join(" ".join([n, t] + (["KEY"] if k else [])) for n, t, k in engine.execute(f"DESCRIBE {name}")[0].rows)


@pytest.mark.parametrize("sql, columns", NAMES)
def test_output_names(engine, sql, columns):
    (result,) = engine.execute(sql)
    try:
        assert columns_of(engine, "x") == columns
        plan = engine.query(result.query_id).plan
        spark_names = [p.alias_or_name for p in sqlglot.parse_one(plan.spark_sql, dialect=DIALECT).selects]
        assert spark_names == [c.split()[0] for c in columns.split(", ")]  # what Spark writes is the sink's columns
    finally:
        engine.execute(f"TERMINATE {result.query_id}; DROP {sql.split()[1]} x")


@pytest.mark.parametrize("sql, fragment", REFUSED)
def test_names_refused(engine, sql, fragment):
    before = engine.queries()
    with pytest.raises(Exception) as info:
        engine.execute(sql)
    assert fragment in str(info.value)
    assert engine.queries() == before


def test_pull_queries_take_the_same_names(engine):
    engine.execute("INSERT INTO orders VALUES (1, 'ann', 9.5, '2024-01-01 00:00:00');"
                   "INSERT INTO shipments VALUES (1, 'ups', '2024-01-01 00:00:30');"
                   "INSERT INTO pageviews VALUES ('ann', 'home', 120, '2024-01-01 00:00:01')")
    (joined,) = engine.execute("SELECT * FROM orders o JOIN shipments s ON o.oid = s.oid")
    assert joined.columns == ["O_OID", "O_USER", "O_AMOUNT", "O_TS", "S_CARRIER", "S_TS"]
    assert joined.rows == [[1, "ann", 9.5, "2024-01-01T00:00:00.000Z", "ups", "2024-01-01T00:00:30.000Z"]]
    (computed,) = engine.execute("SELECT user, COUNT(*), SUM(ms) * 2 FROM pageviews GROUP BY user")
    assert (computed.columns, computed.rows) == (["user", "KSQL_COL_0", "KSQL_COL_1"], [["ann", 1, 240]])


G = "CREATE STREAM g AS SELECT user, ms * 2 FROM pageviews"
GT = "CREATE TABLE gt AS SELECT user, COUNT(*), SUM(ms) FROM pageviews GROUP BY user"
J = f"CREATE STREAM j AS SELECT * {OS}"
# CREATE OR REPLACE of a query whose names are made up: (old, new, verdict, codes)
UPGRADES = [
    (G, G, "IN_PLACE", {"UNCHANGED"}),
    (G, "CREATE STREAM g AS SELECT user, ms * 2 AS KSQL_COL_0 FROM pageviews", "IN_PLACE", {"UNCHANGED"}),
    (G, "CREATE STREAM g AS SELECT user, ms * 3 FROM pageviews", "IN_PLACE", {"PROJECTION_CHANGED"}),
    (G, "CREATE STREAM g AS SELECT user, ms * 2, UPPER(page) FROM pageviews", "IN_PLACE", {"COLUMN_APPENDED"}),
    (G, "CREATE STREAM g AS SELECT ms * 2, user FROM pageviews", "REJECTED", {"COLUMNS_REORDERED"}),
    (G, "CREATE STREAM g AS SELECT user, ms * 2 AS doubled FROM pageviews", "REJECTED", {"COLUMN_REMOVED", "COLUMN_APPENDED"}),
    (GT, GT, "IN_PLACE", {"UNCHANGED"}),
    (GT, "CREATE TABLE gt AS SELECT user, COUNT(*), SUM(ms), MAX(ms) FROM pageviews GROUP BY user", "REPLACING_REQUIRED", {"AGGREGATES_CHANGED"}),
    (J, J, "IN_PLACE", {"UNCHANGED"}),
    (J, f"CREATE STREAM j AS SELECT o.oid AS O_OID, o.user AS O_USER, o.amount AS O_AMOUNT, o.ts AS O_TS, s.carrier AS S_CARRIER, s.ts AS S_TS {OS}", "IN_PLACE", {"UNCHANGED"}),
    (J, f"CREATE STREAM j AS SELECT * FROM orders o JOIN shipments s {W} ON o.oid = s.oid WHERE o.amount > 1", "IN_PLACE", {"FILTER_CHANGED"}),
]


@pytest.mark.parametrize("old, new, verdict, codes", UPGRADES)
def test_upgrades_of_made_up_names(tmp_path, old, new, verdict, codes):
    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path))
    engine.execute(SOURCES + old)
    replace = new.replace("CREATE ", "CREATE OR REPLACE ", 1)
    report = engine.validate(replace)
    assert report.verdict == verdict, report.render()
    assert {f.code for f in report.findings} == codes, report.render()
    if old == new:  # the same statement again: what runs and what it writes stay the same
        name = old.split()[2]
        (before,) = [q["query_id"] for q in engine.queries()]
        plan, columns = engine.query(before).plan, columns_of(engine, name)
        (result,) = engine.execute(replace)
        assert (engine.query(result.query_id).plan, columns_of(engine, name)) == (plan, columns)
