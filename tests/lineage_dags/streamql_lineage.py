"""The ksqlMart pipeline created, then upgraded in place and through a promoted shadow, by
DAGs whose lineage tests/test_lineage.py reads from the OpenLineage provider's file
transport; and the Spark conf a runtime would be submitted with."""
from __future__ import annotations

import json
import os
from datetime import datetime

from airflow.sdk import DAG, BaseHook

from airflow_provider_streamql.hooks.streamql import StreamQLHook
from airflow_provider_streamql.operators.queries import CreateQueryOperator, ReplaceQueryOperator
from airflow_provider_streamql.operators.runtime import SubmitRuntimeOperator
from airflow_provider_streamql.operators.shadows import PromoteShadowOperator

SQL = os.path.join(os.path.dirname(__file__), "..", "..", "dags", "sql")
COMMON = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "template_searchpath": [SQL]}

with DAG("lineage_create", **COMMON):
    CreateQueryOperator(task_id="create", sql="ksqlmart.sql", wait=False)

with DAG("lineage_upgrade", **COMMON):
    ReplaceQueryOperator(
        task_id="upgrade",
        sql="CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 0",
        query_id="CSAS_VALID_PURCHASES_1",
        wait=False,
    )

with DAG("lineage_shadow", **COMMON):
    shadow = ReplaceQueryOperator(
        task_id="shadow",
        sql="CREATE OR REPLACE STREAM valid_purchases AS SELECT * FROM purchases WHERE cost > 1",
        query_id="CSAS_VALID_PURCHASES_1",
        mode="shadow",
        wait=False,
    )
    promote = PromoteShadowOperator(
        task_id="promote", query_id="CSAS_VALID_PURCHASES_1", wait=False, keep_shadow_output=True
    )
    shadow >> promote


class SparkConfOfSubmit(SubmitRuntimeOperator):
    """SubmitRuntimeOperator up to spark-submit: prints the Spark conf it would submit."""

    def apply(self, context):
        settings = StreamQLHook.settings(BaseHook.get_connection(self.streamql_conn_id))
        _env, conf, _process_env = self._submit_settings(
            BaseHook.get_connection("spark_lineage"), "default", settings, context
        )
        print("CONF " + json.dumps(conf), flush=True)


with DAG("lineage_submit", **COMMON):
    SparkConfOfSubmit(task_id="submit_runtime", openlineage_inject_parent_job_info=True)
