"""Queries over TABLE sources (issue 15, item 4): tombstones in a table's changelog, honoured
by every reader, and table-to-table queries (a changelog in, a changelog out) that survive a
restart of the runtime with no row lost or doubled.

The ksqlDB-compatibility cases of the same capability are in tests/ksqldb/cases_tables.py.
"""
from __future__ import annotations

import pytest

from airflow_provider_streamql.storage import topics

from .support import DELETED, changelog, table

FORMATS = ["JSON", "CSV", "PARQUET"]


def write_changelog(engine, name: str, entries: list[tuple[str, list[dict], list[dict]]]) -> None:
    """Entries written straight into a table's topic as a query's writer does: a directory per
    entry holding its rows and, in a tombstone file, the keys it deletes."""
    src = engine.catalog.source(name.upper())
    for entry, rows, deleted in entries:
        directory = f"{src.path}/{entry}"
        topics.append(directory, src.format, src.columns, rows, name="part-00000")
        if deleted:
            full = [{c.name: d.get(c.name) for c in src.columns} for d in deleted]
            topics.append(directory, src.format, src.columns, full, name="deleted" + topics.TOMBSTONES)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_key_whose_latest_change_is_a_tombstone_is_gone(engine, fmt):
    engine.execute(f"CREATE TABLE t (k STRING PRIMARY KEY, r STRING PRIMARY KEY, v INT) WITH (value_format='{fmt}')")
    row = lambda k, r, v: {"k": k, "r": r, "v": v}
    write_changelog(engine, "t", [
        ("v0001-b000000000000", [row("a", "x", 1), row("a", "y", 2), row("b", "x", 3)], []),
        ("v0001-b000000000001", [row("c", "x", 4)], [{"k": "a", "r": "x"}, {"k": "b", "r": "x"}]),
        ("v0001-b000000000002", [row("b", "x", 5)], [{"k": "zz", "r": "x"}]),  # deleted again; a key never there
    ])
    expected = [["a", "y", 2], ["b", "x", 5], ["c", "x", 4]]
    assert sorted(engine.execute("SELECT * FROM t")[0].rows) == expected
    assert engine.execute("SELECT v FROM t WHERE k = 'a'")[0].rows == [[2]]
    src = engine.catalog.source("T")
    assert sorted(map(lambda r: [r["k"], r["r"], r["v"]], topics.read_table(src.path, fmt, src.columns, ["k", "r"]))) \
        == expected
    assert changelog(engine, "t")[3:6] == [{"k": "a", "r": "x", DELETED: True}, {"k": "b", "r": "x", DELETED: True},
                                           row("c", "x", 4)]


def test_the_tombstone_file_name():
    assert topics.is_tombstones("/t/v0001-b000000000001/deleted.tombstones.json")
    assert topics.is_tombstones("i0001-abc.tombstones.csv")
    assert not topics.is_tombstones("/t/v0001/part-00000-1234-c000.snappy.parquet")
    assert not topics.is_tombstones("/t/x.tombstones/part-0.json")  # a directory's name says nothing
    assert not topics.is_tombstones("tombstones.json")


def test_a_pull_query_after_every_key_is_deleted(engine):
    engine.execute("CREATE TABLE t (k STRING PRIMARY KEY, v INT)")
    write_changelog(engine, "t", [("v0001-b000000000000", [{"k": "a", "v": 1}], []),
                                  ("v0001-b000000000001", [], [{"k": "a"}])])
    assert engine.execute("SELECT * FROM t")[0].rows == []
    assert engine.execute("SELECT COUNT(*) AS n FROM t")[0].rows == [[0]]
    assert table(engine, "t") == {}


QUERIES = """
CREATE TABLE users (id STRING PRIMARY KEY, name STRING, region STRING, age INT);
CREATE TABLE regions (code STRING PRIMARY KEY, label STRING);
CREATE TABLE eu AS SELECT id, name FROM users WHERE region = 'eu';
CREATE TABLE per_region AS SELECT region, COUNT(*) AS n, SUM(age) AS total FROM users GROUP BY region;
CREATE TABLE labeled AS SELECT u.id AS id, r.label AS label FROM users u LEFT JOIN regions r ON u.region = r.code;
"""
IDS = ["CTAS_EU_1", "CTAS_PER_REGION_2", "CTAS_LABELED_3"]


def caught_up(engine) -> None:
    for query_id in IDS:
        engine.wait_caught_up(query_id, timeout=120)


def multiset(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows)


@pytest.mark.slow
def test_changes_of_a_table_update_and_delete_across_a_restart(sqlite_engine, runtimes):
    """Each change of a table updates the queries over it, an update that no longer passes
    the filter (or empties a group) deletes the key; changes made while the runtime is
    stopped are taken in once it is back, none lost or doubled."""
    engine = sqlite_engine
    engine.execute(QUERIES)
    runtime = runtimes.start(engine)
    for query_id in IDS:
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    engine.execute("INSERT INTO users VALUES ('a', 'ann', 'eu', 30); INSERT INTO regions VALUES ('eu', 'Europe')")
    caught_up(engine)
    assert table(engine, "eu") == {"a": ("ann",)}
    assert table(engine, "per_region") == {"eu": (1, 30)}
    engine.execute("INSERT INTO users VALUES ('a', 'ann', 'us', 31)")  # leaves 'eu' and its group
    caught_up(engine)
    assert table(engine, "eu") == {}
    assert table(engine, "per_region") == {"us": (1, 31)}
    assert table(engine, "labeled") == {"a": (None,)}

    runtimes.stop(runtime)
    engine.execute("INSERT INTO users VALUES ('b', 'bob', 'eu', 20); INSERT INTO users VALUES ('a', 'ann', 'eu', 32);"
                   "INSERT INTO regions VALUES ('us', 'United States')")
    runtimes.start(engine)
    caught_up(engine)
    assert table(engine, "eu") == {"a": ("ann",), "b": ("bob",)}
    assert table(engine, "per_region") == {"eu": (2, 52)}
    assert table(engine, "labeled") == {"a": ("Europe",), "b": ("Europe",)}
    assert engine.execute("SELECT COUNT(*) AS n FROM eu WHERE name = 'ann'")[0].rows == [[1]]
    # every change once: ann in, ann deleted, then bob and ann again (in one batch or two)
    assert multiset(changelog(engine, "eu")) == multiset([
        {"id": "a", "name": "ann"}, {"id": "a", DELETED: True}, {"id": "b", "name": "bob"}, {"id": "a", "name": "ann"}])
    emitted = changelog(engine, "per_region")
    assert {"region": "eu", DELETED: True} in emitted and {"region": "us", DELETED: True} in emitted
