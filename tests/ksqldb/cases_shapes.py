"""Items 9 and 10: null and missing keys; STRUCT, ARRAY, MAP and BYTES values, `->` and
subscripts, DELIMITED values, PARTITION BY, types Spark cannot hold."""

from .harness import Case

SOURCES = """
CREATE STREAM sh_orders (id INT KEY, customer STRUCT<name STRING, address STRUCT<city STRING, zip STRING>>,
                         items ARRAY<STRING>, prices MAP<STRING, DOUBLE>, payload BYTES);
CREATE STREAM sh_clicks (user STRING KEY, page STRING, ms INT);
CREATE TABLE sh_users (user STRING PRIMARY KEY, region STRING);
CREATE STREAM sh_csv (id INT KEY, name STRING, amount DOUBLE) WITH (value_format='DELIMITED');
CREATE STREAM sh_pipe (id INT KEY, name STRING) WITH (value_format='DELIMITED', value_delimiter='|');
"""
RECORDS = {
    "sh_orders": [
        '{"id": 1, "customer": {"name": "ann", "address": {"city": "Oslo", "zip": "0150"}}, "items": ["a", "b", "c"],'
        ' "prices": {"a": 1.5, "b": 2.0}, "payload": "aGVsbG8="}',
        '{"id": 2, "customer": {"name": "bob", "address": null}, "items": [], "prices": {}, "payload": null}',
        '{"id": 3}',
    ],
    # a record without its KEY and one with a null KEY: valid stream records (as in ksqlDB)
    "sh_clicks": ['{"user": "ann", "page": "home", "ms": 120}', '{"page": "cart", "ms": 300}',
                  '{"user": null, "page": "buy", "ms": 900}'],
    "sh_csv": ["1,ann,1.5", '2,"b,ob",2.25', "3,,"],  # DELIMITED: no header line
}
INPUTS = [
    "INSERT INTO sh_users VALUES ('ann', 'eu')",
    "INSERT INTO sh_pipe VALUES (1, 'x|y')",
    "INSERT INTO sh_pipe VALUES (2, 'z')",
]
CASES = [
    # -- 9. null and missing keys ------------------------------------------------------------
    Case(9, "null keys flow", "CREATE STREAM sh_all AS SELECT user, page FROM sh_clicks",
         "sh_all", [("ann", "home"), (None, "cart"), (None, "buy")]),
    Case(9, "null keys filter", "CREATE STREAM sh_slow AS SELECT user, ms FROM sh_clicks WHERE ms > 200",
         "sh_slow", [(None, 300), (None, 900)]),
    Case(9, "null key never joins", "CREATE STREAM sh_regions AS SELECT c.user AS user, c.page AS page, "
         "u.region AS region FROM sh_clicks c JOIN sh_users u ON c.user = u.user",
         "sh_regions", [("ann", "home", "eu")]),
    # -- 10. STRUCT, ARRAY, MAP, BYTES -------------------------------------------------------
    Case(10, "struct fields", "CREATE STREAM sh_cities AS SELECT id, customer->name, customer->address->city "
         "FROM sh_orders", "sh_cities", [(1, "ann", "Oslo"), (2, "bob", None), (3, None, None)],
         columns=["ID", "NAME", "CITY"]),
    Case(10, "struct filter", "CREATE STREAM sh_oslo AS SELECT id FROM sh_orders "
         "WHERE customer->address->city = 'Oslo'", "sh_oslo", [(1,)]),
    Case(10, "whole struct", "CREATE STREAM sh_customers AS SELECT id, customer FROM sh_orders", "sh_customers",
         [(1, {"name": "ann", "address": {"city": "Oslo", "zip": "0150"}}),
          (2, {"name": "bob", "address": None}), (3, None)]),
    Case(10, "array index from 1", "CREATE STREAM sh_items AS SELECT id, items[1] AS first, items[-1] AS last, "
         "items[5] AS missing FROM sh_orders", "sh_items",
         [(1, "a", "c", None), (2, None, None, None), (3, None, None, None)]),
    Case(10, "map lookup", "CREATE STREAM sh_prices AS SELECT id, prices['a'] AS a, prices['z'] AS z FROM sh_orders",
         "sh_prices", [(1, 1.5, None), (2, None, None), (3, None, None)]),
    Case(10, "bytes as base64", "CREATE STREAM sh_payloads AS SELECT id, payload FROM sh_orders", "sh_payloads",
         [(1, "aGVsbG8="), (2, None), (3, None)]),
    Case(10, "time", "CREATE STREAM sh_times (id INT KEY, t TIME)", refused="does not support the TIME type"),
    # -- 10. DELIMITED -----------------------------------------------------------------------
    Case(10, "delimited source", "CREATE STREAM sh_csv_big AS SELECT id, name FROM sh_csv WHERE amount > 1",
         "sh_csv_big", [(1, "ann"), (2, "b,ob")]),
    Case(10, "delimited sink", "CREATE STREAM sh_csv_out WITH (value_format='DELIMITED', value_delimiter='|') AS "
         "SELECT id, name FROM sh_csv", "sh_csv_out", [(1, "ann"), (2, "b,ob"), (3, None)]),
    Case(10, "value_delimiter", "CREATE STREAM sh_pipe_copy AS SELECT * FROM sh_pipe", "sh_pipe_copy",
         [(1, "x|y"), (2, "z")]),
    Case(10, "delimited struct", "CREATE STREAM sh_bad (id INT, s STRUCT<a INT>) WITH (value_format='DELIMITED')",
         refused="DELIMITED values cannot hold column 's'"),
    # -- 10. PARTITION BY ----------------------------------------------------------------------
    Case(10, "partition by", "CREATE STREAM sh_by_page AS SELECT * FROM sh_clicks PARTITION BY page", "sh_by_page",
         [("home", "ann", 120), ("cart", None, 300), ("buy", None, 900)], columns=["PAGE", "USER", "MS"]),
    Case(10, "partition by a field", "CREATE STREAM sh_by_city AS SELECT id, customer->address->city AS city "
         "FROM sh_orders PARTITION BY city", "sh_by_city", [("Oslo", 1), (None, 2), (None, 3)],
         columns=["CITY", "ID"]),
    Case(10, "partition a table", "CREATE TABLE sh_t AS SELECT page, COUNT(*) AS n FROM sh_clicks GROUP BY page "
         "PARTITION BY page", refused="a TABLE is keyed by its GROUP BY"),
]
