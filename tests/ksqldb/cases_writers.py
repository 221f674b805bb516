"""Item 5: several queries writing one stream (ksqlDB's INSERT INTO ... SELECT), merged
through a declared stream or into the output of a CREATE STREAM AS SELECT (written as whole
files, so its readers see every writer's rows)."""

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
    # ksqlDB's usual merge: INSERT INTO the output of a CREATE STREAM AS SELECT
    Case(5, "csas and insert into it", "CREATE STREAM w_merged AS SELECT user, page AS what, ts FROM w_clicks; "
         "INSERT INTO w_merged SELECT user, screen AS what, ts FROM w_taps", "w_merged",
         [("ann", "home", "2024-01-01T00:00:01.000Z"), ("bob", "cart", "2024-01-01T00:00:02.000Z"),
          ("ann", "menu", "2024-01-01T00:00:03.000Z")]),
    Case(5, "a reader of the merged csas output",
         "CREATE STREAM w_merged_ann AS SELECT what FROM w_merged WHERE user = 'ann'", "w_merged_ann",
         [("home",), ("menu",)]),
    Case(5, "into a query's output, other columns", "INSERT INTO w_merged SELECT user, ts FROM w_taps",
         refused="do not match W_MERGED's"),
]
