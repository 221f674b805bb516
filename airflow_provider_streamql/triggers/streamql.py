"""The trigger behind every deferrable streamql wait: poll a condition in the catalog."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..conditions import Condition, Ending, WaitEnd, end_of


class StreamQLConditionTrigger(BaseTrigger):
    """Fire once ``condition`` (a :class:`~airflow_provider_streamql.conditions.Condition`
    as a dict) is met, can no longer be met, or ``end_at`` (epoch seconds) passes.

    The event's payload is ``{"status": "done"|"failed"|"timeout", "message", "details",
    "wait"}``: ``wait`` is how the wait ended (:class:`~..conditions.WaitEnd` as a dict: its
    ``ending`` REACHED, FAILED_FAST or TIMED_OUT, and for a failed one the query's state,
    last error, position and advice). It fails as soon as the condition can no longer come
    true on its own (the decision every wait form shares, :func:`~..conditions.end_of`).
    The deadline is absolute so that it survives the trigger being serialised and resumed
    elsewhere, and it is enforced here because ``dag.test()`` runs triggers without one.
    """

    def __init__(
        self,
        *,
        condition: dict[str, Any],
        streamql_conn_id: str,
        end_at: float,
        poll_interval: float = 2.0,
        pipeline: str | None = None,
    ):
        super().__init__()
        self.condition = condition
        self.streamql_conn_id = streamql_conn_id
        self.end_at = end_at
        self.poll_interval = poll_interval
        self.pipeline = pipeline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "condition": self.condition,
                "streamql_conn_id": self.streamql_conn_id,
                "end_at": self.end_at,
                "poll_interval": self.poll_interval,
                "pipeline": self.pipeline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        condition = Condition.from_dict(self.condition)
        engine = await engine_of(self.streamql_conn_id, pipeline=self.pipeline)
        timeout = round(max(0.0, self.end_at - time.time()))  # what is left of it, when resumed
        try:
            while True:
                try:
                    check = await asyncio.to_thread(condition.check, engine)
                    expired = time.time() >= self.end_at
                    end = await asyncio.to_thread(end_of, condition, check, engine, expired=expired, timeout=timeout)
                except Exception as e:  # e.g. the query was dropped: say so, do not hang
                    yield TriggerEvent(event_of(WaitEnd(Ending.FAILED_FAST, str(e))))
                    return
                if end is not None:
                    yield TriggerEvent(event_of(end))
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            engine.close()


#: the event's status for each ending (as the trigger has always said it)
STATUSES = {Ending.REACHED: "done", Ending.FAILED_FAST: "failed", Ending.TIMED_OUT: "timeout"}


def event_of(end: WaitEnd) -> dict[str, Any]:
    """The trigger's event payload for how the wait ended."""
    return {"status": STATUSES[end.ending], "message": end.message, "details": end.details, "wait": end.to_dict()}


def check_seconds(value: object, where: str) -> float:
    """``value`` as a positive, finite number of seconds (a NaN deadline never passes, a
    negative one at once), or ValueError naming ``where`` it came from."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{where} must be a positive number of seconds, not {value!r}")
    return value


async def engine_of(streamql_conn_id: str, pipeline: str | None = None):
    """The engine of a connection, opened without blocking the triggerer's event loop."""
    from ..hooks.streamql import StreamQLHook

    conn = await _connection(streamql_conn_id)
    return await asyncio.to_thread(StreamQLHook.engine_for, conn, pipeline=pipeline)


async def _connection(conn_id: str):
    """The connection, looked up without blocking the triggerer's event loop. Under
    ``dag.test()`` the async lookup sees only environment connections, so fall back to the
    synchronous one in a thread."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException
    from asgiref.sync import sync_to_async

    try:
        return await BaseHook.aget_connection(conn_id)
    except AirflowNotFoundException:
        return await sync_to_async(BaseHook.get_connection)(conn_id)
