"""What a deploy plan touches beyond its own statements, and the fingerprint that approves it.

For each change of a plan, :func:`impacts` lists what it affects downstream: the queries that
read the changed stream or table (directly or through each other, with the sinks they write),
and what will *not* happen (an in-place upgrade does not recompute the output written before
the swap; a query created reads its sources from its start position). A person approving a
deploy reads that list (Feldera's ``await_approval`` lists changed views and connectors).

:func:`catalog_state` is a digest of the catalog's definitions a plan is made against (every
query's version, SQL and sink, whether it is terminated; every source's kind, columns and
properties): :func:`plan_fingerprint` joins it with the plan's own items, and an apply given
that fingerprint refuses if either changed since (mz-deploy refuses a deploy when production
changed since staging). Observed state (running, lag, progress) is left out: it changes all
the time and does not change what the plan does.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ..catalog import QueryInfo, Snapshot
from ..catalog.states import DesiredState


class Effect(enum.StrEnum):
    """How a change affects a query or a sink."""

    #: a created query starts, reading its sources from its start position
    STARTS = "starts"
    #: a changed query's output before the swap is not recomputed by its new version
    NO_BACKFILL = "no backfill"
    #: a downstream query reads the changed output from the swap on (no restart of it)
    READS_CHANGED = "reads the change"
    #: a downstream query of an output a replacing upgrade (or a teardown) would drop
    LOSES_INPUT = "loses its input"


@dataclass(frozen=True)
class Impact:
    """One query (or sink) a change affects, and how."""

    effect: Effect
    query_id: str | None
    sink: str
    note: str

    def render(self) -> str:
        who = f"{self.query_id} ({self.sink})" if self.query_id else self.sink
        return f"{self.effect.value}: {who}: {self.note}"


def impacts(snapshot: Snapshot, action: str, name: str, query_id: str | None) -> list[Impact]:
    """What the change ``action`` of stream or table ``name`` (written by ``query_id``, if a
    query writes it) affects, in ``snapshot``: the catalog as the whole file leaves it."""
    found: list[Impact] = []
    query = snapshot.queries.get(query_id) if query_id else None
    if action == "create" and query is not None:
        start = query.settings.get("starting.timestamp") or query.settings.get("auto.offset.reset") or "earliest"
        found.append(Impact(Effect.STARTS, query.id, query.sink, f"reads {', '.join(query.sources)} from {start}"))
    elif action == "replace in place" and query is not None:
        found.append(
            Impact(
                Effect.NO_BACKFILL,
                query.id,
                query.sink,
                f"what version {query.version - 1} wrote before the swap stays; version {query.version} "
                f"processes only the input after it (a replacing upgrade recomputes it all)",
            )
        )
    if action not in ("create", "replace in place", "replacing required", "drop") or (
        action == "create" and query is None  # a new declared source: its readers are new too
    ):
        return found
    effect = Effect.LOSES_INPUT if action in ("replacing required", "drop") else Effect.READS_CHANGED
    for reader, through in _readers(snapshot, name, exclude=query_id):
        via = f" (through {' -> '.join(through)})" if through else ""
        if action == "drop":
            note = f"reads {name}{via}, which a teardown of what left the file would drop"
        elif effect is Effect.LOSES_INPUT:
            note = f"reads {name}{via}, which a replacing upgrade drops and rebuilds from the start"
        elif action == "create":
            note = f"reads {name}{via}, which the new query starts writing"
        elif query is None:
            note = f"reads {name}{via}: a new column reaches it only if it names it (SELECT * keeps its columns)"
        else:
            note = f"reads {name}{via}: from the swap on, what the new definition writes"
        found.append(Impact(effect, reader.id, reader.sink, note))
    return found


def _readers(snapshot: Snapshot, name: str, exclude: str | None) -> list[tuple[QueryInfo, list[str]]]:
    """The live queries reading ``name``, directly or through others (breadth first), each
    with the outputs between (a query is listed once)."""
    seen = {exclude} if exclude else set()
    frontier: list[tuple[str, list[str]]] = [(name, [])]
    found: list[tuple[QueryInfo, list[str]]] = []
    while frontier:
        source, through = frontier.pop(0)
        for q in sorted(snapshot.queries.values(), key=lambda q: q.seq):
            if q.id in seen or q.desired_state == DesiredState.TERMINATED or source not in q.sources:
                continue
            seen.add(q.id)
            found.append((q, through))
            frontier.append((q.sink, [*through, q.sink]))
    return found


def catalog_state(snapshot: Snapshot) -> str:
    """A digest of the definitions in ``snapshot`` that a plan depends on."""
    queries = sorted(
        (q.id, q.version, q.sink, q.sql, q.desired_state == DesiredState.TERMINATED) for q in snapshot.queries.values()
    )
    sources = sorted(
        (s.name, s.kind, s.column_json(), json.dumps(s.properties, sort_keys=True, default=str), s.writer_query)
        for s in snapshot.sources.values()
    )
    return _digest({"queries": queries, "sources": sources})


def plan_fingerprint(items: list[dict[str, Any]], state: str) -> str:
    """The fingerprint of a plan (its items as :meth:`DeployPlan.to_dict` gives them, without
    their impacts, which follow from the rest) made against catalog ``state``."""
    return _digest({"items": items, "catalog": state})


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
