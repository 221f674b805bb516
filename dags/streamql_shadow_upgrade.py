"""A shadow (blue/green) upgrade with a gate: trigger with ``new_sql`` (a CREATE OR REPLACE
of a query's output) and ``gate``.

The new version starts beside the running one on a copy of its checkpoint and writes
``<OUTPUT>_SHADOW`` (the running one keeps serving); once the shadow is ready (it has read
every input file the running version read and its lag stayed at most ``max_lag`` files for a
few seconds: ``PROMOTE ... WHEN READY``'s gate, Materialize's ``deploy_await``), ``DIFF``
compares the two outputs over the input both read. Then the gate: ``auto`` promotes when DIFF
compared at least ``min_compared_inputs`` input files and at most ``max_changed_rows`` rows
differ (a table's changed key counts a row per side), and discards the shadow otherwise; ``approval`` asks a
person in the Airflow UI (Human-in-the-loop: promote or discard). ``PROMOTE`` waits for the
readiness gate again (an approval may come much later), then replaces the running version in
place, nothing lost or read twice; either way the shadow's output is
dropped once it has stopped.
"""

from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.hitl import HITLBranchOperator
from airflow.sdk import DAG, Param, task

from airflow_provider_streamql.hooks.streamql import StreamQLHook
from airflow_provider_streamql.language.statements import DiffShadow
from airflow_provider_streamql.operators.queries import ReplaceQueryOperator
from airflow_provider_streamql.operators.shadows import DiscardShadowOperator, PromoteShadowOperator
from airflow_provider_streamql.sensors.queries import ShadowReadySensor

SHADOW = "{{ ti.xcom_pull(task_ids='shadow', key='shadow_query_id') }}"

with DAG(
    dag_id="streamql_shadow_upgrade",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "new_sql": Param("", type="string", minLength=1, description="CREATE OR REPLACE STREAM|TABLE ... AS SELECT"),
        "gate": Param("approval", enum=["approval", "auto"]),
        "max_changed_rows": Param(0, type="integer", minimum=0, description="auto: promote up to this many"),
        "min_compared_inputs": Param(1, type="integer", minimum=0, description="auto: input files DIFF must compare"),
        "max_lag": Param(0, type="integer", minimum=0, description="input files the shadow may have left to read"),
    },
    tags=["streamql"],
    doc_md=__doc__,
):
    shadow = ReplaceQueryOperator(task_id="shadow", sql="{{ params.new_sql }}", mode="shadow")
    ready = ShadowReadySensor(task_id="ready", query_id=SHADOW, max_lag="{{ params.max_lag }}", poke_interval=1)

    @task
    def diff(ti=None) -> dict:
        engine = StreamQLHook().get_engine()
        try:
            result = engine.run([DiffShadow.of(ti.xcom_pull(task_ids="shadow", key="shadow_query_id"))])[0]
        finally:
            engine.close()
        print(result.render())
        return {"changed": len(result.rows), "inputs": result.details["inputs"], "message": result.message}

    @task.branch
    def gate(compared: dict, params=None) -> str:
        if params["gate"] == "approval":
            return "ask"
        enough = compared["inputs"] >= params["min_compared_inputs"]
        return "promote" if enough and compared["changed"] <= params["max_changed_rows"] else "discard"

    ask = HITLBranchOperator(
        task_id="ask",
        subject="Promote the shadow version?",
        body="{{ ti.xcom_pull(task_ids='diff')['message'] }}",
        options=["promote", "discard"],
    )
    promote = PromoteShadowOperator(
        task_id="promote",
        query_id=SHADOW,
        when_ready=True,
        max_lag="{{ params.max_lag }}",
        trigger_rule="none_failed_min_one_success",
    )
    discard = DiscardShadowOperator(task_id="discard", query_id=SHADOW, trigger_rule="none_failed_min_one_success")

    compared = diff()
    shadow >> ready >> compared
    gate(compared) >> [promote, discard, ask]
    ask >> [promote, discard]
