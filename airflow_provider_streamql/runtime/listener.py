"""Reports each committed micro-batch of this runtime's queries to the catalog."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from ..catalog import Catalog, Progress
from .expectations import Violations
from .file_dead_letters import BadCounts

log = logging.getLogger(__name__)


class ProgressListener(StreamingQueryListener):
    """A StreamingQueryListener writing per-query progress rows.

    ``owns(name)`` says whether a query (by name, which is its query id) belongs to this
    runtime: several runtimes may share one SparkSession (tests, embedded use).

    Each progress event reaches Python as one JSON document (:class:`_ProgressJson`):
    pyspark's own wrapper builds its event object field by field, some forty calls into
    the JVM per batch, which a runtime serving many queries paid on Spark's listener thread
    for every batch of every query.
    """

    def __init__(self, catalog: Catalog, owns: Callable[[str], bool]):
        self.catalog = catalog
        self.owns = owns
        #: query id -> Spark's rates and duration of its last micro-batch here (the metrics)
        self.latest: dict[str, dict[str, float]] = {}
        #: the rows each query's expectation found violating, by batch (its batch writer's count)
        self.violations = Violations()
        #: the bad records each batch's file reads left out (LOG_AND_CONTINUE), by query and batch
        self.bad_counts = BadCounts()

    @property
    def _jlistener(self):
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            assert jvm is not None, "a listener is added to a running SparkSession"
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_ProgressJson(self))
        return self._jlistenerobj

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:  # not called: see _ProgressJson
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def record(self, p: dict[str, Any]) -> None:
        """Store one progress report (Spark's ``StreamingQueryProgress.json``) of a query
        of this runtime."""
        if not p.get("name") or not self.owns(p["name"]):
            return
        try:
            self.bad_counts.report(p["name"], p["batchId"], p.get("observedMetrics"), p.get("numInputRows"))
        except Exception:  # a listener must never kill Spark's listener bus
            log.exception("could not read the bad-record count of %s", p["name"])
        self.latest[p["name"]] = {  # Spark leaves a NaN or infinite rate out of the JSON
            "inputRowsPerSecond": p.get("inputRowsPerSecond", 0.0),
            "processedRowsPerSecond": p.get("processedRowsPerSecond", 0.0),
            "batchDuration": p.get("batchDuration", p.get("durationMs", {}).get("triggerExecution", 0)),
        }
        operators = [
            {
                "operator": op["operatorName"],
                "rows": op["numRowsTotal"],
                "memory_bytes": op["memoryUsedBytes"],
                "dropped_by_watermark": op.get("numRowsDroppedByWatermark", 0),
            }
            for op in p.get("stateOperators", [])
        ]
        try:
            self.catalog.observed.record_progress(
                Progress(
                    query_id=p["name"],
                    batch_id=p["batchId"],
                    input_rows=p["numInputRows"],
                    total_input_rows=p["numInputRows"],
                    # Spark leaves a NaN or infinite rate out of the JSON
                    rows_per_second=p.get("processedRowsPerSecond", 0.0),
                    source_offsets=[_offset(s.get("endOffset")) for s in p.get("sources", [])],
                    last_batch_at=time.time(),
                    late_rows=sum(op["dropped_by_watermark"] for op in operators),
                    state_rows=sum(op["rows"] for op in operators),
                    state_bytes=sum(op["memory_bytes"] for op in operators),
                    state_operators=operators,
                    violations=self.violations.take_count(p["name"], p["batchId"]),
                )
            )
        except Exception:  # a listener must never kill Spark's listener bus
            log.exception("could not record progress of %s", p["name"])


class _ProgressJson:
    """The Java listener interface pyspark's wrapper calls, handing each progress event to
    :meth:`ProgressListener.record` as parsed JSON (two calls into the JVM per batch)."""

    def __init__(self, listener: ProgressListener):
        self.listener = listener

    def onQueryStarted(self, jevent) -> None:
        pass

    def onQueryProgress(self, jevent) -> None:
        try:
            self.listener.record(json.loads(jevent.progress().json()))
        except Exception:  # a listener must never kill Spark's listener bus
            log.exception("could not read a progress event")

    def onQueryIdle(self, jevent) -> None:
        pass

    def onQueryTerminated(self, jevent) -> None:
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _offset(value: Any) -> str | None:
    """An offset as Spark's SourceProgress gives it: its JSON text."""
    return value if value is None or isinstance(value, str) else json.dumps(value, separators=(",", ":"))
