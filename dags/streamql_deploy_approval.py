"""Deploy a pipeline file after a person approved its plan: trigger with ``file`` (a deploy
file next to dags/sql/, default ksqlmart.sql).

``plan`` plans the file against the catalog and pushes the plan: for each change the
validator's verdict and findings and what it affects downstream (readers of a changed stream,
the backfill an in-place upgrade does not do), and the plan's fingerprint; ``approve``
(Airflow's human-in-the-loop ApprovalOperator) shows that plan on the Required Actions page and
waits for Approve or Reject; ``apply`` applies exactly the plan approved, and fails, changing
nothing, if the catalog changed since the plan (another deploy, a CREATE OR REPLACE, a
TERMINATE meanwhile): plan again. A rejected plan skips ``apply``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param

from airflow_provider_streamql.operators.deploys import DeployScriptOperator

SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")

with DAG(
    dag_id="streamql_deploy_approval",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    template_searchpath=[SQL],
    params={"file": Param("ksqlmart.sql", type="string", pattern=r"^[A-Za-z0-9_.-]+\.sql$")},
    tags=["streamql"],
    doc_md=__doc__,
):
    plan = DeployScriptOperator(task_id="plan", sql="{% include params.file %}", plan_only=True)
    approve = ApprovalOperator(
        task_id="approve",
        subject="Apply the deploy plan of {{ params.file }}?",
        body="Approve applies exactly this plan, and nothing if the catalog changed since it was made.\n\n"
        "```\n{{ ti.xcom_pull(task_ids='plan', key='plan_text') }}\n```",
    )
    apply = DeployScriptOperator(
        task_id="apply",
        sql="{% include params.file %}",
        plan_fingerprint="{{ ti.xcom_pull(task_ids='plan', key='plan_fingerprint') }}",
    )
    plan >> approve >> apply
