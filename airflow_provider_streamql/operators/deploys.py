"""Rolling back a whole deploy (what ``DeployScriptOperator`` or ``streamql apply`` applied) as
a task: every query it changed back to its version and snapshot before it, in one step."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..conditions import AllOf, Condition, QueriesInState, VersionRunning
from .base import StreamQLOperator, engine_errors, push


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
        conditions: list[Condition] = [QueriesInState([q], [state]) for q, state in result.waits]
        conditions += [VersionRunning(q, details["restored"][q]) for q in running]
        return self.wait_for(context, engine, AllOf.of(*conditions))

    def result(self, context: Context) -> Any:
        return context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="deploy")


__all__ = ["RollbackDeployOperator"]
