"""Sensors on persistent queries: a state reached, progress made, input caught up, a shadow
ready to be promoted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from ..conditions import CaughtUp, Condition, Ending, ProgressSince, QueriesInState, ShadowReady, WaitEnd, end_of
from ..engine import Engine, QueryState
from ..hooks.streamql import StreamQLHook
from ..language.statements import MAX_READY_WITHIN, READY_WINDOW, ready_gate_problem
from ..operators.base import default_deferrable, defer_until, engine_errors, open_engine, push
from ..triggers.streamql import event_of


class StreamQLSensor(BaseSensorOperator):
    """Base of the streamql sensors: poke a condition, or (``deferrable``) hand it to
    :class:`StreamQLConditionTrigger` until it holds. ``timeout`` and ``poke_interval`` are
    the usual sensor arguments.

    A sensor fails as soon as what it waits for can no longer come true on its own (the query
    is in ERROR, terminated, held at a bad record, or its version was rolled back), with the
    query's state, last error and what to do next; a timeout says what the query was doing.
    Either way it pushes how it ended as the ``wait`` XCom (``ending``: REACHED, FAILED_FAST
    or TIMED_OUT; for a failed one ``query_id``, ``stop``, ``state``, ``error``, ``position``,
    ``advice``).

    :param streamql_conn_id: the ``streamql`` connection.
    :param pipeline: the pipeline ``ALL`` means; default the connection's. (templated)
    :param deferrable: wait in the triggerer instead of holding a worker slot; default
        ``[operators] default_deferrable``.
    :param wait_through_retries: keep waiting while the runtime retries a query in ERROR
        (instead of failing at once).
    """

    template_fields: Sequence[str] = ("pipeline",)
    ui_color = "#d8ecf3"

    def __init__(
        self,
        *,
        streamql_conn_id: str = StreamQLHook.default_conn_name,
        pipeline: str | None = None,
        deferrable: bool | None = None,
        wait_through_retries: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.streamql_conn_id = streamql_conn_id
        self.pipeline = pipeline
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.wait_through_retries = wait_through_retries
        self._looked: Condition | None = None  # poke mode: what the last poke looked at

    def engine(self, context: Context) -> Engine:
        return open_engine(self, context)

    def condition(self, context: Context, engine: Engine) -> Condition:
        raise NotImplementedError

    def poke(self, context: Context) -> bool:
        engine = self.engine(context)
        try:
            with engine_errors():
                self._looked = condition = self.condition(context, engine)
                end = end_of(condition, condition.check(engine), engine, expired=False, timeout=self.timeout)
        finally:
            engine.close()
        if end is None:
            return False
        self._outcome(context, event_of(end))
        return True

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout:
                raise self._timed_out(context) from None
        engine = self.engine(context)
        try:
            with engine_errors():
                condition = self.condition(context, engine)
                end = end_of(condition, condition.check(engine), engine, expired=False, timeout=self.timeout)
        finally:
            engine.close()
        if end is not None:
            return self._outcome(context, event_of(end))
        defer_until(
            self,
            condition,
            pipeline=self.pipeline or engine.pipeline,
            timeout=self.timeout,
            poll_interval=self.poke_interval,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        return self._outcome(context, event)

    def _timed_out(self, context: Context) -> AirflowSensorTimeout:
        """Poke mode's timeout, saying what the queries were doing."""
        condition, end = self._looked, None
        if condition is not None:
            engine = self.engine(context)
            try:
                with engine_errors():
                    end = end_of(condition, condition.check(engine), engine, expired=True, timeout=self.timeout)
            finally:
                engine.close()
        if end is None or end.ending is not Ending.TIMED_OUT:  # it came true, or failed, just now
            end = WaitEnd(Ending.TIMED_OUT, f"timed out after {self.timeout:g}s")
        self.log.info("%s", end.message)
        push(context, wait=end.to_dict())
        return AirflowSensorTimeout(f"{self.task_id} timed out: {end.message}")

    def _outcome(self, context: Context, event: dict[str, Any]) -> Any:
        """Push how the wait ended (``wait``) and what it observed; fail unless it reached
        its goal."""
        self.log.info("%s", event["message"])
        push(context, wait=event.get("wait"))
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(f"{self.task_id} timed out: {event['message']}")
        if event["status"] == "failed":
            raise AirflowFailException(event["message"])
        details = event["details"]
        push(context, **{k: v for k, v in details.items() if k in ("states", "state", "batch_id")})
        return details


