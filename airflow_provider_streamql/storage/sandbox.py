"""The private DuckDB that pull queries and INSERT VALUES run user expressions in: in memory,
no extension ever fetched or loaded, UTC (Spark's session time zone), and, once locked, no
file or network access and no configuration change."""

from __future__ import annotations

import duckdb

#: set when the connection opens, so not even loading can fetch or load an extension
CONFIG = {
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
}
#: before anything runs: text without an offset is UTC, whatever the host's zone is
SESSION = ("SET TimeZone = 'UTC'",)
#: after the trusted setup (loading a pull query's files) and before any user SQL, in this
#: order; the last one freezes them all
LOCKDOWN = ("SET enable_external_access = false", "SET lock_configuration = true")


def connect() -> duckdb.DuckDBPyConnection:
    """A new private connection, not yet locked (the caller may still load files)."""
    con = duckdb.connect(":memory:", config=dict(CONFIG))
    for statement in SESSION:
        con.execute(statement)
    return con


def lock(con: duckdb.DuckDBPyConnection) -> None:
    """No file or network access and no configuration change from now on."""
    for statement in LOCKDOWN:
        con.execute(statement)


def one_select(con: duckdb.DuckDBPyConnection, sql: str) -> bool:
    """``sql`` is exactly one SELECT (generated SQL is checked before it runs)."""
    statements = con.extract_statements(sql)
    return len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT
