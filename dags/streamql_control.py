"""Pause, resume or terminate a query (or ALL queries of the pipeline) from a form.

For operators who prefer a form to the buttons on the Streaming queries page: trigger with
``action`` and ``query_id``. The chosen task waits until the runtime reports the new state.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task

from airflow_provider_streamql.language.names import PARAM_PATTERN
from airflow_provider_streamql.operators.queries import PauseQueryOperator, ResumeQueryOperator, TerminateQueryOperator

with DAG(
    dag_id="streamql_control",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "action": Param("pause", enum=["pause", "resume", "terminate"]),
        # a name, never SQL: the form refuses anything else, and so does the operator
        "query_id": Param("ALL", type="string", pattern=PARAM_PATTERN, description="a query ID, or ALL"),
    },
    tags=["streamql"],
    doc_md=__doc__,
):

    @task.branch
    def route(params=None) -> str:
        return params["action"]

    actions = [
        cls(task_id=name, query_id="{{ params.query_id }}")
        for name, cls in (
            ("pause", PauseQueryOperator),
            ("resume", ResumeQueryOperator),
            ("terminate", TerminateQueryOperator),
        )
    ]

    @task(trigger_rule="none_failed_min_one_success")
    def report(ti=None, params=None) -> dict:
        states = ti.xcom_pull(task_ids=params["action"], key="states") or {}
        for query_id, state in states.items():
            print(f"{query_id}: {state}")
        return states

    route() >> actions >> report()
