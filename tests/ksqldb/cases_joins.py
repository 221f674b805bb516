"""Item 8: RIGHT and FULL OUTER joins between streams, several joins in one query (to TABLEs),
an aggregation over a join, and the joins Spark cannot run (refused with the reason).

Outer joins and EMIT FINAL windows state GRACE PERIOD, as ksqlDB users do for exact output:
without it ksqlDB keeps a join's window open 24 hours and emits an unmatched row at once
(then the match too, if one comes), where Spark emits a row once, when its window closes.
The last order and shipment (09, at 00:10) move both streams' time past every other window.
"""

from .harness import Case, minute

M0, M1, M5, M6 = map(minute, (0, 1, 5, 6))
SOURCES = """
CREATE STREAM j_orders (oid INT, user STRING, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM j_shipments (oid INT, carrier STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM j_payments (oid INT, method STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE j_users (id STRING PRIMARY KEY, name STRING);
CREATE TABLE j_tiers (id STRING PRIMARY KEY, tier STRING);
"""
INPUTS = [
    "INSERT INTO j_users VALUES ('ann', 'Ann')",
    "INSERT INTO j_users VALUES ('bob', 'Bob')",
    "INSERT INTO j_tiers VALUES ('ann', 'gold')",
    "INSERT INTO j_orders VALUES (1, 'ann', 10.0, '2024-01-01 00:00:00')",
    "INSERT INTO j_orders VALUES (2, 'bob', 20.0, '2024-01-01 00:00:10')",
    "INSERT INTO j_orders VALUES (3, 'ann', 30.0, '2024-01-01 00:00:20')",
    "INSERT INTO j_orders VALUES (9, 'cy', 90.0, '2024-01-01 00:10:00')",
    "INSERT INTO j_shipments VALUES (1, 'ups', '2024-01-01 00:00:30')",
    "INSERT INTO j_shipments VALUES (1, 'dhl', '2024-01-01 00:00:50')",  # order 1 ships in two parts
    "INSERT INTO j_shipments VALUES (2, 'dhl', '2024-01-01 00:05:00')",  # outside WITHIN 1 MINUTE
    "INSERT INTO j_shipments VALUES (4, 'fedex', '2024-01-01 00:00:40')",  # no order 4
    "INSERT INTO j_shipments VALUES (9, 'post', '2024-01-01 00:10:00')",
]
W = "WITHIN 1 MINUTE GRACE PERIOD 1 MINUTE"
OS = f"FROM j_orders o {{}} JOIN j_shipments s {W} ON o.oid = s.oid"
CASES = [
    Case(8, "inner", f"CREATE STREAM j_inner AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier "
         f"{OS.format('')}", "j_inner", [(1, 10.0, "ups"), (1, 10.0, "dhl"), (9, 90.0, "post")]),
    Case(8, "left", f"CREATE STREAM j_left AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier "
         f"{OS.format('LEFT')}", "j_left",
         [(1, 10.0, "ups"), (1, 10.0, "dhl"), (2, 20.0, None), (3, 30.0, None), (9, 90.0, "post")]),
    Case(8, "right", f"CREATE STREAM j_right AS SELECT s.oid AS oid, o.amount AS amount, s.carrier AS carrier "
         f"{OS.format('RIGHT')}", "j_right",
         [(1, 10.0, "ups"), (1, 10.0, "dhl"), (2, None, "dhl"), (4, None, "fedex"), (9, 90.0, "post")]),
    Case(8, "full outer", f"CREATE STREAM j_full AS SELECT o.oid AS o_oid, s.oid AS s_oid, o.amount AS amount, "
         f"s.carrier AS carrier {OS.format('FULL OUTER')}", "j_full",
         [(1, 1, 10.0, "ups"), (1, 1, 10.0, "dhl"), (2, None, 20.0, None), (3, None, 30.0, None),
          (None, 2, None, "dhl"), (None, 4, None, "fedex"), (9, 9, 90.0, "post")]),
    Case(8, "two table joins", "CREATE STREAM j_named AS SELECT o.oid AS oid, u.name AS name, t.tier AS tier "
         "FROM j_orders o JOIN j_users u ON o.user = u.id LEFT JOIN j_tiers t ON o.user = t.id", "j_named",
         [(1, "Ann", "gold"), (2, "Bob", None), (3, "Ann", "gold")]),
    Case(8, "count over an inner join", f"CREATE TABLE j_parts AS SELECT o.oid AS oid, COUNT(*) AS parts "
         f"{OS.format('')} GROUP BY o.oid", "j_parts", [(1, 2), (9, 1)]),
    # a shipment joins the orders of the minute before it: the shipment's time is the join's
    Case(8, "window over a left join", "CREATE TABLE j_per_minute AS SELECT s.carrier AS carrier, COUNT(*) AS n, "
         "COUNT(o.oid) AS matched FROM j_shipments s LEFT JOIN j_orders o WITHIN (1 MINUTE, 0 SECONDS) "
         "GRACE PERIOD 1 MINUTE ON s.oid = o.oid WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 1 MINUTE) "
         "GROUP BY s.carrier EMIT FINAL", "j_per_minute",
         [("ups", 1, 1, M0, M1), ("dhl", 1, 1, M0, M1), ("fedex", 1, 0, M0, M1), ("dhl", 1, 0, M5, M6)]),
    Case(8, "three streams", f"CREATE STREAM j_three AS SELECT o.oid AS oid {OS.format('')} "
         f"JOIN j_payments p WITHIN 1 MINUTE ON o.oid = p.oid", refused="a query joins at most two streams"),
    Case(8, "streams and tables", f"CREATE STREAM j_mixed AS SELECT o.oid AS oid, u.name AS name {OS.format('')} "
         f"JOIN j_users u ON o.user = u.id", refused="joins either another stream or tables, not both"),
    Case(8, "right join of a table", "CREATE STREAM j_rt AS SELECT u.id AS id FROM j_orders o RIGHT JOIN j_users u "
         "ON o.user = u.id", refused="RIGHT JOIN with TABLE J_USERS is not supported"),
    Case(8, "count over a left join", f"CREATE TABLE j_lc AS SELECT o.oid AS oid, COUNT(*) AS n "
         f"{OS.format('LEFT')} GROUP BY o.oid", refused="needs WINDOW ... EMIT FINAL"),
    Case(8, "count over a table join", "CREATE TABLE j_tc AS SELECT u.name AS name, COUNT(*) AS n "
         "FROM j_orders o JOIN j_users u ON o.user = u.id GROUP BY u.name",
         refused="aggregating the result of a stream-table join is not supported"),
    Case(8, "window by a later join time", f"CREATE TABLE j_wl AS SELECT o.user AS user, COUNT(*) AS n "
         f"{OS.format('')} WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY o.user",
         refused="so J_SHIPMENTS must never be later than J_ORDERS"),
    # ksqlDB's join criteria (io.confluent.ksql.analyzer.Analyzer, planner.LogicalPlanner): one
    # equality between the two sides, and a stream-table join on the table's primary key
    Case(8, "two conditions", "CREATE STREAM j_two AS SELECT o.oid AS oid FROM j_orders o JOIN j_shipments s "
         f"{W} ON o.oid = s.oid AND o.user = s.carrier",
         refused="joins on multiple conditions are not yet supported (ksqlDB's words). Got o.oid = s.oid AND"),
    Case(8, "not an equality", "CREATE STREAM j_lt AS SELECT o.oid AS oid FROM j_orders o JOIN j_shipments s "
         f"{W} ON o.oid < s.oid", refused="Only equality join criteria is supported"),
    Case(8, "an OR", "CREATE STREAM j_or AS SELECT o.oid AS oid FROM j_orders o JOIN j_users u "
         "ON o.user = u.id OR o.user = u.name", refused="Unsupported join expression: o.user = u.id OR"),
    Case(8, "a filter in ON", "CREATE STREAM j_on AS SELECT o.oid AS oid FROM j_orders o JOIN j_users u "
         "ON o.user = u.id AND u.name = 'Ann'", refused="each side of = reads one side of the join"),
    Case(8, "stream-table not on the key", "CREATE STREAM j_nk AS SELECT o.oid AS oid FROM j_orders o JOIN j_users u "
         "ON o.user = u.name", refused="stream-table joins require to join on the table's primary key"),
    Case(8, "stream-table on the key, unqualified", "CREATE STREAM j_uq AS SELECT oid, name FROM j_orders "
         "JOIN j_users ON user = id", "j_uq", [(1, "Ann"), (2, "Bob"), (3, "Ann")]),
]
