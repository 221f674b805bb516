"""Migration 11: one spelling per column, and only types of the closed table.

Before it, a query wrote each output column under its SELECT's spelling (``SELECT id`` over
a column declared ``ID`` wrote ``{"id": ...}``) while the catalog recorded another spelling
(``ID``): every reader of the output looked the value up under the recorded one, and saw
NULL. The files are what they are, so the catalog adopts what they hold: a query's output
columns are recorded under the spelling its plan writes them (the records on disk read back
whole, by Spark and by pull queries alike), and a second writer of the same output (INSERT
INTO ... SELECT) writes that spelling from now on. Where the second writer spelled them
otherwise, its earlier records hold the other spelling: the output is marked
(``MIXED_SPELLINGS``) so that pull queries read both, while Spark's JSON reader, which matches
keys exactly, reads those earlier records as NULL. Each change is logged.

A column type the closed table (:mod:`..language.types`) does not hold cannot be read any
more: the migration stops and names it rather than pass it on.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import sqlglot
from sqlalchemy import Connection, select, update
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import CatalogError, ParseError
from ..language.dialect import DIALECT
from ..language.statements import Column
from .model import MIXED_SPELLINGS
from .schema import queries, query_versions, sources

log = logging.getLogger(__name__)


def one_spelling(conn: Connection) -> None:
    """Migration step 11 (see the module's docstring)."""
    rows = {r.name: r for r in conn.execute(select(sources))}
    for row in rows.values():
        _check_types(row.name, row.columns)
    plans = {r.id: r for r in conn.execute(select(queries.c.id, queries.c.sink, queries.c.plan))}
    for name, row in rows.items():
        columns = json.loads(row.columns)
        writer = plans.get(row.writer_query) if row.writer_query else None
        written = _written_names(writer.plan) if writer is not None else None
        adopted = _adopt(columns, written) if written else {}
        if adopted and writer is not None:
            log.warning(
                "catalog migration: the output of %s holds %s; its columns are recorded so now",
                writer.id,
                ", ".join(f"{new} (was recorded as {old})" for old, new in adopted.items()),
            )
            conn.execute(
                update(sources).where(sources.c.name == name).values(columns=json.dumps(_renamed(columns, adopted)))
            )
            _rename_in_versions(conn, writer.id, adopted)
        spelled = {c["name"].lower(): c["name"] for c in _renamed(columns, adopted)}
        others = [p for p in plans.values() if p.sink == name and p.id != row.writer_query]
        if any(_spelled_otherwise(_written_names(p.plan), spelled) for p in others):
            # its files hold both spellings: pull queries read its keys in any case from now on
            properties = {**json.loads(row.properties), MIXED_SPELLINGS: True}
            conn.execute(update(sources).where(sources.c.name == name).values(properties=json.dumps(properties)))
            log.warning(
                "catalog migration: %s holds records written under two spellings of its columns (%s); pull "
                "queries read both, a query reading it with Spark reads the earlier ones of the other spelling "
                "as NULL",
                name,
                ", ".join(spelled.values()),
            )
        for other in others:
            _respell_plan(conn, other.id, spelled)


def _check_types(source: str, columns_json: str) -> None:
    for column in json.loads(columns_json):
        try:
            Column.from_json(column)
        except (ParseError, KeyError, TypeError) as e:
            raise CatalogError(
                f"the catalog records column {column.get('name')!r} of {source} with a type streamql does not "
                f"read ({e}); drop {source} with the streamql release that created it, then migrate again"
            ) from None


def _written_names(plan_json: str | None) -> list[str] | None:
    """The names a recorded plan's Spark SQL writes its outputs under (Spark names an
    unaliased column as the SELECT spells it), or None when it cannot be read."""
    plan: dict[str, Any] = json.loads(plan_json or "null") or {}
    try:
        tree = sqlglot.parse_one(plan.get("spark_sql") or "", dialect=DIALECT)
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Select):
        return None
    return [p.alias_or_name for p in tree.expressions]


