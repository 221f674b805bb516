"""Queries over TABLE sources (issue 15, item 4): tombstones in a table's changelog, honoured
by every reader, and table-to-table queries (a changelog in, a changelog out) that survive a
restart of the runtime with no row lost or doubled.

The ksqlDB-compatibility cases of the same capability are in tests/ksqldb/cases_tables.py.
"""
from __future__ import annotations

import pytest

from airflow_provider_streamql.storage import topics

from .support import DELETED, changelog, table, wait_until

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
