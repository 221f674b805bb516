"""Rows of a query's state, read with Spark's State Data Source (``format("statestore")``)
from its checkpoint as of the last committed batch: committed state files never change, so
this reads a live query's checkpoint as safely as a stopped one's."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from ..storage.checkpoints import last_committed_batch
from ..storage.state import StateOperator

STATE_COLUMNS = ["operator", "store", "partition", "key", "value"]


def state_rows(spark: SparkSession, checkpoint: str, operators: list[StateOperator], limit: int) -> list[list[Any]]:
    """Up to ``limit`` rows per operator (per side of a join): operator, store, partition,
    key and value (as JSON text)."""
    batch = last_committed_batch(checkpoint)
    rows: list[list[Any]] = []
    for op in operators:
        joins = op.name.startswith("symmetricHashJoin")
        for part in ("left", "right") if joins else ("default",):
            reader = spark.read.format("statestore").option("operatorId", op.operator_id).option("batchId", batch)
            if joins:
                reader = reader.option("joinSide", part)
            frame = reader.load(checkpoint).orderBy("partition_id").limit(limit)
            for r in frame.collect():
                rows.append([op.operator_id, part, r["partition_id"], _json(r["key"]), _json(r["value"])])
    return rows


def read_state(checkpoint: str, operators: list[StateOperator], limit: int) -> tuple[list[str], list[list[Any]]]:
    """DESCRIBE ... STATE's reader (:data:`~..views.describe.StateReader`): the columns and
    :func:`state_rows` of ``checkpoint``, on :func:`state_session`."""
    return STATE_COLUMNS, state_rows(state_session(), checkpoint, operators, limit)


def state_session() -> SparkSession:
    """The process's Spark session (a runtime's, when one runs here), else a small local one."""
    from .session import build_session

    return SparkSession.getActiveSession() or build_session("local[1]", "streamql-state", {"spark.ui.enabled": "false"})


def _json(row) -> str:
    return json.dumps(row.asDict(recursive=True) if row is not None else None, default=str, sort_keys=False)