def _spelled_otherwise(written: list[str] | None, spelled: dict[str, str]) -> bool:
    """A writer wrote some column under another spelling than ``spelled`` (lower -> one)."""
    return any(spelled.get(w.lower(), w) != w for w in written or [])


def _adopt(columns: list[dict[str, Any]], written: list[str]) -> dict[str, str]:
    """Recorded name -> the spelling the writer writes it under, where the two differ only in
    letter case."""
    by_lower = {w.lower(): w for w in written}
    return {
        c["name"]: by_lower[c["name"].lower()]
        for c in columns
        if c["name"].lower() in by_lower and by_lower[c["name"].lower()] != c["name"]
    }


def _renamed(columns: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """``columns`` with each name ``names`` maps (in any letter case) respelled."""
    spelled = {old.lower(): new for old, new in names.items()}
    return [{**c, "name": spelled.get(c["name"].lower(), c["name"])} for c in columns]


def _rename_in_versions(conn: Connection, query_id: str, names: dict[str, str]) -> None:
    """Every version of the writer records its sink's columns under the adopted spelling (a
    rollback copies them back), and its shape too."""
    v = query_versions
    for version in conn.execute(select(v.c.version, v.c.sink_columns, v.c.shape).where(v.c.query_id == query_id)):
        values: dict[str, str] = {}
        if version.sink_columns:
            values["sink_columns"] = json.dumps(_renamed(json.loads(version.sink_columns), names))
        if version.shape and version.shape != "null":
            values["shape"] = json.dumps(_shape_renamed(json.loads(version.shape), names))
        if values:
            conn.execute(update(v).where(v.c.query_id == query_id, v.c.version == version.version).values(**values))
    shape = conn.execute(select(queries.c.shape).where(queries.c.id == query_id)).scalar()
    if shape and shape != "null":
        conn.execute(
            update(queries)
            .where(queries.c.id == query_id)
            .values(shape=json.dumps(_shape_renamed(json.loads(shape), names)))
        )


def _shape_renamed(shape: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    spelled = {old.lower(): new for old, new in names.items()}
    name = lambda n: spelled.get(n.lower(), n)  # noqa: E731
    if "columns" in shape:  # [name, type, key] (plain dicts of old) or {"name": ...} (typed)
        shape["columns"] = [
            {**c, "name": name(c["name"])} if isinstance(c, dict) else [name(c[0]), *c[1:]] for c in shape["columns"]
        ]
    if "projections" in shape:
        shape["projections"] = {name(n): p for n, p in shape["projections"].items()}
    return shape


def _respell_plan(conn: Connection, query_id: str, spelled: dict[str, str]) -> None:
    """Another writer of a source (INSERT INTO ... SELECT) writes its outputs under the
    source's spelling from now on: its plan's outputs aliased so, in every version."""
    for table, key, where in (
        (queries, queries.c.id, queries.c.id == query_id),
        (query_versions, query_versions.c.version, query_versions.c.query_id == query_id),
    ):
        for row in conn.execute(select(key, table.c.plan).where(where)):
            plan = json.loads(row.plan or "null")
            sql = _aliased(plan.get("spark_sql", ""), spelled) if plan else None
            if sql is None or sql == plan["spark_sql"]:
                continue
            log.warning(
                "catalog migration: %s writes its outputs as %s spells them from now on",
                query_id,
                ", ".join(spelled.values()),
            )
            plan["spark_sql"] = sql
            conn.execute(update(table).where(where, key == row[0]).values(plan=json.dumps(plan), select_sql=sql))


def _aliased(spark_sql: str, spelled: dict[str, str]) -> str | None:
    try:
        tree = sqlglot.parse_one(spark_sql, dialect=DIALECT)
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Select):
        return None
    changed = False
    for projection in list(tree.expressions):
        name = spelled.get(projection.alias_or_name.lower())
        if name is not None and name != projection.alias_or_name:
            projection.replace(exp.alias_(projection.unalias(), name, quoted=True))
            changed = True
    return tree.sql(dialect=DIALECT) if changed else spark_sql
