"""Headless deploys as tasks: applying a deploy file (or only planning it, for an approval),
and rolling a whole deploy back: every query it changed back to its version and snapshot
before it, in one step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..assets.streamql import with_sink_outlets
from ..conditions import AllOf, Condition, QueriesInState, VersionRunning
from ..engine import QueryState
from .base import StreamQLOperator, engine_errors, push
from .lineage import QueryLineageMixin, pulled


class DeployScriptOperator(QueryLineageMixin, StreamQLOperator):
    """Headless deploy: a SQL file is the desired state of the pipeline. Plans it against the
    catalog (create, replace in place, replacing required, unchanged, rejected, and what left
    the file), pushes the plan to XCom as ``plan``, and unless ``plan_only`` applies it: every
    change in one transaction, upstream before downstream, or nothing at all if any statement
    is rejected or needs a replacing upgrade (the task fails with the findings). Untouched
    queries keep running. Then it waits until every created or replaced query runs its new
    version.

    XCom: ``plan`` (and as text, ``plan_text``), ``plan_fingerprint``, ``query_ids`` (created
    or replaced), ``versions``, ``deploy`` (the deploy recorded, for RollbackDeployOperator);
    returns the plan's summary.

    :param sql: the deploy file (a path ending in ``.sql``) or its statements. (templated)
    :param teardown_sql: statements run after a successful apply, e.g. ``TERMINATE`` and
        ``DROP ... DELETE TOPIC`` for what the file no longer declares. (templated)
    :param plan_only: push the plan (each change with what it affects downstream) and its
        ``plan_fingerprint``, and change nothing. Outlets as for CreateQueryOperator (none).
    :param plan_fingerprint: apply only if the plan is still the one with this fingerprint
        (the one approved): else fail, changing nothing. (templated)
    """

    template_fields = ("sql", "teardown_sql", "pipeline", "plan_fingerprint")
    template_ext = (".sql",)
    template_fields_renderers = {"sql": "sql", "teardown_sql": "sql"}

    def __init__(
        self,
        *,
        sql: str,
        teardown_sql: str | None = None,
        plan_only: bool = False,
        plan_fingerprint: str | None = None,
        **kwargs: Any,
    ) -> None:
        with_sink_outlets("" if plan_only else sql, kwargs)
        super().__init__(**kwargs)
        self.sql = sql
        self.teardown_sql = teardown_sql
        self.plan_only = plan_only
        self.plan_fingerprint = plan_fingerprint

    def apply(self, context: Context) -> Any:
        engine = self.engine(context)
        with engine_errors():
            deploy_plan = engine.plan(self.sql)
            self.log.info("Deploy plan:\n%s", deploy_plan.render())
            push(
                context,
                plan=deploy_plan.to_dict(),
                plan_text=deploy_plan.render(),
                plan_fingerprint=deploy_plan.fingerprint,
            )
            if self.plan_only:
                return self._summary(context, engine, deploy_plan)
            approved = (self.plan_fingerprint or "").strip() or None  # rendered from a template: "" is none
            _plan, results = engine.apply(self.sql, teardown=self.teardown_sql or None, plan_fingerprint=approved)
        for r in results:
            self.log.info("%s", r.message)
        changed = [r for r in results if r.query_id and r.action in ("created", "replaced")]
        push(
            context,
            query_ids=[r.query_id for r in changed],
            query_id=changed[-1].query_id if changed else None,
            versions={r.query_id: r.version for r in changed},
            deploy=next((r.details["deploy"] for r in results if "deploy" in r.details), None),
        )
        running = [r for r in changed if (r.query_id, QueryState.RUNNING) in r.waits]
        if self.wait and running:
            return self.wait_for(
                context,
                engine,
                AllOf.of(
                    QueriesInState([r.query for r in running], [QueryState.RUNNING]),
                    *[VersionRunning(*r.query_version) for r in running if r.action == "replaced"],
                ),
            )
        return self._summary(context, engine, deploy_plan)

    def _summary(self, context: Context, engine, deploy_plan) -> Any:
        self.no_wait(context, engine)
        return deploy_plan.to_dict()["summary"]

    def result(self, context: Context) -> Any:
        return context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="plan")["summary"]

    def deployed_versions(self, task_instance) -> Mapping[str, int | None]:
        return dict(pulled(task_instance, "versions") or {})


class RollbackDeployOperator(StreamQLOperator):
    """Roll back deploy ``deploy_id`` (``streamql deploys`` lists them; DeployScriptOperator
    pushes its ``deploy``): each query it upgraded returns to its version before and to the
    snapshot the deploy took of its checkpoint (with the queries reading its output), and each
    query it created is terminated (its output kept). All or nothing: if any change cannot be
    undone (a newer version since, a dropped source, a snapshot gone, a query created since
    reading what the deploy created) the task fails naming each query and why, and nothing
    changes. Then it waits until the queries run their versions before it.

    XCom: ``deploy``, ``restored`` (query -> its version now), ``terminated``, ``query_ids``,
    ``message``; returns the deploy's id.

    :param deploy_id: the deploy; None, ``""`` or ``"last"``: the pipeline's newest one not
        rolled back. (templated)
    """

    template_fields = ("deploy_id", "pipeline")

    def __init__(self, *, deploy_id: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deploy_id = deploy_id

    def apply(self, context: Context) -> Any:
        number = self.deploy_id
        if isinstance(number, str):  # rendered from a template or a param
            text = number.strip()
            number = None if text in ("", "last", "None") else int(text) if text.isdigit() else number
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            raise AirflowFailException(f"deploy_id must be a deploy's number or 'last', not {self.deploy_id!r}")
        engine = self.engine(context)
        try:
            with engine_errors():
                result = engine.rollback(number, timeout=self.timeout)
        except BaseException:
            engine.close()
            raise
        self.log.info("%s", result.message)
        details = result.details
        touched = [*details["restored"], *details["terminated"]]
        push(
            context,
            deploy=details["deploy"],
            restored=details["restored"],
            terminated=details["terminated"],
            query_ids=touched,
            query_id=touched[0] if touched else None,
            message=result.message,
        )
        if not self.wait or not result.waits:
            return self.no_wait(context, engine)
        running = [q for q, state in result.waits if state == "RUNNING"]
        conditions: list[Condition] = [*QueriesInState.by_state(result.waits)]
        conditions += [VersionRunning(q, details["restored"][q]) for q in running]
        return self.wait_for(context, engine, AllOf.of(*conditions))

    def result(self, context: Context) -> Any:
        return context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="deploy")


__all__ = ["DeployScriptOperator", "RollbackDeployOperator"]
