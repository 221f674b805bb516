"""Operators that end a shadow upgrade (``ReplaceQueryOperator(mode="shadow")`` starts one):
promote the shadow's version in place, or discard it; then, once the shadow has stopped,
drop its output. Statements are built from checked parts."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..conditions import AllOf, Condition, QueriesInState, ShadowReady, VersionRunning
from ..engine import DesiredState, QueryState
from ..errors import ParseError
from ..language.statements import READY_WINDOW, READY_WITHIN, DropSource, ReadyGate, ShadowAction
from ..results import Result
from .base import StreamQLOperator, engine_errors, push
from .lineage import QueryLineageMixin, pulled

#: what each action makes of a shadow
ENDED = {"PROMOTE": "promoted", "DISCARD": "discarded"}
#: the ``ready_gate`` XCom while a promote waits for its readiness gate
READY_WAITING = "waiting"


class ShadowActionOperator(QueryLineageMixin, StreamQLOperator):
    """Base of ``PROMOTE`` and ``DISCARD``: waits until the shadow is TERMINATED (and, for a
    promote, the query runs its new version, ready), then drops the shadow's output and
    checkpoint (``DROP ... DELETE TOPIC``) unless ``keep_shadow_output`` (or ``wait=False``:
    the shadow may still run, so its output stays).

    Safe to retry: a shadow the statement already stopped (the task failed after it) is
    waited for and dropped, not an error.

    XCom: ``query_id`` (the live query), ``shadow_query_id``, ``version`` and ``message``.

    Lineage (with OpenLineage): the shadow's run completes; a promoted version starts a run
    of the live query and completes the one it replaced.

    :param query_id: the query or its shadow. (templated)
    :param keep_shadow_output: leave the shadow's stream or table for a later look.
    """

    action: str = ""
    template_fields: tuple[str, ...] = ("query_id", "pipeline")

    def __init__(self, *, query_id: str, keep_shadow_output: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_id, self.keep_shadow_output = query_id, keep_shadow_output

    #: ``PromoteShadowOperator(when_ready=True)``'s gate; None: act at once
    gate: ReadyGate | None = None

    def apply(self, context: Context) -> Any:
        if self.gate is not None:  # first wait for the shadow to be ready; finish() then acts
            engine = self.engine(context)
            push(context, ready_gate=READY_WAITING)
            condition = ShadowReady(self.query_id.strip().upper(), self.gate.max_lag, self.gate.window)
            return self.wait_for(context, engine, condition, timeout=self.gate.within)
        return self.act(context)

    def act(self, context: Context) -> Any:
        """Run the statement, then wait for its effect (unless ``wait=False``)."""
        engine = self.engine(context)
        with engine_errors():
            statement = ShadowAction.of(self.action, self.query_id)
            result = self._already_done(engine, statement.query_id) or engine.run([statement])[0]
        self.log.info("%s", result.message)
        shadow = next((q for q, state in result.waits if state == QueryState.TERMINATED), None)
        if shadow is None:  # never: PROMOTE and DISCARD always stop the shadow
            raise AirflowFailException(f"{result.statement!r} stopped no shadow: {result.message}")
        push(context, query_id=result.query_id, shadow_query_id=shadow, version=result.version, message=result.message)
        conditions: list[Condition] = [QueriesInState([shadow], [QueryState.TERMINATED])]
        if result.version is not None:  # promoted: the query runs the shadow's version
            conditions.append(VersionRunning(*result.query_version, ready=True))
        if self.wait:
            return self.wait_for(context, engine, AllOf.of(*conditions))
        return self.no_wait(context, engine)

    def _already_done(self, engine, query_id: str) -> Result | None:
        """A retry after the statement committed (the task failed later, e.g. while waiting):
        ``query_id`` names a shadow that was already stopped this way. Then the task only
        waits and drops, as the first try would have."""
        shadow = engine.find_query(query_id)
        if shadow is None or not shadow.settings.get("shadow_of") or shadow.desired_state != DesiredState.TERMINATED:
            return None
        live = engine.query(shadow.settings["shadow_of"])
        promoted = live.version == shadow.settings.get("shadow_version")
        done, wanted = ("promoted" if promoted else "discarded"), ENDED[self.action]
        if done != wanted:
            raise AirflowFailException(
                f"shadow {shadow.id} was {done} already, not {wanted}: {live.id} runs version {live.version}"
            )
        return Result(
            statement=f"{self.action} {shadow.id}",
            message=f"{shadow.id} was {done} already; {live.id} runs version {live.version}",
            query_id=live.id,
            version=live.version if promoted else None,
            waits=[(shadow.id, QueryState.TERMINATED)],
        )

    def deployed_versions(self, task_instance) -> dict[str, int | None]:
        version = pulled(task_instance, "version")  # None unless promoted
        return {pulled(task_instance, "query_id"): version} if version else {}

    def replaced_versions(self, task_instance, engine, deployed) -> dict[str, int]:
        """The shadow's version, and for a promote the live query's version before it."""
        shadow = engine.find_query(pulled(task_instance, "shadow_query_id") or "")
        ended = {shadow.id: shadow.version} if shadow is not None else {}
        return {**ended, **super().replaced_versions(task_instance, engine, deployed)}

    def finish(self, context: Context, event: dict[str, Any]) -> Any:
        ti = context["ti"]
        if ti.xcom_pull(task_ids=ti.task_id, key="ready_gate") == READY_WAITING:  # the gate's wait ended
            readiness = {**event["details"], "message": event["message"]}
            push(context, ready_gate=event["status"], readiness=readiness)
            if event["status"] == "failed":
                raise AirflowFailException(f"the shadow cannot become ready: {event['message']}; nothing was promoted")
            if event["status"] == "timeout":
                raise AirflowException(f"the shadow was not ready: {event['message']}; nothing was promoted")
            self.log.info("%s", event["message"])
            return self.act(context)
        returned = super().finish(context, event)
        if not self.keep_shadow_output:
            shadow = context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="shadow_query_id")
            engine = self.engine(context)
            try:
                with engine_errors():
                    query = engine.query(shadow)
                    kind = "TABLE" if query.kind == "CTAS" else "STREAM"
                    dropped = engine.run([DropSource.of(kind, query.sink, if_exists=True, delete_topic=True)])[0]
                self.log.info("%s", dropped.message)
            finally:
                engine.close()
        return returned


class PromoteShadowOperator(ShadowActionOperator):
    """``PROMOTE <query_id>``: the shadow's version replaces the query's in place (validated
    again), on the query's own checkpoint: nothing lost or read twice.

    With ``when_ready`` (``PROMOTE ... WHEN READY``): first wait (deferred like any wait)
    until the shadow has read every input file the live version has read and its lag has
    stayed at most ``max_lag`` files for ``ready_window`` seconds, at most ``ready_within``
    seconds; if it is not ready by then, or cannot become so, the task fails with the figures
    and nothing is promoted. XCom ``readiness``: the figures the gate passed or failed on.

    :param when_ready: wait for the readiness gate before promoting.
    :param max_lag: the input files the shadow may still have to read. (templated)
    :param ready_within: seconds the gate may wait (default 300).
    :param ready_window: seconds the shadow must stay ready (default 3).
    """

    action = "PROMOTE"
    template_fields = ("query_id", "max_lag", "pipeline")

    def __init__(
        self,
        *,
        when_ready: bool = False,
        max_lag: int | str = 0,
        ready_within: float = READY_WITHIN,
        ready_window: float = READY_WINDOW,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.when_ready, self.max_lag, self.ready_within, self.ready_window = (
            when_ready,
            max_lag,
            ready_within,
            ready_window,
        )

    def apply(self, context: Context) -> Any:
        if self.when_ready:
            max_lag = int(self.max_lag) if str(self.max_lag).strip().isdigit() else self.max_lag  # a template's text
            with engine_errors():
                if not isinstance(max_lag, int) or isinstance(max_lag, bool):
                    raise ParseError(f"max_lag must be a whole number of input files, not {self.max_lag!r}")
                self.gate = ReadyGate(self.ready_within, max_lag, self.ready_window)
        return super().apply(context)


class DiscardShadowOperator(ShadowActionOperator):
    """``DISCARD <query_id>``: stop the shadow; the query keeps its version."""

    action = "DISCARD"


__all__ = ["PromoteShadowOperator", "DiscardShadowOperator"]
