"""Every ten minutes: fail, listing them, if queries are in ERROR, UNASSIGNED (their runtime
is gone) or make no progress (input older than ``stale_after_minutes`` not processed).
Paused and terminated queries are left alone; an idle query with no new input is healthy.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

with DAG(
    dag_id="streamql_health",
    schedule="*/10 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    params={
        "stale_after_minutes": Param(
            30, type="number", exclusiveMinimum=0, description="how old unprocessed input may get"
        )
    },
    tags=["streamql"],
    doc_md=__doc__,
):

    @task
    def check_queries(params=None) -> int:
        from airflow_provider_streamql.conditions import unhealthy_queries
        from airflow_provider_streamql.hooks.streamql import StreamQLHook

        engine = StreamQLHook().get_engine()
        try:
            problems = unhealthy_queries(engine, stale_after=float(params["stale_after_minutes"]) * 60)
            checked = len(engine.queries())
        finally:
            engine.close()
        if problems:
            raise AirflowFailException(
                f"{len(problems)} of {checked} queries need attention:\n"
                + "\n".join(f"  {p['query_id']} ({p['pipeline']}): {p['problem']}" for p in problems)
            )
        print(f"all {checked} queries are healthy")
        return checked

    check_queries()
