"""Issue 28, section 4: one cheap statement must not take the house down. Reads never hold
the catalog's write lock, on SQLite and PostgreSQL."""
from __future__ import annotations

import threading

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StreamQLError
from airflow_provider_streamql.storage import sandbox, topics

SETUP = """
CREATE STREAM s (id INT, name STRING, ts TIMESTAMP) WITH (timestamp='ts');
"""
ROWS = [{"id": i, "name": f"name-{i:03d}", "ts": f"2024-01-01 00:00:{i % 60:02d}"} for i in range(100)]
CROSS = " CROSS JOIN ".join(f"s AS s{i}" for i in range(8))  # 100 rows: 10^16 combinations, ~100 days


@pytest.fixture
def filled(engine):
    engine.execute(SETUP)
    src = engine.catalog.source("S")
    topics.append(src.path, src.format, src.columns, ROWS)  # one file, as a producer writes it
    return engine


@pytest.mark.parametrize("script", [
    "SELECT COUNT(*) AS n FROM {cross}",  # a script of reads: planned in a read transaction
    "INSERT INTO s (id) VALUES (1000); SELECT COUNT(*) AS n FROM {cross}",  # reads after the commit
])
def test_a_slow_pull_query_never_holds_the_catalogs_write_lock(filled, home, monkeypatch, script):
    """While a pull query runs (a cross join of 10^16 rows, cancelled at the end), another
    engine writes to the catalog: the database is not locked, every statement is not waiting."""
    running, connections = threading.Event(), []
    lock = sandbox.lock

    def lock_and_tell(con):  # the pull query's user SELECT runs right after the lockdown
        lock(con)
        connections.append(con)
        running.set()

    monkeypatch.setattr(sandbox, "lock", lock_and_tell)
    failure: list[BaseException] = []

    def pull():
        try:
            filled.execute(script.format(cross=CROSS))
        except StreamQLError as e:
            failure.append(e)

    reader = threading.Thread(target=pull)
    reader.start()
    other = Engine(filled.catalog.url, home=home, issuer="other")
    try:
        assert running.wait(60), "the pull query did not start"
        writer = threading.Thread(target=other.execute, args=("CREATE STREAM written_meanwhile (id INT)",))
        writer.start()
        writer.join(60)
        assert not writer.is_alive(), "the write waited for the pull query"
        assert reader.is_alive(), "the pull query ended before the write"
        assert other.catalog.source("WRITTEN_MEANWHILE") is not None
    finally:
        connections[-1].interrupt() if connections else None
        reader.join(60)
        other.close()
    assert failure and "INTERRUPT" in str(failure[0])
