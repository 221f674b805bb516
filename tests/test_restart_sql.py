"""Windowed aggregations and joins survive kill -9 of their runtime with the same final
output as an uninterrupted run (tests/test_windows.py and tests/test_joins.py)."""
import collections
import os
import signal
from datetime import UTC, datetime

from airflow_provider_streamql.storage.checkpoints import planned_watermark_ms

from .conftest import KILLED_LEASE_TTL
from .support import changelog, stream_rows, wait_until
from .test_windows import CASES, GROUPS, create_window_queries, feed, final_table

JOINS = """
CREATE STREAM orders (oid INT, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM shipments (oid INT, carrier STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM all_orders AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier
  FROM orders o LEFT JOIN shipments s WITHIN 1 MINUTE GRACE PERIOD 0 SECONDS ON o.oid = s.oid;
CREATE STREAM shipped AS SELECT o.oid AS oid, o.amount AS amount, s.carrier AS carrier
  FROM orders o JOIN shipments s WITHIN 1 MINUTE ON o.oid = s.oid;
CREATE TABLE users (id STRING PRIMARY KEY, name STRING);
CREATE STREAM named_clicks AS SELECT c.user AS user, c.n AS n, u.name AS name
  FROM clicks c LEFT JOIN users u ON c.user = u.id;
INSERT INTO users VALUES ('a', 'Ann');
"""


def test_windows_and_joins_survive_kill_9(sqlite_engine, processes):
    engine = sqlite_engine
    names = ["tumbling_final", "tumbling_changes", "hopping_changes", "session_final"]
    window_ids = create_window_queries(engine, names)
    engine.execute(JOINS)
    all_ids = [q["query_id"] for q in engine.queries()]
    runtime = processes(lease_ttl=KILLED_LEASE_TTL)  # killed below
    for query_id in all_ids:
        engine.wait_for_state(query_id, "RUNNING", timeout=120)

    feed(engine, window_ids, GROUPS[:1])
    # Spark persists a watermark advance with the next planned batch; a crash before that
    # forgets it (late records would then be counted). Kill once it is on disk, as it would
    # be in any run that is not killed within the same instant.
    first_max = int(datetime(2024, 1, 1, 0, 1, 10, tzinfo=UTC).timestamp() * 1000)
    for query_id in window_ids:
        checkpoint = engine.query(query_id).checkpoint
        wait_until(lambda: planned_watermark_ms(checkpoint) >= first_max, what="the watermark on disk")
    engine.execute("INSERT INTO orders VALUES (1, 10.0, '2024-01-01 00:00:00');"
                   "INSERT INTO orders VALUES (2, 20.0, '2024-01-01 00:00:10');"
                   "INSERT INTO shipments VALUES (1, 'ups', '2024-01-01 00:00:30');")
    # kill the whole driver while the second group is being taken in
    engine.execute(";".join(f"INSERT INTO clicks VALUES ('{u}', {n}, '2024-01-01 {t}')"
                            for u, n, t in GROUPS[1]))
    os.killpg(runtime.pid, signal.SIGKILL)
    runtime.wait()

    processes()
    for query_id in all_ids:
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    for query_id in window_ids:
        engine.wait_caught_up(query_id, timeout=120)
    feed(engine, window_ids, GROUPS[2:])
    engine.execute("INSERT INTO orders VALUES (9, 90.0, '2024-01-01 00:10:00');"
                   "INSERT INTO shipments VALUES (9, 'fedex', '2024-01-01 00:10:00');")
    for name in names:
        expected = CASES[name][1]
        wait_until(lambda: final_table(engine, name) == expected, timeout=60,
                   what=f"{name} to hold {expected}, has {final_table(engine, name)}")
    for name in ("tumbling_final", "session_final"):  # EMIT FINAL: each window exactly once
        assert len(changelog(engine, name)) == len(CASES[name][1])
    wait_until(lambda: len(stream_rows(engine, "all_orders")) == 3, what="the left join's rows")
    wait_until(lambda: len(stream_rows(engine, "shipped")) == 2, what="the inner join's rows")
    assert stream_rows(engine, "all_orders") == [(1, 10.0, "ups"), (2, 20.0, None), (9, 90.0, "fedex")]
    assert stream_rows(engine, "shipped") == [(1, 10.0, "ups"), (9, 90.0, "fedex")]
    engine.wait_caught_up("CSAS_NAMED_CLICKS_7", timeout=60)
    named = collections.Counter(stream_rows(engine, "named_clicks"))
    assert max(named.values()) == 1 and len(named) == sum(len(g) for g in GROUPS)
