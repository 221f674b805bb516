"""Deploy the ksqlMart pipeline from dags/sql/ksqlmart.sql, every hour.

Applying the script again changes nothing that is already as the file defines it, so the
schedule keeps the catalog in line with the file: a new statement in the file is created on
the next run. It makes sure a runtime serves the pipeline (submitting one through the
Spark connection if none heartbeats), then checks that every query converged: RUNNING,
unless someone paused it on purpose.
"""
from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_streamql.operators.queries import CreateQueryOperator
from airflow_provider_streamql.operators.runtime import SubmitRuntimeOperator
from airflow_provider_streamql.sensors.queries import QueryStateSensor

with DAG(
    dag_id="streamql_deploy",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    template_searchpath=[os.path.join(os.path.dirname(__file__), "sql")],
    tags=["streamql"],
    doc_md=__doc__,
):
    ensure_runtime = SubmitRuntimeOperator(task_id="ensure_runtime")
    deploy = CreateQueryOperator(task_id="deploy", sql="ksqlmart.sql")
    converged = QueryStateSensor(task_id="all_queries_running", query_id="ALL",
                                 target_states="DESIRED", timeout=600, poke_interval=2)
    ensure_runtime >> deploy >> converged
