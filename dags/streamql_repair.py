"""Repair a query held at a poison pill as soon as it happens: scheduled on the query's events.

An ``AssetWatcher`` on the Asset of the ``VALID_PURCHASES`` stream runs ``QueryEventTrigger``
in the triggerer. When the runtime pauses ``CSAS_VALID_PURCHASES_1`` at a record it cannot
read (its error policy is PAUSE: ``WITH (on_error='PAUSE')``, or a runtime started with
``--on-error PAUSE``), the event becomes an asset event and this DAG runs: it reads which
query is held and at what, then resumes it past the bad records (``RESUME ... SKIP BAD
RECORDS``). They go to the query's dead-letter stream (``CSAS_VALID_PURCHASES_1_DLQ``), where
they can be inspected and replayed; nothing after them is lost.

Other asset events on the stream (a deploy task that writes it is an outlet of it) leave
nothing to repair: the run skips.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, AssetWatcher, task

from airflow_provider_streamql.assets.streamql import stream_asset
from airflow_provider_streamql.operators.queries import ResumeQueryOperator
from airflow_provider_streamql.triggers.events import QueryEventTrigger

HELD = QueryEventTrigger(query_id="CSAS_VALID_PURCHASES_1", events=["held"])
VALID_PURCHASES = stream_asset("VALID_PURCHASES", watchers=[AssetWatcher(name="valid_purchases_held", trigger=HELD)])

with DAG(
    dag_id="streamql_repair",
    schedule=[VALID_PURCHASES],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["streamql"],
    doc_md=__doc__,
):

    @task.short_circuit
    def held_queries(triggering_asset_events=None) -> list[str]:
        """The queries the triggering events say are held (none: the run skips)."""
        held = []
        for events in (triggering_asset_events or {}).values():
            for event in events:
                payload = (event.extra or {}).get("payload") or {}
                if payload.get("event") == "held":
                    print(payload["message"])
                    held.append(payload["query_id"])
        return sorted(set(held))

    ResumeQueryOperator.partial(task_id="resume_past_bad_records", skip_bad_records=True).expand(
        query_id=held_queries()
    )
