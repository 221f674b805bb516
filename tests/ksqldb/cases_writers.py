"""Item 5: several queries writing one stream (ksqlDB's INSERT INTO ... SELECT), merged
through a declared stream; INSERT INTO the output of a CREATE STREAM AS SELECT is refused
(its readers see only the files its own query logs)."""

from .harness import Case

SOURCES = """
CREATE STREAM w_clicks (user STRING, page STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM w_taps (user STRING, screen STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM w_events (user STRING, what STRING, ts TIMESTAMP) WITH (timestamp='ts');
"""
INPUTS = [
    "INSERT INTO w_clicks VALUES ('ann', 'home', '2024-01-01 00:00:01')",
    "INSERT INTO w_clicks VALUES ('bob', 'cart', '2024-01-01 00:00:02')",
    "INSERT INTO w_taps VALUES ('ann', 'menu', '2024-01-01 00:00:03')",
]
CASES = [
    Case(5, "two writers", "INSERT INTO w_events SELECT user, page AS what, ts FROM w_clicks; "
         "INSERT INTO w_events SELECT user, screen AS what, ts FROM w_taps", "w_events",
         [("ann", "home", "2024-01-01T00:00:01.000Z"), ("bob", "cart", "2024-01-01T00:00:02.000Z"),
          ("ann", "menu", "2024-01-01T00:00:03.000Z")]),
    Case(5, "a reader of the merged stream", "CREATE STREAM w_ann AS SELECT what FROM w_events WHERE user = 'ann'",
         "w_ann", [("home",), ("menu",)]),
    Case(5, "into a query's output", "INSERT INTO w_ann SELECT screen AS what FROM w_taps",
         refused="W_ANN is the output of query CSAS_W_ANN_3, a Spark file sink whose readers see only"),
]
