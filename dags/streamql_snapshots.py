"""Snapshots on a schedule, and a rewind from a form.

``streamql_snapshots`` runs hourly: it snapshots every running query of the pipeline (the
queries keep running) and keeps each query's newest 24 snapshots of the last two days.
``streamql_rewind`` is triggered by hand with ``query_id`` and ``snapshot`` (a number from
``SHOW SNAPSHOTS``) or ``timestamp`` (a time: its first input at or after it): it pauses the
query, restores it to the snapshot or the time and resumes it, which runs the batches after
it again (docs/operations.md, "Snapshots and rewinding", "Rewinding to a time").
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task

from airflow_provider_streamql.hooks.streamql import StreamQLHook
from airflow_provider_streamql.language.names import PARAM_PATTERN
from airflow_provider_streamql.operators.queries import PauseQueryOperator, ResumeQueryOperator
from airflow_provider_streamql.operators.snapshots import RestoreQueryOperator, SnapshotQueryOperator

ONE_QUERY = r"^(?![Aa][Ll][Ll](?![\s\S]))" + PARAM_PATTERN[1:]

with DAG(
    dag_id="streamql_snapshots",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["streamql"],
    doc_md=__doc__,
):

    @task
    def running_queries() -> list[str]:
        engine = StreamQLHook().get_engine()
        try:
            return [q["query_id"] for q in engine.queries(engine.pipeline) if q["state"] == "RUNNING"]
        finally:
            engine.close()

    SnapshotQueryOperator.partial(task_id="snapshot", keep=24, max_age_hours=48).expand(query_id=running_queries())

with DAG(
    dag_id="streamql_rewind",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        # one query's name, never ALL (a rewind pauses what it names) and never SQL
        "query_id": Param("", type="string", pattern=ONE_QUERY, description="the query to rewind"),
        "snapshot": Param(
            None, type=["null", "integer"], minimum=1, description="its snapshot number (SHOW SNAPSHOTS), or"
        ),
        "timestamp": Param(
            "", type="string", description="a time, ISO-8601 with its zone: rewind to its first input at or after it"
        ),
    },
    tags=["streamql"],
    doc_md=__doc__,
):
    pause = PauseQueryOperator(task_id="pause", query_id="{{ params.query_id }}")
    restore = RestoreQueryOperator(
        task_id="restore",
        query_id="{{ params.query_id }}",
        snapshot="{{ params.snapshot if params.snapshot else '' }}",
        timestamp="{{ params.timestamp }}",
    )
    resume = ResumeQueryOperator(task_id="resume", query_id="{{ params.query_id }}")
    pause >> restore >> resume
