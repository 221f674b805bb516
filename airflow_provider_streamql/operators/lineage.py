"""OpenLineage for the operators that create, replace or deploy queries.

Airflow's OpenLineage provider is optional: it is imported only when its listener asks an
operator for lineage, so nothing here runs without it. Two kinds of events come out:

- the task's own (the listener's COMPLETE), with the queries' inputs and outputs from the
  catalog, each with its schema, the output's column lineage, the statements as a ``sql``
  job facet and a ``streamql`` run facet (query ID, version, verdict, processing type);
- one run per query version, on a job of its own (``streamql.<pipeline>.<QUERY_ID>``,
  ``processingType`` STREAMING, the task's run as its parent): START when the task deployed
  the version, COMPLETE for the version it replaced. A query outlives the task that created
  it, and the listener stamps every task's job as a BATCH task, so the streaming job is a
  separate one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import STATEMENT_ERRORS


def pulled(task_instance, key: str):
    """The task's own XCom value ``key``."""
    return task_instance.xcom_pull(task_ids=task_instance.task_id, key=key)


class QueryLineageMixin:
    """``get_openlineage_facets_on_complete`` for an operator whose XCom says which query
    versions it deployed (:meth:`deployed_versions`) and ended (:meth:`replaced_versions`)."""

    #: what the operator it is mixed into has
    streamql_conn_id: str
    log: Any  # the operator's logger

    def deployed_versions(self, task_instance) -> Mapping[str, int | None]:
        """Query ID -> the version this task created or replaced (None: the query's current
        version); empty when it changed nothing."""
        raise NotImplementedError

    def replaced_versions(self, task_instance, engine, deployed: Mapping[str, int | None]) -> dict[str, int]:
        """Query ID -> the version this task ended: by default the one before each of the
        ``deployed`` versions, a rolled-back one left out (its run ended then)."""
        before = {q: version_before(engine, q, v) for q, v in deployed.items() if v}
        return {q: v for q, v in before.items() if v is not None}

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow.providers.openlineage.extractors import OperatorLineage

        from ..hooks.streamql import StreamQLHook
        from .lineage_events import emit_query_runs, operator_lineage

        conn = StreamQLHook.get_connection(self.streamql_conn_id)
        kafka = StreamQLHook.settings(conn)["kafka_bootstrap_servers"]
        engine = StreamQLHook.engine_for(conn)
        try:
            deployed = self.deployed_versions(task_instance)
            lineages = self._lineages(engine, deployed, kafka)
            ended = self._lineages(engine, self.replaced_versions(task_instance, engine, deployed), kafka)
        finally:
            engine.close()
        if lineages or ended:
            emit_query_runs(lineages, ended, task_instance)
        return operator_lineage(lineages) if lineages else OperatorLineage()

    def _lineages(self, engine, versions: Mapping[str, int | None], kafka: str | None) -> list:
        found = []
        for query_id, version in versions.items():
            try:
                found.append(engine.lineage(query_id, version=version, kafka_bootstrap=kafka))
            except STATEMENT_ERRORS as e:  # dropped since: the lineage of what is left
                self.log.warning("no lineage for %s version %s: %s", query_id, version, e)
        return found


def version_before(engine, query_id: str, version: int) -> int | None:
    """The latest version of ``query_id`` before ``version`` that was not rolled back."""
    earlier = [v for v in engine.versions(query_id) if v["version"] < version]
    return max((v["version"] for v in earlier if v["outcome"] != "ROLLED_BACK"), default=None)
