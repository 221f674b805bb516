"""What every streamql operator shares: the connection, the issuer, and waiting on a
condition either in the worker or deferred to the triggerer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import conf
from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..conditions import Condition, end_of
from ..engine import Engine
from ..errors import CatalogError, NotFoundError, ParseError, StateError, StreamQLError, ValidationError
from ..hooks.streamql import StreamQLHook
from ..triggers.streamql import StreamQLConditionTrigger, check_seconds, event_of
from .links import LINK_KEYS, SparkUILink, StreamQLQueryLink

# Errors in what the task asked for: retrying cannot help, so the task fails at once.
STATEMENT_ERRORS = (ParseError, ValidationError, NotFoundError, StateError)


def default_deferrable() -> bool:
    """Whether an operator or sensor waits in the triggerer when its DAG does not say:
    ``[operators] default_deferrable``, as every provider's operators take it (true when a
    configuration has no such option). Airflow ships it false: set it true (the compose stack
    does) so that waits of minutes (a query started, upgraded, caught up) hold no worker slot."""
    return conf.getboolean("operators", "default_deferrable", fallback=True)


def _seconds(argument: str, value: float | None, option: str, default: float) -> float:
    """A wait's ``argument``, else ``[streamql] <option>``: a positive, finite number of
    seconds (a NaN deadline never passes, a negative one at once), or ValueError naming it."""
    where = f"{argument}={value!r}" if value is not None else f"[streamql] {option}"
    return check_seconds(conf.getfloat("streamql", option, fallback=default) if value is None else value, where)


def issuer_of(context: Context) -> str:
    """Who issues a task's statements, for the command log."""
    ti = context["ti"]
    return f"airflow:dag={ti.dag_id}/run={ti.run_id}/task={ti.task_id}"


@contextmanager
def engine_errors() -> Iterator[None]:
    """Turn engine errors into task failures that carry the engine's message: a statement
    error fails without retries, a catalog that cannot be reached may be retried."""
    try:
        yield
    except STATEMENT_ERRORS as e:
        raise AirflowFailException(str(e)) from e
    except (CatalogError, StreamQLError) as e:
        raise AirflowException(str(e)) from e


def open_engine(task, context: Context) -> Engine:
    """The engine of ``task``'s connection, issuing as the task (operators and sensors)."""
    with engine_errors():
        return StreamQLHook(task.streamql_conn_id).get_engine(issuer=issuer_of(context), pipeline=task.pipeline or None)


def defer_until(task, condition: Condition, *, pipeline: str, timeout: float, poll_interval: float):
    """Hand ``condition`` to the trigger; ``execute_complete`` resumes ``task``. The trigger
    keeps the deadline; Airflow's own deferral timeout is a minute later, a safety net."""
    task.defer(
        trigger=StreamQLConditionTrigger(
            condition=condition.to_dict(),
            streamql_conn_id=task.streamql_conn_id,
            end_at=time.time() + timeout,
            poll_interval=poll_interval,
            pipeline=pipeline,
        ),
        method_name="execute_complete",
        timeout=timedelta(seconds=timeout + 60),
    )


