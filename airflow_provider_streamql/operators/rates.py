"""The operator that changes a live query's rate limit (``ALTER QUERY ... SET|UNSET``), its
statement built from checked parts."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..conditions import QueriesInState, VersionRunning
from ..engine import QueryState
from ..language.statements import AlterQuery
from .base import StreamQLOperator, engine_errors, push


class AlterQueryOperator(StreamQLOperator):
    """``ALTER QUERY <query_id> SET <setting> = <value>`` (``value`` None: ``UNSET``): the
    query's rate limit, changed in place (a new version on the same checkpoint, the
    validator's ``RATE_LIMIT_CHANGED``). Waits until a running query runs the new version
    (ready); a paused one stays paused with it.

    XCom: ``query_id``, ``version``, ``report`` and ``message``. Returns the query ID.

    :param query_id: the query. (templated)
    :param setting: ``max_records_per_batch`` (Kafka sources) or ``max_files_per_batch``
        (file topics). (templated)
    :param value: a whole number above 0, or None to lift the limit. (templated)
    """

    template_fields = ("query_id", "setting", "value", "pipeline")

    def __init__(self, *, query_id: str, setting: str, value: int | str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_id, self.setting, self.value = query_id, setting, value

    def apply(self, context: Context) -> Any:
        value = self.value
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())  # rendered from a template or a param
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise AirflowFailException(f"value must be a whole number above 0 or None, not {self.value!r}")
        engine = self.engine(context)
        with engine_errors():
            result = engine.run([AlterQuery.of(self.query_id, self.setting, value)])[0]
        self.log.info("%s", result.message)
        push(context, query_id=result.query_id, version=result.version, report=result.report, message=result.message)
        if not self.wait or not result.waits:  # unchanged: nothing to wait for
            return self.no_wait(context, engine)
        if (result.query_id, QueryState.RUNNING) in result.waits:
            return self.wait_for(context, engine, VersionRunning(*result.query_version, ready=True))
        return self.wait_for(context, engine, QueriesInState([result.query], [state for _q, state in result.waits]))


__all__ = ["AlterQueryOperator"]
