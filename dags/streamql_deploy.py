"""Deploy the ksqlMart pipeline from dags/sql/ksqlmart.sql (or $STREAMQL_DEPLOY_FILE),
every hour (headless mode).

The file is the pipeline's desired state. Each run makes sure a runtime serves the pipeline
(submitting one through the Spark connection if none heartbeats), plans the file against the
catalog (the plan is in XCom and the task log) and applies it: new statements are created,
changed ones upgraded in place behind the validator, untouched queries keep running. A file
with a change that cannot be applied in place fails the run and changes nothing. Last, it
checks that every query converged: RUNNING, unless someone paused it on purpose.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_streamql.operators.deploys import DeployScriptOperator
from airflow_provider_streamql.operators.runtime import SubmitRuntimeOperator
from airflow_provider_streamql.sensors.queries import QueryStateSensor

# the deploy file: dags/sql/ksqlmart.sql (file topics), or $STREAMQL_DEPLOY_FILE (the compose
# stack points it at the Kafka version)
DEPLOY_FILE = os.environ.get("STREAMQL_DEPLOY_FILE") or os.path.join(os.path.dirname(__file__), "sql", "ksqlmart.sql")

with DAG(
    dag_id="streamql_deploy",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    template_searchpath=[os.path.dirname(os.path.abspath(DEPLOY_FILE))],
    tags=["streamql"],
    doc_md=__doc__,
):
    ensure_runtime = SubmitRuntimeOperator(task_id="ensure_runtime")
    deploy = DeployScriptOperator(task_id="deploy", sql=os.path.basename(DEPLOY_FILE))
    converged = QueryStateSensor(
        task_id="all_queries_running", query_id="ALL", target_states="DESIRED", timeout=600, poke_interval=2
    )
    ensure_runtime >> deploy >> converged