class QueryStateSensor(StreamQLSensor):
    """Wait until a query, or ``ALL`` queries of the pipeline, is in one of
    ``target_states``. A query in ERROR fails the sensor unless ERROR is awaited
    (``wait_through_retries=True``, or its older name ``fail_on_error=False``, keeps waiting
    through the runtime's retries instead); so does one terminated or held at a bad record.

    :param query_id: a query ID or ``ALL``. (templated)
    :param target_states: one state or several (RUNNING, PAUSED, TERMINATED, ...). (templated)
    """

    template_fields = ("query_id", "target_states", "pipeline")

    def __init__(
        self,
        *,
        query_id: str,
        target_states: str | Sequence[str] = QueryState.RUNNING,
        fail_on_error: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.query_id = query_id
        self.target_states = target_states
        self.fail_on_error = fail_on_error

    def condition(self, context: Context, engine: Engine) -> Condition:
        states = [self.target_states] if isinstance(self.target_states, str) else list(self.target_states)
        ids = None if self.query_id.strip().upper() == "ALL" else [self.query_id.strip()]
        return QueriesInState(
            ids,
            states,
            pipeline=engine.pipeline,
            fail_on_error=self.fail_on_error,
            through_retries=self.wait_through_retries,
        )


class QueryProgressSensor(StreamQLSensor):
    """Wait for a query's progress: ``caught_up`` (every input record written before the
    sensor started is processed and its output committed), or ``batches`` micro-batches /
    ``rows`` input rows committed since a point: ``since_batch`` / ``since_rows`` (e.g. from
    an upstream task's XCom), default the query's progress when the sensor starts.

    :param query_id: the query. (templated)
    :param caught_up: wait for catch-up instead of a count.
    :param batches: micro-batches to wait for. (templated)
    :param rows: input rows to wait for. (templated)
    :param since_batch: the batch id counting starts after. (templated)
    :param since_rows: the running total of input rows counting starts from. (templated)
    """

    template_fields = ("query_id", "batches", "rows", "since_batch", "since_rows", "pipeline")

    def __init__(
        self,
        *,
        query_id: str,
        caught_up: bool = False,
        batches: int | None = None,
        rows: int | None = None,
        since_batch: int | None = None,
        since_rows: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if caught_up == (batches is not None or rows is not None):
            raise ValueError("QueryProgressSensor: give caught_up=True, or batches and/or rows")
        self.query_id = query_id
        self.caught_up = caught_up
        self.batches, self.rows = batches, rows
        self.since_batch, self.since_rows = since_batch, since_rows
        self._condition: Condition | None = None

    def condition(self, context: Context, engine: Engine) -> Condition:
        # fixed at the first look, so that every later poke measures from the same point
        if self._condition is None:
            if self.caught_up:
                self._condition = CaughtUp(self.query_id.strip().upper(), through_retries=self.wait_through_retries)
            else:
                base = ProgressSince.from_now(
                    engine,
                    self.query_id.strip(),
                    batches=_int(self.batches),
                    rows=_int(self.rows),
                    through_retries=self.wait_through_retries,
                )
                if self.since_batch not in (None, ""):
                    base.since_batch = int(self.since_batch)
                if self.since_rows not in (None, ""):
                    base.since_rows = int(self.since_rows)
                self._condition = base
        return self._condition


class ShadowReadySensor(StreamQLSensor):
    """Wait until a shadow is ready to be promoted (``PROMOTE ... WHEN READY``'s gate,
    Materialize's ``deploy_await``): it has read every input file the live version has read
    and its lag has stayed at most ``max_lag`` input files for ``window`` seconds. A live query
    or shadow that can no longer run on its own, or a shadow promoted or discarded meanwhile,
    fails it; ``timeout`` bounds the wait. Pushes the figures (``live_files``, ``behind``,
    ``lag``, the states) as the sensor's return value.

    :param query_id: the query or its shadow. (templated)
    :param max_lag: the input files the shadow may still have to read. (templated)
    :param window: seconds it must stay ready (default 3).
    """

    template_fields = ("query_id", "max_lag", "pipeline")

    def __init__(self, *, query_id: str, max_lag: int | str = 0, window: float = READY_WINDOW, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_id, self.max_lag, self.window = query_id, max_lag, window
        self._condition: ShadowReady | None = None

    def condition(self, context: Context, engine: Engine) -> Condition:
        # one condition for every poke: it remembers since when the shadow is ready
        if self._condition is None:
            max_lag = int(self.max_lag) if str(self.max_lag).strip().isdigit() else self.max_lag  # a template's text
            problem = ready_gate_problem(MAX_READY_WITHIN, max_lag, self.window)
            if problem or not isinstance(max_lag, int):
                raise AirflowFailException(f"{type(self).__name__}: {problem}")
            self._condition = ShadowReady(
                self.query_id.strip().upper(), max_lag, self.window, through_retries=self.wait_through_retries
            )
        return self._condition


def _int(value: Any) -> int | None:
    return None if value in (None, "") else int(value)
