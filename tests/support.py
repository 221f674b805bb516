"""Helpers shared by the tests."""
from __future__ import annotations

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


def insert(engine, stream: str, rows: list[tuple]) -> None:
    """INSERT VALUES each row (one file per record, as a producer would append)."""
    engine.execute(";".join(f"INSERT INTO {stream} VALUES ({', '.join(map(repr, r))})" for r in rows))


def table(engine, name: str) -> dict:
    """A pull query of a table as {first column: rest of the row}."""
    return {row[0]: tuple(row[1:]) for row in engine.execute(f"SELECT * FROM {name}")[0].rows}


def stream_rows(engine, name: str) -> list:
    return sorted(tuple(r) for r in engine.execute(f"SELECT * FROM {name}")[0].rows)


def changelog(engine, name: str) -> list[dict]:
    """Every row a table's query ever emitted, oldest first (not just the latest per key)."""
    from airflow_provider_streamql.storage import topics
    src = engine.catalog.source(name.upper())
    return [row for entry in topics.changelog_entries(src.path)
            for f in topics.entry_files(entry) for row in topics.read_file(f, src.format, src.columns)]


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
