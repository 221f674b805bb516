"""Item 3: INSERT VALUES takes expressions over literals, typed literals and CAST, checked
against the target column. The records the inputs write are read back by queries."""

from .harness import Case, minute

M0, M1, M2 = map(minute, range(3))
SOURCES = """
CREATE STREAM iv_events (id INT, name STRING, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
"""
INPUTS = [
    "INSERT INTO iv_events VALUES (1 + 1, UPPER('ann'), CAST('2.5' AS DOUBLE), TIMESTAMP '2024-01-01 00:00:00')",
    "INSERT INTO iv_events (id, name, ts) VALUES (3, CONCAT('bo', 'b'), TIMESTAMP '2024-01-01 00:00:00' + INTERVAL 70 SECONDS)",
    "INSERT INTO iv_events VALUES (4, 'an' || 'n', 10 / 4, TIMESTAMP '2024-01-01T02:00:30+02:00')",
]
CASES = [
    Case(3, "expressions, typed literals, missing columns NULL", "CREATE STREAM iv_all AS SELECT * FROM iv_events",
         "iv_all", [(2, "ANN", 2.5, "2024-01-01T00:00:00.000Z"), (3, "bob", None, "2024-01-01T00:01:10.000Z"),
                    (4, "ann", 2.5, "2024-01-01T00:00:30.000Z")]),
    Case(3, "event time from TIMESTAMP literals", "CREATE TABLE iv_per_minute AS SELECT name, COUNT(*) AS n "
         "FROM iv_events WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY name", "iv_per_minute",
         [("ANN", 1, M0, M1), ("ann", 1, M0, M1), ("bob", 1, M1, M2)]),
    Case(3, "a string that is not a timestamp", "INSERT INTO iv_events (id, ts) VALUES (5, 'yesterday')",
         refused="value 'yesterday' does not fit column 'ts' of type TIMESTAMP"),
    Case(3, "a number into a STRING column", "INSERT INTO iv_events (id, name) VALUES (5, 42)",
         refused="value 42 does not fit column 'name' of type STRING"),
    Case(3, "an INT out of range", "INSERT INTO iv_events (id) VALUES (2147483648)",
         refused="value 2147483648 does not fit column 'id' of type INT"),
    Case(3, "a column reference", "INSERT INTO iv_events (id) VALUES (id + 1)", refused="'id' is a column reference"),
]
