"""What already ran before issue 15: filters, projections, CASE, BETWEEN, aggregates, windows."""

from .harness import Case, minute

M0, M1, M2 = map(minute, range(3))
SOURCES = """
CREATE STREAM b_pageviews (user STRING, page STRING, ms INT, ts TIMESTAMP) WITH (timestamp='ts');
"""
INPUTS = [
    "INSERT INTO b_pageviews VALUES ('ann', 'home', 120, '2024-01-01 00:00:01')",
    "INSERT INTO b_pageviews VALUES ('bob', 'cart', 900, '2024-01-01 00:00:02')",
    "INSERT INTO b_pageviews VALUES ('ann', 'cart', 300, '2024-01-01 00:01:05')",
]
CASES = [
    Case(0, "filter", "CREATE STREAM b_slow AS SELECT user, page FROM b_pageviews WHERE ms > 200",
         "b_slow", [("bob", "cart"), ("ann", "cart")]),
    Case(0, "between", "CREATE STREAM b_mid AS SELECT user FROM b_pageviews WHERE ms BETWEEN 100 AND 300",
         "b_mid", [("ann",), ("ann",)]),
    Case(0, "case", "CREATE STREAM b_speed AS SELECT user, CASE WHEN ms < 500 THEN 'fast' ELSE 'slow' END AS speed "
         "FROM b_pageviews", "b_speed", [("ann", "fast"), ("bob", "slow"), ("ann", "fast")]),
    Case(0, "count by key", "CREATE TABLE b_views AS SELECT user, COUNT(*) AS n FROM b_pageviews GROUP BY user",
         "b_views", [("ann", 2), ("bob", 1)]),
    Case(0, "tumbling window", "CREATE TABLE b_per_minute AS SELECT page, COUNT(*) AS n FROM b_pageviews "
         "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY page", "b_per_minute",
         [("home", 1, M0, M1), ("cart", 1, M0, M1), ("cart", 1, M1, M2)]),
]
