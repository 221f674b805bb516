"""What the Streaming queries page shows: every query with its state, throughput over its
last batches, lag and last error, and one query's versions and command history. Plain
data, no secrets (no catalog URL, no paths outside the query's own)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..engine import DesiredState, QueryState
from ..errors import StreamQLError
from ..language import RateLimits, parse
from ..language.statements import QueryControl

if TYPE_CHECKING:
    from ..engine import Engine, QueryInfo


#: the columns of a query's row the page shows as they are
SHOWN = ("query_id", "pipeline", "state", "desired", "version", "sink", "error", "retry", "stuck")


def query_list(engine: Engine) -> list[dict[str, Any]]:
    """One row per query of every pipeline, oldest first."""
    rows = []
    queries = engine.query_infos()
    for row, query in zip(engine.query_rows(queries), queries, strict=True):
        progress = engine.progress(query.id)
        history = engine.progress_history(query.id)
        rows.append(
            {
                **{k: row[k] for k in SHOWN},
                "rows_per_sec": row["rows_per_sec"],
                "throughput": [round(h["rows_per_second"], 1) for h in history],
                "last_batch": row["last_batch"],
                "last_batch_at": progress.last_batch_at if progress else None,
                "lag_files": row["lag_files"],
                "lag_records": row["lag_records"],
                "lag_note": row["lag_note"],  # why a lag is not known (a broker not reachable)
                "actions": actions(query.desired_state) + (["skip"] if held(engine, query, row) else []),
                "shadow_of": query.settings.get("shadow_of"),  # a shadow version (docs/upgrades.md)
                "expectation": row["expectation"],  # with its counts (docs/language.md, "Expectations")
            }
        )
    return rows


#: what a button may do to a query, by its desired state
ACTIONS: dict[str, list[str]] = {DesiredState.RUNNING: ["pause"], DesiredState.PAUSED: ["resume"]}


def actions(desired: str) -> list[str]:
    """What a button may do to a query in this desired state."""
    return ACTIONS.get(desired, [])


def held(engine: Engine, query: QueryInfo, row: dict[str, Any]) -> bool:
    """Whether bad records hold the query, so that ``RESUME ... SKIP BAD RECORDS`` moves it on:
    paused at them (policy PAUSE), or in ERROR on one its failing batch reads (policy FAIL)."""
    if query.desired_state == DesiredState.PAUSED:
        return bool(engine.bad_records(query.id, "PENDING"))
    if row["state"] != QueryState.ERROR:
        return False
    committed = row["last_batch"] if row["last_batch"] is not None else -1
    return any(r.batch_id > committed for r in engine.bad_records(query.id, "FAILED"))


def query_details(engine: Engine, query_id: str) -> dict[str, Any]:
    """One query: its row, the SQL of each version with the validator's verdict and what
    became of it, the commands that named it (who, when) and the records it could not read."""
    query = engine.query(query_id)
    row = next(r for r in query_list(engine) if r["query_id"] == query.id)
    versions = []
    for v in engine.versions(query.id):
        report = json.loads(v["report"]) if v["report"] else None
        versions.append(
            {
                "version": v["version"],
                "sql": v["sql"],
                "verdict": v["verdict"],
                "outcome": v["outcome"],
                "created_at": v["created_at"],
                "started_at": v["started_at"],
                "ended_at": v["ended_at"],
                "error": v["error"],
                "findings": [f"{f['code']}: {f['message']}" for f in report["findings"]] if report else [],
            }
        )
    commands = [
        {"statement": c["statement"], "issuer": c["issuer"], "issued_at": c["issued_at"]}
        for c in engine.commands()
        if c["pipeline"] == query.pipeline and _concerns(c["statement"], query)
    ]
    bad = [
        {
            "status": r.status,
            "batch_id": r.batch_id,
            "source": r.source,
            "position": r.position,
            "error": r.error,
            "raw": r.raw[:500],
            "recorded_at": r.recorded_at,
            "handled_by": r.handled_by,
        }
        for r in engine.bad_records(query.id)
    ]
    return {
        **row,
        "sources": query.sources,
        "sql": query.sql,
        "versions": versions,
        "commands": commands,
        "bad_records": bad,
        "on_error": query.settings.get("on_error"),
        "rate_limit": RateLimits.of(query.settings).describe(),
        # the chart: lag after each of its last batches, then now
        "lag_history": [
            {"at": p.at, "batch_id": p.batch_id, "files": p.files, "records": p.records}
            for p in engine.lag_history(query.id)
        ],
    }


def _concerns(logged: str, query: QueryInfo) -> bool:
    """Whether a logged statement acted on ``query``: named it (or ALL), or defined, changed,
    dropped or read its output. Read by parsing the statement, as the engine did."""
    try:
        statements = parse(logged)
    except StreamQLError:
        return False
    for stmt in statements:
        if isinstance(stmt, QueryControl) and stmt.query_id in (None, query.id):
            return True
        named = {getattr(stmt, "name", None), getattr(stmt, "target", None), getattr(stmt, "query_id", None)}
        select = getattr(stmt, "select", None)
        read = {t.name.upper() for t in select.find_all(exp.Table)} if select is not None else set()
        if query.sink in named | read or query.id in named:
            return True
    return False
