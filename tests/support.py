"""Helpers shared by the tests."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "airflow_provider_streamql.cli"]


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):
    """Poll ``predicate`` until true; a deadline turns a hang into a clear failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def reconcile_passes(engine, runtime_id: str, passes: int = 2, timeout: float = 90.0,
                     also=None) -> None:
    """Return once the runtime ``runtime_id`` has gone through ``passes`` whole reconcile
    passes that began after this call: what a negative check waits for before it asserts
    that nothing happened. A runtime heartbeats as the first step of each pass, so the pass
    that wrote one heartbeat is over once a later one is written. ``also()`` is called at
    each look (to sample something while the passes go by)."""
    since = time.time()
    beats: list[float] = []

    def passed() -> bool:
        if also is not None:
            also()
        row = next((r for r in engine.catalog.runtimes.all() if r["id"] == runtime_id), None)
        assert row is not None and row["stopped_at"] is None, f"runtime {runtime_id} is not running"
        if row["heartbeat_at"] > since and (not beats or row["heartbeat_at"] > beats[-1]):
            beats.append(row["heartbeat_at"])
        return len(beats) > passes
    wait_until(passed, timeout, f"{passes} reconcile passes of runtime {runtime_id}")


def spark_streams(spark, query_id: str) -> list:
    """The streaming queries of ``query_id`` (and its companions, such as its dead-letter
    query) active in a session: a thread runtime's."""
    return [q for q in spark.streams.active if q.name == query_id or q.name.startswith(f"{query_id}__")]


def insert(engine, stream: str, rows: list[tuple]) -> None:
    """INSERT VALUES each row (one file per record, as a producer would append)."""
    engine.execute(";".join(f"INSERT INTO {stream} VALUES ({', '.join(map(repr, r))})" for r in rows))


def table(engine, name: str) -> dict:
    """A pull query of a table as {first column: rest of the row}."""
    return {row[0]: tuple(row[1:]) for row in engine.execute(f"SELECT * FROM {name}")[0].rows}


def stream_rows(engine, name: str) -> list:
    return sorted(tuple(r) for r in engine.execute(f"SELECT * FROM {name}")[0].rows)


#: the mark :func:`changelog` puts on a tombstone (a deleted key): ``{key..., DELETED: True}``
DELETED = "__deleted"


def changelog(engine, name: str) -> list[dict]:
    """Every row a table's query ever emitted, oldest first (not just the latest per key); a
    tombstone is its key columns and ``DELETED: True``."""
    from airflow_provider_streamql.storage import topics
    src = engine.catalog.source(name.upper())
    return [{k: row[k] for k in src.key_columns} | {DELETED: True} if deleted else row
            for row, deleted in topics.read_changelog(src.path, src.format, src.columns)]


def hhmmss(value) -> str:
    """A timestamp as Spark wrote it ('2024-01-01T00:01:00.000Z') -> '00:01:00' (dates in
    the tests are 2024-01-01 unless shown)."""
    text = str(value).replace("T", " ").rstrip("Z")
    date, _, clock = text.partition(" ")
    clock = clock[:8]
    return clock if date == "2024-01-01" else f"{date} {clock}"


def cli(env, *args, timeout=120):
    return subprocess.run(CLI + list(args), env=env, capture_output=True, text=True, timeout=timeout)


def sigterm(proc) -> int:
    proc.send_signal(signal.SIGTERM)  # the driver's Python process, as a supervisor would
    return proc.wait(timeout=90)


def snapshot(*roots) -> dict:
    """Every file under ``roots`` with its size and modification time."""
    seen = {}
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                st = os.stat(os.path.join(folder, name))
                seen[os.path.join(folder, name)] = (st.st_size, st.st_mtime_ns)
    return seen
