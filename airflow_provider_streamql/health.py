"""Which queries need attention: in ERROR, UNASSIGNED (their runtime is gone), or making no
progress (input older than a given age still unprocessed)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .conditions import CaughtUp

if TYPE_CHECKING:
    from .engine import Engine


def unhealthy_queries(engine: "Engine", *, stale_after: float,
                      pipeline: str | None = None) -> list[dict[str, Any]]:
    """One ``{query_id, pipeline, state, problem}`` per query that needs attention.

    Paused and terminated queries are left alone (someone chose that). A query that should
    run is flagged in ERROR or UNASSIGNED, or when input written more than ``stale_after``
    seconds ago has not been processed: an idle query with no new input is healthy.
    """
    now = time.time()
    problems = []
    for row in engine.queries(pipeline):
        if row["desired"] != "RUNNING":
            continue
        problem = None
        if row["state"] == "ERROR":
            problem = f"in ERROR: {row['error']}"
        elif row["state"] == "UNASSIGNED":
            problem = "UNASSIGNED: its runtime stopped heartbeating"
        else:
            check = CaughtUp(row["query_id"], as_of=now - stale_after).check(engine)
            if not check.done:
                progress = engine.progress(row["query_id"])
                last = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(progress.last_batch_at))
                        if progress else "never")
                problem = (f"no progress for {stale_after:g}s: {check.details['missing']} input "
                           f"file(s) older than that not processed (state {row['state']}, last "
                           f"batch {last})")
        if problem:
            problems.append({"query_id": row["query_id"], "pipeline": row["pipeline"],
                             "state": row["state"], "problem": problem})
    return problems
