"""Items 1 and 2: join output named like ksqlDB's (``<ALIAS>_<COLUMN>``, the join key once)
and ``KSQL_COL_<n>`` for expressions without ``AS``."""

from .harness import Case, minute

T0, T10, T20, T30, T40 = (f"2024-01-01T00:00:{s:02d}.000Z" for s in (0, 10, 20, 30, 40))
M0, M1 = map(minute, range(2))
SOURCES = """
CREATE STREAM n_orders (oid INT, user STRING, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM n_shipments (oid INT, carrier STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE n_users (id STRING PRIMARY KEY, name STRING);
"""
INPUTS = [
    "INSERT INTO n_users VALUES ('ann', 'Ann')",
    "INSERT INTO n_users VALUES ('bob', 'Bob')",
    "INSERT INTO n_orders VALUES (1, 'ann', 10.0, '2024-01-01 00:00:00')",
    "INSERT INTO n_orders VALUES (2, 'bob', 20.0, '2024-01-01 00:00:10')",
    "INSERT INTO n_orders VALUES (3, 'cat', 30.0, '2024-01-01 00:00:20')",
    "INSERT INTO n_orders VALUES (4, 'ann', 5.0, '2024-01-01 00:00:40')",
    "INSERT INTO n_shipments VALUES (1, 'ups', '2024-01-01 00:00:30')",
    "INSERT INTO n_shipments VALUES (2, 'dhl', '2024-01-01 00:05:00')",  # outside WITHIN 1 MINUTE
]
J = "FROM n_orders o JOIN n_shipments s WITHIN 1 MINUTE ON o.oid = s.oid"
CASES = [
    Case(1, "select star stream-stream join", f"CREATE STREAM n_shipped AS SELECT * {J}", "n_shipped",
         [(1, "ann", 10.0, T0, "ups", T30)], columns=["O_OID", "O_USER", "O_AMOUNT", "O_TS", "S_CARRIER", "S_TS"]),
    Case(1, "select star stream-table join", "CREATE STREAM n_named AS SELECT * FROM n_orders o LEFT JOIN n_users u "
         "ON o.user = u.id", "n_named",
         [(1, "ann", 10.0, T0, "Ann"), (2, "bob", 20.0, T10, "Bob"), (3, "cat", 30.0, T20, None), (4, "ann", 5.0, T40, "Ann")],
         columns=["O_OID", "O_USER", "O_AMOUNT", "O_TS", "U_NAME"]),
    Case(1, "colliding qualified names", f"CREATE STREAM n_pairs AS SELECT o.oid, s.oid, s.carrier, o.ts {J}", "n_pairs",
         [(1, 1, "ups", T0)], columns=["O_OID", "S_OID", "CARRIER", "O_TS"]),
    Case(1, "a name given twice", f"CREATE STREAM n_twice AS SELECT o.oid AS o_oid, * {J}",
         refused="column 'O_OID' appears twice in the output"),
    Case(1, "an ambiguous column", f"CREATE STREAM n_vague AS SELECT oid {J}", refused="column 'oid' is ambiguous"),
    Case(2, "KSQL_COL_n in a stream", "CREATE STREAM n_doubled AS SELECT oid, amount * 2, UPPER(user) FROM n_orders",
         "n_doubled", [(1, 20.0, "ANN"), (2, 40.0, "BOB"), (3, 60.0, "CAT"), (4, 10.0, "ANN")],
         columns=["OID", "KSQL_COL_0", "KSQL_COL_1"]),
    Case(2, "KSQL_COL_n in an aggregate", "CREATE TABLE n_per_user AS SELECT user, COUNT(*), SUM(amount) FROM n_orders "
         "GROUP BY user", "n_per_user", [("ann", 2, 15.0), ("bob", 1, 20.0), ("cat", 1, 30.0)],
         columns=["USER", "KSQL_COL_0", "KSQL_COL_1"]),
    Case(2, "KSQL_COL_n in a windowed aggregate", "CREATE TABLE n_per_minute AS SELECT user, COUNT(*) FROM n_orders "
         "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user", "n_per_minute",
         [("ann", 2, M0, M1), ("bob", 1, M0, M1), ("cat", 1, M0, M1)],
         columns=["USER", "KSQL_COL_0", "WINDOWSTART", "WINDOWEND"]),
]
