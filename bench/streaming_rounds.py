"""Alternating one-batch streaming rounds, for the benchmarks that compare ways of running
the same filter over the same JSON input in one session (``bench/batch_writer.py``,
``bench/guard_stream.py``). Each round reads the whole input as one batch
(``availableNow``) into a fresh output and checkpoint."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter

#: the input's columns: v is id % 97, so ``v > 10`` keeps most rows
SCHEMA = "id INT, v DOUBLE, user STRING"


def json_input(spark: SparkSession, rows: int, root: str, *, v_last: bool = False) -> str:
    """``rows`` records as JSON files (four) under ``root``; returns their folder.
    ``v_last``: each record's fields in the order id, user, v (the filtered field last)."""
    source = os.path.join(root, "source")
    columns = ["CAST(id AS INT) AS id", "CAST(id % 97 AS DOUBLE) AS v", "CONCAT('u', id % 1000) AS user"]
    if v_last:
        columns = [columns[0], columns[2], columns[1]]
    spark.range(0, rows).selectExpr(*columns).repartition(4).write.json(source)
    return source


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """``conf`` set on ``spark`` while a query starts (a query keeps the values it started
    with: Spark clones the session for it), then unset."""
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in conf:
            spark.conf.unset(key)


def alternate(
    forms: Sequence[str],
    rounds: int,
    root: str,
    writer: Callable[[str, str], DataStreamWriter],
    confs: Mapping[str, Mapping[str, str]] | None = None,
    spark: SparkSession | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """``rounds`` rounds of every form in turn; ``writer(form, out)`` is the form's query up
    to ``start()``, started with ``confs[form]`` set on ``spark`` if given. Returns each
    form's wall times and Spark's ``addBatch`` (ms)."""
    walls: dict[str, list[float]] = {f: [] for f in forms}
    adds: dict[str, list[int]] = {f: [] for f in forms}
    for n in range(rounds):
        for form in forms:
            out = os.path.join(root, f"{form}-{n}")
            os.makedirs(out)
            started = time.perf_counter()
            query = writer(form, out).option("checkpointLocation", out + ".checkpoint")
            with session_conf(spark, (confs or {}).get(form, {})) if spark else nullcontext():
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