class StreamQLOperator(BaseOperator):
    """Base of the streamql operators.

    :param streamql_conn_id: the ``streamql`` connection (catalog, home, pipeline).
    :param pipeline: the pipeline new queries join and ``ALL`` means; default the
        connection's. (templated)
    :param wait: wait until observed state shows the change took effect.
    :param deferrable: wait in the triggerer instead of holding a worker slot; default
        ``[operators] default_deferrable``.
    :param timeout: seconds the wait may take before the task fails; default
        ``[streamql] wait_timeout`` (600).
    :param poll_interval: seconds between looks at the catalog while waiting; default
        ``[streamql] poll_interval`` (2).
    :param wait_through_retries: keep waiting while the runtime retries a query in ERROR,
        instead of failing at once (a query terminated, held at a bad record or whose new
        version was rolled back fails the wait either way).
    """

    template_fields: tuple[str, ...] = ("pipeline",)
    operator_extra_links: tuple[Any, ...] = (StreamQLQueryLink(), SparkUILink())
    ui_color = "#d8ecf3"

    def __init__(
        self,
        *,
        streamql_conn_id: str = StreamQLHook.default_conn_name,
        pipeline: str | None = None,
        wait: bool = True,
        deferrable: bool | None = None,
        timeout: float | None = None,
        poll_interval: float | None = None,
        wait_through_retries: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.wait_through_retries = wait_through_retries
        self.streamql_conn_id = streamql_conn_id
        self.pipeline = pipeline
        self.wait = wait
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.timeout = _seconds("timeout", timeout, "wait_timeout", 600.0)
        self.poll_interval = _seconds("poll_interval", poll_interval, "poll_interval", 2.0)

    def execute(self, context: Context) -> Any:
        # the links read these keys; until the task knows better they are empty (set here,
        # not in pre_execute, which runs again when a deferred task resumes)
        push(context, **{key: None for key in LINK_KEYS})
        return self.apply(context)

    def apply(self, context: Context) -> Any:
        """Do the operator's work (``execute`` without the bookkeeping)."""
        raise NotImplementedError

    def engine(self, context: Context) -> Engine:
        return open_engine(self, context)

    def wait_for(self, context: Context, engine: Engine, condition: Condition, timeout: float | None = None) -> Any:
        """Wait for ``condition`` (at most ``timeout`` seconds, default the operator's), then
        :meth:`finish`. Deferred, this never returns:
        :meth:`execute_complete` resumes the task when the trigger fires. Either way the wait
        ends as every wait ends (:func:`~..conditions.end_of`): reached, failed fast (the
        query can no longer get there on its own) or timed out."""
        timeout = self.timeout if timeout is None else timeout
        if self.wait_through_retries:
            condition = condition.through_retries_too()
        try:
            with engine_errors():
                if self.deferrable:
                    # often true already (or failed): no need to defer
                    end = end_of(condition, condition.check(engine), engine, expired=False, timeout=timeout)
                    if end is None:
                        push_spark_ui(context, engine)
                        defer_until(
                            self,
                            condition,
                            pipeline=self.pipeline or engine.pipeline,
                            timeout=timeout,
                            poll_interval=self.poll_interval,
                        )
                else:
                    end = engine.wait_end(condition, timeout=timeout, poll=self.poll_interval)
        finally:
            engine.close()
        assert end is not None, "a deferred wait resumes in execute_complete"
        return self.finish(context, event_of(end))

    def no_wait(self, context: Context, engine: Engine) -> Any:
        """Return without waiting (``wait=False``)."""
        try:
            push_spark_ui(context, engine)
        finally:
            engine.close()
        return self.result(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resume after the trigger fired."""
        return self.finish(context, event)

    def finish(self, context: Context, event: dict[str, Any]) -> Any:
        """Push how the wait ended (``wait``: its ``ending`` and, failed fast, the query's
        state, last error, position and advice); fail on a failed or timed-out wait; else push
        what the wait observed and return what the operator returns. Subclasses add their
        own XCom values."""
        push(context, wait=event.get("wait"))
        if event["status"] == "failed":
            raise AirflowFailException(event["message"])
        if event["status"] == "timeout":
            raise AirflowException(f"timed out: {event['message']}")
        if event["message"]:
            self.log.info("%s", event["message"])
        states = event["details"].get("states")
        if states:
            push(context, states=states, state=next(iter(states.values())) if len(states) == 1 else None)
        elif "state" in event["details"]:
            push(context, state=event["details"]["state"])
        return self.no_wait(context, self.engine(context))

    def result(self, context: Context) -> Any:
        return context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="query_id")

    def on_kill(self) -> None:
        """Killing the task never touches the pipeline: desired state already written
        stays, and no running query is stopped."""


def push(context: Context, **values: Any) -> None:
    for key, value in values.items():
        context["ti"].xcom_push(key=key, value=value)


def push_spark_ui(context: Context, engine: Engine) -> None:
    """The Spark UI of the runtime that holds the task's query, for :class:`SparkUILink`
    (None when unknown, so the link finds its XCom)."""
    query_id = context["ti"].xcom_pull(task_ids=context["ti"].task_id, key="query_id")
    url = engine.spark_ui_url(query_id) if query_id and query_id != "ALL" else None
    push(context, spark_ui_url=url)
