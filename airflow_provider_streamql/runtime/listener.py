"""Reports each committed micro-batch of this runtime's queries to the catalog."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pyspark.sql.streaming import StreamingQueryListener

from ..catalog import Catalog, Progress

log = logging.getLogger(__name__)


class ProgressListener(StreamingQueryListener):
    """A StreamingQueryListener writing per-query progress rows.

    ``owns(name)`` says whether a query (by name, which is its query id) belongs to this
    runtime: several runtimes may share one SparkSession (tests, embedded use).
    """

    def __init__(self, catalog: Catalog, owns: Callable[[str], bool]):
        self.catalog = catalog
        self.owns = owns

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        p = event.progress
        if not p.name or not self.owns(p.name):
            return
        operators = [
            {
                "operator": op.operatorName,
                "rows": op.numRowsTotal,
                "memory_bytes": op.memoryUsedBytes,
                "dropped_by_watermark": op.numRowsDroppedByWatermark,
            }
            for op in p.stateOperators
        ]
        try:
            self.catalog.record_progress(
                Progress(
                    query_id=p.name,
                    batch_id=p.batchId,
                    input_rows=p.numInputRows,
                    total_input_rows=p.numInputRows,
                    rows_per_second=p.processedRowsPerSecond or 0.0,
                    source_offsets=[s.endOffset for s in p.sources],
                    last_batch_at=time.time(),
                    late_rows=sum(op["dropped_by_watermark"] for op in operators),
                    state_rows=sum(op["rows"] for op in operators),
                    state_bytes=sum(op["memory_bytes"] for op in operators),
                    state_operators=operators,
                )
            )
        except Exception:  # a listener must never kill Spark's listener bus
            log.exception("could not record progress of %s", p.name)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass
