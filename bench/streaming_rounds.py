"""Alternating one-batch streaming rounds, for the benchmarks that compare ways of running
the same filter over the same JSON input in one session (``bench/batch_writer.py``,
``bench/guard_stream.py``). Each round reads the whole input as one batch
(``availableNow``) into a fresh output and checkpoint."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter

#: the input's columns: v is id % 97, so ``v > 10`` keeps most rows
SCHEMA = "id INT, v DOUBLE, user STRING"


def json_input(spark: SparkSession, rows: int, root: str) -> str:
    """``rows`` records as JSON files (four) under ``root``; returns their folder."""
    source = os.path.join(root, "source")
    spark.range(0, rows).selectExpr(
        "CAST(id AS INT) AS id", "CAST(id % 97 AS DOUBLE) AS v", "CONCAT('u', id % 1000) AS user"
    ).repartition(4).write.json(source)
    return source


def alternate(
    forms: Sequence[str], rounds: int, root: str, writer: Callable[[str, str], DataStreamWriter]
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """``rounds`` rounds of every form in turn; ``writer(form, out)`` is the form's query up
    to ``start()``. Returns each form's wall times and Spark's ``addBatch`` (ms)."""
    walls: dict[str, list[float]] = {f: [] for f in forms}
    adds: dict[str, list[int]] = {f: [] for f in forms}
    for n in range(rounds):
        for form in forms:
            out = os.path.join(root, f"{form}-{n}")
            os.makedirs(out)
            started = time.perf_counter()
            query = writer(form, out).option("checkpointLocation", out + ".checkpoint")
            query = query.trigger(availableNow=True).start()
            query.awaitTermination()
            walls[form].append(time.perf_counter() - started)
            adds[form].append(query.lastProgress["durationMs"]["addBatch"])
    return walls, adds


def report(walls: dict[str, list[float]], adds: dict[str, list[int]], base: str) -> None:
    """One JSON line per form: wall median and min, addBatch median, ratio to ``base``."""
    reference = statistics.median(walls[base])
    for form, times in walls.items():
        print(
            json.dumps(
                {
                    "form": form,
                    "wall_median_s": round(statistics.median(times), 3),
                    "wall_min_s": round(min(times), 3),
                    "add_batch_median_ms": statistics.median(adds[form]),
                    f"ratio_to_{base.replace('-', '_')}": round(reference / statistics.median(times), 3),
                }
            )
        )
