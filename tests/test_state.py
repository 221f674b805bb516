"""DESCRIBE <query> STATE: the state a query holds, read with Spark's State Data Source from
its checkpoint while it runs, and the operators EXPLAIN shows from the checkpoint's files."""
import json

import pytest

from airflow_provider_streamql.errors import NotFoundError

from .support import insert

PIPELINE = """
CREATE STREAM clicks (user STRING, n INT, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM orders (user STRING, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE per_minute AS SELECT user, COUNT(*) AS c FROM clicks WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user;
CREATE STREAM paid AS SELECT c.user AS user, amount FROM clicks c JOIN orders o WITHIN 1 MINUTE ON c.user = o.user;
CREATE STREAM loud AS SELECT user, n FROM clicks WHERE n > 5;
"""
IDS = ["CTAS_PER_MINUTE_1", "CSAS_PAID_2", "CSAS_LOUD_3"]


def test_describe_state_shows_a_windowed_count_and_a_join_buffer(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    insert(engine, "clicks", [("ann", 1, "2024-01-01 00:00:05"), ("ann", 2, "2024-01-01 00:00:50"),
                              ("bob", 9, "2024-01-01 00:01:10")])
    insert(engine, "orders", [("ann", 3.5, "2024-01-01 00:00:30")])
    for query_id in IDS:
        engine.wait_caught_up(query_id, timeout=60)

    counted = engine.execute("DESCRIBE CTAS_PER_MINUTE_1 STATE")[0]
    assert "operator 0 stateStoreSave, store default" in counted.message
    assert "key (user STRING, window STRUCT<start: TIMESTAMP, end: TIMESTAMP>); value (count BIGINT)" \
        in counted.message, counted.message
    held = sorted((json.loads(key)["user"], json.loads(key)["window"]["start"], json.loads(value)["count"])
                  for _op, _store, _part, key, value in counted.rows)
    assert held == [("ann", "2024-01-01 00:00:00", 2), ("bob", "2024-01-01 00:01:00", 1)]

    joined = engine.execute("DESCRIBE CSAS_PAID_2 STATE LIMIT 1")[0]
    assert "symmetricHashJoin, store left-keyWithIndexToValue" in joined.message
    assert sorted(store for _op, store, *_ in joined.rows) == ["left", "right"]  # LIMIT 1 per side

    assert engine.execute("DESCRIBE CSAS_LOUD_3 STATE")[0].message == "CSAS_LOUD_3 keeps no state"
    explained = dict(engine.execute("EXPLAIN CTAS_PER_MINUTE_1")[0].rows)
    assert explained["state_store[0]"].startswith("operator 0 stateStoreSave, store default: 4 partitions, batches ")


def test_describe_state_needs_a_query(sqlite_engine):
    sqlite_engine.execute(PIPELINE)
    with pytest.raises(NotFoundError, match="no query 'CLICKS': DESCRIBE ... STATE takes a query ID"):
        sqlite_engine.execute("DESCRIBE clicks STATE")
    before_any_batch = sqlite_engine.execute("DESCRIBE CTAS_PER_MINUTE_1 STATE")[0]
    assert before_any_batch.message == "CTAS_PER_MINUTE_1 has no batch yet" and before_any_batch.rows == []
