"""Upgrade a running query, triggered by hand with the new SQL.

validate -> branch on the verdict -> replace -> wait until caught up -> report. The
validation gate stops a REJECTED change before anything happens: the query keeps running
its version and the validate task's log shows the findings. IN_PLACE changes keep the
query ID and checkpoint; with ``mode=replacing`` the query is rebuilt from the earliest
input under a new ID. Query IDs and versions travel from task to task in XCom.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_streamql.operators.queries import ReplaceQueryOperator, ValidateUpgradeOperator
from airflow_provider_streamql.sensors.queries import QueryProgressSensor

DEFAULT_SQL = "CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0"
# the query ID of whichever replace task ran
REPLACED = (
    "{{ ti.xcom_pull(task_ids='replace_in_place', key='query_id') "
    "or ti.xcom_pull(task_ids='replace_rebuild', key='query_id') }}"
)

with DAG(
    dag_id="streamql_upgrade",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,
    params={
        "query_id": Param("CSAS_VALID_PURCHASES_1", type="string", description="the query to upgrade"),
        "new_sql": Param(DEFAULT_SQL, type="string", description="CREATE OR REPLACE ... AS SELECT"),
        "mode": Param(
            "in_place",
            enum=["in_place", "replacing"],
            description="in_place keeps the checkpoint; replacing rebuilds from earliest",
        ),
        "dry_run": Param(
            False, type="boolean", description="also try the new version on a copy of the checkpoint with Spark"
        ),
    },
    tags=["streamql"],
    doc_md=__doc__,
):
    validate = ValidateUpgradeOperator(
        task_id="validate",
        sql="{{ params.new_sql }}",
        query_id="{{ params.query_id }}",
        fail_on=("REJECTED",),
        dry_run="{{ params.dry_run }}",
    )

    @task.branch
    def choose(verdict: str, params=None) -> str:
        if params["mode"] == "replacing":
            return "replace_rebuild"
        return "replace_in_place" if verdict == "IN_PLACE" else "needs_replacing"

    @task
    def needs_replacing(params=None) -> None:
        raise AirflowFailException(
            f"{params['query_id']} cannot be upgraded in place "
            f"(REPLACING_REQUIRED, see the validate task); trigger again "
            f"with mode=replacing to rebuild it from the earliest input"
        )

    common = {"sql": "{{ params.new_sql }}", "query_id": "{{ params.query_id }}"}
    in_place = ReplaceQueryOperator(task_id="replace_in_place", mode="in_place", **common)
    rebuild = ReplaceQueryOperator(task_id="replace_rebuild", mode="replacing", start_from="earliest", **common)
    caught_up = QueryProgressSensor(
        task_id="wait_for_progress",
        query_id=REPLACED,
        caught_up=True,
        timeout=600,
        poke_interval=2,
        trigger_rule="none_failed_min_one_success",
    )

    @task(trigger_rule="none_failed_min_one_success")
    def report(ti=None) -> dict:
        replaced = next(t for t in ("replace_in_place", "replace_rebuild") if ti.xcom_pull(task_ids=t, key="query_id"))
        pull = lambda key, task_id=replaced: ti.xcom_pull(task_ids=task_id, key=key)
        summary = {
            "query_id": pull("query_id"),
            "version": pull("version"),
            "previous_query_id": pull("previous_query_id"),
            "previous_version": pull("previous_version"),
            "verdict": pull("verdict", "validate"),
            "state": pull("state"),
        }
        print(
            f"upgraded {summary['previous_query_id']} v{summary['previous_version']} -> "
            f"{summary['query_id']} v{summary['version']} ({summary['verdict']}), now {summary['state']}"
        )
        return summary

    branch = choose(validate.output)
    branch >> [in_place, rebuild, needs_replacing()]
    [in_place, rebuild] >> caught_up >> report()
