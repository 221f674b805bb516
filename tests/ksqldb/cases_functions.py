"""Items 6 and 7: types of functions, ksqlDB's functions and pseudo-columns, with the output
ksqlDB gives for the same records (ROWTIME is BIGINT epoch milliseconds; 2024-01-01T00:00:00Z
is 1704067200000)."""

from .harness import Case, minute

M0, M1, M2 = map(minute, range(3))
SOURCES = """
CREATE STREAM fn_views (user STRING KEY, page STRING, ms INT, ts TIMESTAMP) WITH (timestamp='ts');
"""
INPUTS = [
    "INSERT INTO fn_views VALUES ('ann', 'Home.Page', 120, '2024-01-01 00:00:01')",
    "INSERT INTO fn_views VALUES ('bob', 'cart', 900, '2024-01-01 00:00:02')",
    "INSERT INTO fn_views VALUES ('ann', 'cart 2', 300, '2024-01-01 00:01:05')",
]
CASES = [
    Case(7, "lcase ucase len", "CREATE STREAM fn_case AS SELECT UCASE(user) AS u, LCASE(page) AS p, LEN(page) AS l "
         "FROM fn_views", "fn_case", [("ANN", "home.page", 9), ("BOB", "cart", 4), ("ANN", "cart 2", 6)]),
    Case(7, "rowtime", "CREATE STREAM fn_rowtime AS SELECT user, ROWTIME FROM fn_views WHERE ROWTIME > 1704067201000",
         "fn_rowtime", [("bob", 1704067202000), ("ann", 1704067265000)], columns=["user", "ROWTIME"]),
    Case(7, "rowkey", "CREATE STREAM fn_rowkey AS SELECT ROWKEY AS k, ms FROM fn_views WHERE ms > 200",
         "fn_rowkey", [("bob", 900), ("ann", 300)]),
    Case(7, "split by text", "CREATE STREAM fn_split AS SELECT user, SPLIT(page, '.') AS parts FROM fn_views "
         "WHERE user = 'ann'", "fn_split", [("ann", ["Home", "Page"]), ("ann", ["cart 2"])]),
    Case(7, "format timestamps", "CREATE STREAM fn_times AS SELECT user, FORMAT_TIMESTAMP(ts, "
         "'yyyy-MM-dd''T''HH:mm:ss') AS t, TIMESTAMPTOSTRING(ROWTIME, 'HH:mm', 'Europe/Paris') AS local "
         "FROM fn_views WHERE ms < 200", "fn_times", [("ann", "2024-01-01T00:00:01", "01:00")]),
    Case(7, "parse timestamps", "CREATE STREAM fn_parsed AS SELECT user, STRINGTOTIMESTAMP(page, 'yyyy') AS bad, "
         "PARSE_TIMESTAMP('2024-01-01 01:00', 'yyyy-MM-dd HH:mm', 'Europe/Paris') AS utc FROM fn_views "
         "WHERE ms < 200", "fn_parsed", [("ann", None, "2024-01-01T00:00:00.000Z")]),
    Case(7, "mask", "CREATE STREAM fn_mask AS SELECT MASK(page) AS m, INSTR(page, 'a') AS a FROM fn_views",
         "fn_mask", [("Xxxx-Xxxx", 7), ("xxxx", 2), ("xxxx-n", 2)]),
    Case(7, "topk and count()", "CREATE TABLE fn_top AS SELECT user, TOPK(ms, 2) AS top2, COUNT() AS n "
         "FROM fn_views GROUP BY user", "fn_top", [("ann", [300, 120], 2), ("bob", [900], 1)]),
    Case(7, "windowstart in having", "CREATE TABLE fn_win AS SELECT user, COUNT(*) AS n, WINDOWSTART FROM fn_views "
         "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user HAVING WINDOWSTART >= '2024-01-01 00:01:00'",
         "fn_win", [("ann", 1, M1, M2)]),
    Case(7, "latest by offset", "CREATE TABLE fn_latest AS SELECT user, LATEST_BY_OFFSET(page) AS p FROM fn_views "
         "GROUP BY user", refused="LATEST_BY_OFFSET is not supported"),
]
