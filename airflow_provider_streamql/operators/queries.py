"""Operators for the lifecycle of persistent queries: create, validate, replace, pause,
resume, terminate. Each changes desired state through the engine, then (by default) waits,
deferred, until observed state shows the change, and pushes what it did to XCom."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..assets.streamql import with_sink_outlets
from ..conditions import Condition, QueriesInState, VersionRunning
from ..engine import VERDICTS, QueryState
from .base import StreamQLOperator, engine_errors, push
from .deploys import DeployScriptOperator  # where DAGs written before it moved import it from
from .lineage import QueryLineageMixin, pulled

MODES = ("in_place", "replacing", "shadow")


class CreateQueryOperator(QueryLineageMixin, StreamQLOperator):
    """Apply a StreamQL script: streams, tables and the persistent queries that fill them.

    The script is validated whole before any of it is applied. Applying an unchanged
    script again changes nothing (each statement whose object exists as defined is
    reported ``unchanged``), so the task can run on every schedule. It waits until every
    query the script created is RUNNING.

    XCom: ``query_ids`` (the script's persistent queries, created or unchanged),
    ``query_id`` (the last of them), ``version``, ``versions``, ``actions`` (per statement)
    and, after the wait, ``states``. Returns the list of query IDs.

    Outlets: the streams and tables the script writes (``streamql://<conn>/<NAME>`` Assets),
    when ``sql`` is statements known when the DAG is parsed; give ``outlets`` for a file.

    :param sql: StreamQL statements, or a path ending in ``.sql``. (templated)
    """

    template_fields = ("sql", "pipeline")
    template_ext = (".sql",)
    template_fields_renderers = {"sql": "sql"}

    def __init__(self, *, sql: str, **kwargs: Any) -> None:
        with_sink_outlets(sql, kwargs)
        super().__init__(**kwargs)
        self.sql = sql

    def apply(self, context: Context) -> Any:
        engine = self.engine(context)
        with engine_errors():
            results = engine.execute(self.sql, skip_unchanged=True)
        for r in results:
            self.log.info("%s", r.render() or r.message)
        queries = [r for r in results if r.query_id and r.action]
        push(
            context,
            query_ids=[r.query_id for r in queries],
            query_id=queries[-1].query_id if queries else None,
            version=queries[-1].version if queries else None,
            versions={r.query_id: r.version for r in queries},
            actions=[{"statement": r.statement.strip(), "action": r.action, "query_id": r.query_id} for r in results],
        )
        created = [r.query for r in queries if r.action == "created"]
        if self.wait and created:
            return self.wait_for(context, engine, QueriesInState(created, [QueryState.RUNNING]))
        return self.no_wait(context, engine)

    def result(self, context: Context) -> Any:
        return context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="query_ids")

    def deployed_versions(self, task_instance) -> Mapping[str, int | None]:
        versions = pulled(task_instance, "versions") or {}
        changed = {a["query_id"] for a in pulled(task_instance, "actions") or [] if a["action"] != "unchanged"}
        return {q: v for q, v in versions.items() if q in changed}


class ValidateUpgradeOperator(StreamQLOperator):
    """The validation gate: what would ``CREATE OR REPLACE`` of a query do? Changes nothing.

    The report (traits, upgrade kinds, verdict, one finding per difference) is written to
    the task log and pushed to XCom as ``report``; the task returns the verdict
    (``IN_PLACE``, ``REPLACING_REQUIRED`` or ``REJECTED``), so a branch can follow it.

    :param sql: one ``CREATE [OR REPLACE] STREAM|TABLE ... AS SELECT``, or ``CREATE [OR
        REPLACE] STREAM|TABLE s (columns)`` of a declared source (the report's ``source`` is
        set; XCom ``query_id`` and ``version`` are None). (templated)
    :param query_id: the query it must replace (checked when given). (templated)
    :param fail_on: verdicts that fail the task; ``()`` lets every verdict through for
        branching. Default: anything that is not IN_PLACE fails.
    :param dry_run: also run the new version on a copy of the checkpoint with local Spark
        in the worker, so Spark's own checks have their say (takes a SparkSession).
    :param dry_run_master: Spark master for the dry run.
    """

    template_fields = ("sql", "query_id", "pipeline", "dry_run")
    template_ext = (".sql",)
    template_fields_renderers = {"sql": "sql"}

    def __init__(
        self,
        *,
        sql: str,
        query_id: str | None = None,
        fail_on: Sequence[str] = ("REPLACING_REQUIRED", "REJECTED"),
        dry_run: bool = False,
        dry_run_master: str = "local[1]",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("wait", False)
        super().__init__(**kwargs)
        unknown = [v for v in fail_on if v not in VERDICTS]
        if unknown:
            raise ValueError(f"fail_on: unknown verdict(s) {unknown!r} (verdicts: {', '.join(VERDICTS)})")
        self.sql = sql
        self.query_id = query_id
        self.fail_on = tuple(fail_on)
        # a templated field, so an attribute of its name: it hides BaseOperator.dry_run(), which
        # renders templates only (this operator's own dry run is a Spark run, never that)
        self.dry_run = dry_run  # type: ignore[assignment,method-assign]
        self.dry_run_master = dry_run_master

    def apply(self, context: Context) -> str:
        engine = self.engine(context)
        query_id = self.query_id or None
        with engine_errors():
            if self.dry_run in (True, "True", "true"):
                report = self._dry_run(engine, query_id)
            else:
                report = engine.validate(self.sql, query_id=query_id)
        self.log.info("Validation report:\n%s", report.render())
        # a source change (CREATE OR REPLACE STREAM s (...)) has no query and no version
        version = engine.query(report.query_id).version if report.query_id else None
        push(context, report=report.to_dict(), query_id=report.query_id, version=version, verdict=report.verdict)
        self.no_wait(context, engine)
        if report.verdict in self.fail_on:
            findings = "; ".join(f"{f.code}: {f.message}" for f in report.findings if f.verdict == report.verdict)
            subject = report.query_id or report.source
            raise AirflowFailException(f"{subject}: the upgrade is {report.verdict}: {findings}")
        return report.verdict

    def _dry_run(self, engine, query_id):
        # the engine makes a local session on dry_run_master for the run, or shares the
        # session of a worker process that already runs Spark (never stopping it)
        return engine.dry_run(self.sql, query_id=query_id, master=self.dry_run_master)


class ReplaceQueryOperator(QueryLineageMixin, StreamQLOperator):
    """Upgrade a running query to a new definition.

    ``mode="in_place"`` (default): CREATE OR REPLACE behind the validator, keeping the
    query ID and checkpoint; fails with the findings unless the verdict is IN_PLACE. It
    waits until the new version is ready (committed a batch, or its readiness window passed)
    and fails with the reason if the runtime rolled it back.

    ``mode="replacing"``: for what cannot be done in place: terminate the query, drop its
    output, and create it again reading from ``start_from``. The new query has a new ID; it
    waits until it is RUNNING.

    ``mode="shadow"``: the new version starts beside the query on a copy of its checkpoint,
    writing ``<OUTPUT>_SHADOW`` (``WITH (shadow=true)``); the query keeps serving. It waits
    until the shadow is RUNNING and pushes its ID as ``shadow_query_id``; promote or discard
    it with :class:`~.shadows.PromoteShadowOperator` / ``DiscardShadowOperator``.

    XCom: ``query_id`` (the new ID when replacing), ``version``, ``previous_version``,
    ``previous_query_id``, ``report`` (in place) and ``state``. Returns the query ID.

    :param sql: one ``CREATE [OR REPLACE] STREAM|TABLE ... AS SELECT``. (templated)
    :param query_id: the query it must replace (checked when given). (templated)
    :param mode: ``in_place``, ``replacing`` or ``shadow``. (templated)
    :param start_from: where a replacing upgrade reads from: ``earliest``; the statement's own
        ``WITH (start = ...)`` takes precedence. (templated)

    Outlets as for :class:`CreateQueryOperator` when ``mode`` is not a shadow (nor templated).
    """

    template_fields = ("sql", "query_id", "mode", "start_from", "pipeline")
    template_ext = (".sql",)
    template_fields_renderers = {"sql": "sql"}

    def __init__(
        self,
        *,
        sql: str,
        query_id: str | None = None,
        mode: str = "in_place",
        start_from: str = "earliest",
        **kwargs: Any,
    ) -> None:
        with_sink_outlets(sql if mode in ("in_place", "replacing") else "", kwargs)  # not a shadow, nor a template
        super().__init__(**kwargs)
        self.sql = sql
        self.query_id = query_id
        self.mode = mode
        self.start_from = start_from

    def apply(self, context: Context) -> Any:
        if self.mode not in MODES:
            raise AirflowFailException(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        engine = self.engine(context)
        with engine_errors():
            old = engine.writer_of(self.sql, query_id=self.query_id or None)
            previous = engine.query(old).version if old else None
            if self.mode == "in_place":
                result = engine.upgrade(self.sql, query_id=self.query_id or None)
                condition: Condition = VersionRunning(*result.query_version, ready=True)
                push(context, report=result.report)
            elif self.mode == "shadow":
                result = engine.upgrade(self.sql, query_id=self.query_id or None, shadow=True)
                condition = QueriesInState([result.query], [QueryState.RUNNING])
                push(context, report=result.report, shadow_query_id=result.query_id, shadow_version=result.version)
                result = dataclasses.replace(result, query_id=old, version=previous)  # the query it shadows
            else:
                result = engine.replace(self.sql, start_from=self.start_from, query_id=self.query_id or None)[-1]
                condition = QueriesInState([result.query], [QueryState.RUNNING])
        self.log.info("%s", result.message)
        push(
            context,
            query_id=result.query_id,
            version=result.version or 1,
            previous_query_id=old,
            previous_version=previous,
        )
        if self.wait:
            return self.wait_for(context, engine, condition)
        return self.no_wait(context, engine)

    def deployed_versions(self, task_instance) -> Mapping[str, int | None]:
        shadow = pulled(task_instance, "shadow_query_id")
        if shadow:  # a query of its own, at its first version
            return {shadow: None}
        query_id = pulled(task_instance, "query_id")
        return {query_id: pulled(task_instance, "version")} if query_id else {}

    def replaced_versions(self, task_instance, engine, deployed) -> dict[str, int]:
        """The version upgraded in place, or the query rebuilt (a shadow ends nothing)."""
        previous = pulled(task_instance, "previous_query_id")
        if pulled(task_instance, "shadow_query_id") or not previous:
            return {}
        return {previous: pulled(task_instance, "previous_version")}


class QueryControlOperator(StreamQLOperator):
    """Base of PAUSE, RESUME and TERMINATE: one query ID, or ``ALL`` queries of the
    pipeline. Waits until each reaches the target state.

    XCom: ``query_id`` (as given), ``query_ids`` (the queries it acted on) and, after the
    wait, ``states`` (and ``state`` for one query).

    :param query_id: a query ID, or ``ALL``. (templated)
    """

    action: str = ""
    target: str = ""
    template_fields = ("query_id", "pipeline")

    def __init__(self, *, query_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_id = query_id

    def apply(self, context: Context) -> Any:
        if not isinstance(self.query_id, str) or not self.query_id.strip():
            raise AirflowFailException(f"{type(self).__name__}: query_id is {self.query_id!r}; give a query ID or ALL")
        engine = self.engine(context)
        with engine_errors():
            # one statement built from checked parts: a query_id is a name, never SQL text
            result = engine.control(
                self.action, self.query_id.strip(), skip_bad_records=getattr(self, "skip_bad_records", False)
            )
        self.log.info("%s", result.message)
        ids = [q for q, _state in result.waits]
        push(context, query_id=self.query_id.strip().upper(), query_ids=ids)
        if self.wait:
            return self.wait_for(context, engine, QueriesInState(ids, [self.target]))
        return self.no_wait(context, engine)


class PauseQueryOperator(QueryControlOperator):
    """``PAUSE <query_id>|ALL``: stop after the in-flight micro-batch, keeping offsets and
    state; RESUME continues from there."""

    action, target = "PAUSE", QueryState.PAUSED


class ResumeQueryOperator(QueryControlOperator):
    """``RESUME <query_id>|ALL``: restart paused queries from their checkpoints.

    A query held by bad records (policy PAUSE) retries the batch that held it, e.g. after
    its source was widened; with ``skip_bad_records`` the batch is reprocessed without the
    recorded bad records, which go to the query's dead-letter stream.

    :param skip_bad_records: ``RESUME ... SKIP BAD RECORDS``.
    """

    action, target = "RESUME", QueryState.RUNNING

    def __init__(self, *, skip_bad_records: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.skip_bad_records = skip_bad_records


class TerminateQueryOperator(QueryControlOperator):
    """``TERMINATE <query_id>|ALL``: stop for good (a terminated query cannot be resumed)."""

    action, target = "TERMINATE", QueryState.TERMINATED


__all__ = [
    "CreateQueryOperator",
    "DeployScriptOperator",
    "ValidateUpgradeOperator",
    "ReplaceQueryOperator",
    "PauseQueryOperator",
    "ResumeQueryOperator",
    "TerminateQueryOperator",
]
