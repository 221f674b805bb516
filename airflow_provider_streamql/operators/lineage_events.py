"""The OpenLineage events of query versions (imported only when the OpenLineage provider
asks for lineage; see :mod:`.lineage`)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.providers.openlineage.plugins.adapter import _PRODUCER
from airflow.providers.openlineage.plugins.listener import get_openlineage_listener
from airflow.providers.openlineage.plugins.macros import (
    lineage_job_name,
    lineage_job_namespace,
    lineage_root_job_name,
    lineage_root_job_namespace,
    lineage_root_run_id,
    lineage_run_id,
)
from attrs import define
from openlineage.client.event_v2 import Dataset, Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import RunFacet, job_type_job, parent_run, schema_dataset, sql_job
from openlineage.client.facet_v2 import column_lineage_dataset as cl

from ..engine import QueryLineage

#: the integration and job type of a query version's job (OpenLineage's jobType facet)
INTEGRATION, JOB_TYPE = "STREAMQL", "QUERY"


@define
class StreamQLRunFacet(RunFacet):
    """The query versions a run deployed (``queryId``, ``version``, ``verdict``,
    ``pipeline``, ``sink``), and ``processingType`` STREAMING."""

    queries: list[dict[str, Any]]
    processingType: str = "STREAMING"  # noqa: N815 (OpenLineage's spelling)

    @staticmethod
    def _get_schema() -> str:
        return (
            "https://github.com/streamql/airflow-provider-streamql/blob/main/docs/facets/"
            "StreamQLRunFacet.json#/$defs/StreamQLRunFacet"
        )


def operator_lineage(lineages: list[QueryLineage]):
    """The task's lineage: every query's inputs and outputs (with schema and column
    lineage), its statements and the ``streamql`` run facet."""
    inputs: dict[tuple[str, str], Any] = {}
    outputs: dict[tuple[str, str], Any] = {}
    for lin in lineages:
        for ds in lin.inputs:
            inputs.setdefault((ds.namespace, ds.name), _dataset(ds))
        outputs[(lin.output.namespace, lin.output.name)] = _dataset(lin.output, lin)
    return OperatorLineage(
        inputs=list(inputs.values()),
        outputs=list(outputs.values()),
        job_facets={"sql": sql_job.SQLJobFacet(query=";\n".join(lin.sql.rstrip().rstrip(";") for lin in lineages))},
        run_facets={"streamql": _run_facet(lineages)},
    )


def emit_query_runs(lineages: list[QueryLineage], ended: list[QueryLineage], task_instance) -> None:
    """START for each deployed query version, COMPLETE for each version it replaced, on the
    query's own STREAMING job, through the listener's adapter (its transport)."""
    adapter = get_openlineage_listener().adapter
    parent = _parent_facet(task_instance)
    events = [(RunState.COMPLETE, lin) for lin in ended] + [(RunState.START, lin) for lin in lineages]
    for state, lin in events:
        job, run = _query_job_and_run(lin, parent)
        adapter.emit(
            RunEvent(
                eventType=state,
                eventTime=time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                run=run,
                job=job,
                producer=_PRODUCER,
                inputs=[_dataset(ds) for ds in lin.inputs],
                outputs=[_dataset(lin.output, lin)],
            )
        )


def query_run_id(lin: QueryLineage) -> str:
    """The run of one version of a query: the same UUID for its START and its COMPLETE."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"streamql:{lin.pipeline}/{lin.query_id}/{lin.version}"))


def _query_job_and_run(lin: QueryLineage, parent):
    job = Job(
        namespace=lineage_job_namespace(),
        name=f"streamql.{lin.pipeline}.{lin.query_id}",
        facets={
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="STREAMING", integration=INTEGRATION, jobType=JOB_TYPE
            ),
            "sql": sql_job.SQLJobFacet(query=lin.sql),
        },
    )
    return job, Run(runId=query_run_id(lin), facets={"streamql": _run_facet([lin]), "parent": parent})


def _parent_facet(task_instance):
    namespace = lineage_job_namespace()
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=lineage_run_id(task_instance)),
        job=parent_run.Job(namespace=namespace, name=lineage_job_name(task_instance)),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=lineage_root_run_id(task_instance)),
            job=parent_run.RootJob(
                namespace=lineage_root_job_namespace(task_instance), name=lineage_root_job_name(task_instance)
            ),
        ),
    )


def _dataset(ds, lin: QueryLineage | None = None):
    """An OpenLineage dataset with its schema; an output also with its column lineage."""
    facets: dict[str, Any] = {
        "schema": schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in ds.fields]
        )
    }
    if lin is not None:
        facets["columnLineage"] = cl.ColumnLineageDatasetFacet(
            fields={
                out: cl.Fields(
                    inputFields=[
                        cl.InputField(
                            namespace=c.namespace,
                            name=c.name,
                            field=c.column,
                            transformations=[cl.Transformation(type="DIRECT", subtype=c.transformation)],
                        )
                        for c in columns
                    ]
                )
                for out, columns in lin.columns.items()
                if columns
            }
        )
    return Dataset(namespace=ds.namespace, name=ds.name, facets=facets)


def _run_facet(lineages: list[QueryLineage]) -> StreamQLRunFacet:
    return StreamQLRunFacet(
        queries=[
            {
                "queryId": lin.query_id,
                "version": lin.version,
                "verdict": lin.verdict,
                "pipeline": lin.pipeline,
                "sink": lin.sink,
            }
            for lin in lineages
        ]
    )
