"""DAGs the tests run with dag.test(): one streamql task each, set up through params.
Short timeouts and polls keep failures fast."""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_streamql.operators.deploys import DeployScriptOperator, RollbackDeployOperator
from airflow_provider_streamql.operators.queries import (
    CreateQueryOperator,
    PauseQueryOperator,
    ReplaceQueryOperator,
    ResumeQueryOperator,
    TerminateQueryOperator,
    ValidateUpgradeOperator,
)
from airflow_provider_streamql.operators.rates import AlterQueryOperator
from airflow_provider_streamql.operators.runtime import SubmitRuntimeOperator
from airflow_provider_streamql.operators.shadows import DiscardShadowOperator, PromoteShadowOperator
from airflow_provider_streamql.sensors.queries import QueryProgressSensor, QueryStateSensor, ShadowReadySensor

FAST = {"timeout": 90, "poll_interval": 0.2}
SENSOR = {"timeout": 90, "poke_interval": 0.2}


def single(dag_id: str, make, **params) -> None:
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
             params=params, render_template_as_native_obj=True, tags=["streamql-tests"]):
        make()


single("t_create", lambda: CreateQueryOperator(task_id="task", sql="{{ params.sql }}", **FAST), sql="")
single("t_validate_gate", lambda: ValidateUpgradeOperator(
    task_id="task", sql="{{ params.sql }}", query_id="{{ params.query_id }}"), sql="", query_id="")
single("t_validate_branch", lambda: ValidateUpgradeOperator(
    task_id="task", sql="{{ params.sql }}", fail_on=(), dry_run="{{ params.dry_run }}"), sql="",
    dry_run=False)
single("t_replace", lambda: ReplaceQueryOperator(
    task_id="task", sql="{{ params.sql }}", query_id="{{ params.query_id }}", mode="{{ params.mode }}",
    **FAST), sql="", query_id="", mode="in_place")
for name, cls in (("pause", PauseQueryOperator), ("resume", ResumeQueryOperator),
                  ("terminate", TerminateQueryOperator)):
    single(f"t_{name}", lambda cls=cls: cls(task_id="task", query_id="{{ params.query_id }}", **FAST),
           query_id="ALL")
single("t_promote", lambda: PromoteShadowOperator(task_id="task", query_id="{{ params.query_id }}", **FAST),
       query_id="")
single("t_discard", lambda: DiscardShadowOperator(task_id="task", query_id="{{ params.query_id }}", **FAST),
       query_id="")
single("t_alter_query", lambda: AlterQueryOperator(
    task_id="task", query_id="{{ params.query_id }}", setting="{{ params.setting }}", value="{{ params.value }}",
    **FAST), query_id="", setting="max_files_per_batch", value=2)
single("t_promote_when_ready", lambda: PromoteShadowOperator(
    task_id="task", query_id="{{ params.query_id }}", when_ready=True, ready_within=60, **FAST), query_id="")
single("t_promote_when_ready_soon", lambda: PromoteShadowOperator(
    task_id="task", query_id="{{ params.query_id }}", when_ready=True, ready_within=5, **FAST), query_id="")
single("t_shadow_ready_sensor", lambda: ShadowReadySensor(
    task_id="task", query_id="{{ params.query_id }}", max_lag="{{ params.max_lag }}", **SENSOR),
    query_id="", max_lag=0)
single("t_deploy", lambda: DeployScriptOperator(task_id="task", sql="{{ params.sql }}", **FAST), sql="")
single("t_plan_only", lambda: DeployScriptOperator(task_id="task", sql="{{ params.sql }}", plan_only=True), sql="")
single("t_deploy_fingerprint", lambda: DeployScriptOperator(
    task_id="task", sql="{{ params.sql }}", plan_fingerprint="{{ params.plan_fingerprint }}", wait=False),
    sql="", plan_fingerprint="")
single("t_rollback_deploy", lambda: RollbackDeployOperator(task_id="task", deploy_id="{{ params.deploy }}", **FAST),
       deploy="last")
single("t_resume_skipping", lambda: ResumeQueryOperator(
    task_id="task", query_id="{{ params.query_id }}", skip_bad_records=True, **FAST), query_id="")
single("t_pause_in_worker", lambda: PauseQueryOperator(
    task_id="task", query_id="{{ params.query_id }}", deferrable=False, **FAST), query_id="ALL")
single("t_state_sensor", lambda: QueryStateSensor(
    task_id="task", query_id="{{ params.query_id }}", target_states="{{ params.states }}", **SENSOR),
    query_id="ALL", states="RUNNING")
single("t_progress_sensor", lambda: QueryProgressSensor(
    task_id="task", query_id="{{ params.query_id }}", batches="{{ params.batches }}", **SENSOR),
    query_id="", batches=1)
single("t_caught_up_sensor", lambda: QueryProgressSensor(
    task_id="task", query_id="{{ params.query_id }}", caught_up=True, **SENSOR), query_id="")
# the caught-up sensor deferred or poking in the worker, with a timeout that runs out soon
# (3 s: a wait that times out) or not (90 s)
for mode, deferrable in (("deferred", True), ("poked", False)):
    for seconds in (3, 90):
        single(f"t_caught_up_{mode}_{seconds}s", lambda deferrable=deferrable, seconds=seconds: QueryProgressSensor(
            task_id="task", query_id="{{ params.query_id }}", caught_up=True, timeout=seconds, poke_interval=0.2,
            deferrable=deferrable), query_id="")
single("t_submit_runtime", lambda: SubmitRuntimeOperator(
    task_id="task", spark_conn_id="{{ params.spark_conn_id }}", conf="{{ params.conf }}",
    # a lease far above any reconcile pass (tests/conftest.py LEASE_TTL); SIGTERM releases it
    runtime_args=["--interval", "0.2", "--lease-ttl", "60"], timeout=180, poll_interval=0.5),
    spark_conn_id="spark_local", conf={"spark.ui.enabled": "false"})

