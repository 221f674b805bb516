"""What the bad-record guard costs a scan (issue 16): the throughput benchmark's input read
and filtered in batch, under each form of the guard, alternating rounds in one session.

    .venv/bin/python bench/guard_scan.py [--rows 2000000] [--rounds 7]

Forms: ``plain`` (no guard: what a hand-written query reads), ``guard-file-column`` (the
guard as it was: PERMISSIVE parse with a corrupt-record column, ``_metadata.file_path`` on
every row for the error message, a ``CASE ... raise_error`` per column), ``guard-no-position``
(the same without any file in the message) and ``guard`` (runtime/badrecords.py now: the
file from ``input_file_name()``, evaluated only for a record that raises).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

from pyspark.sql import functions as F

from airflow_provider_streamql.runtime import build_session

SCHEMA = "id INT, user STRING, cost DOUBLE"
CORRUPT = "_streamql_corrupt"
COLUMNS = ["id", "user", "cost"]


def write_input(path: str, rows: int, files: int = 100) -> None:
    os.makedirs(path)
    per_file = rows // files
    for f in range(files):
        with open(os.path.join(path, f"part-{f:05d}.json"), "w") as out:
            for i in range(f * per_file, (f + 1) * per_file):
                out.write(json.dumps({"id": i, "user": f"u{i % 1000}", "cost": (i % 200) - 50.0}) + "\n")


def forms(spark, src: str) -> dict:
    def permissive():
        reader = spark.read.schema(f"{SCHEMA}, {CORRUPT} STRING").option("mode", "PERMISSIVE")
        return reader.option("columnNameOfCorruptRecord", CORRUPT).json(src)

    def guarded(df, position):
        bad = F.col(CORRUPT).isNotNull()
        message = F.concat(F.lit("bad record in "), position, F.lit(": "), F.substring(F.col(CORRUPT), 1, 300))
        return df.select(*[F.when(bad, F.raise_error(message)).otherwise(F.col(c)).alias(c) for c in COLUMNS])

    return {
        "plain": lambda: spark.read.schema(SCHEMA).json(src),
        "guard-file-column": lambda: guarded(
            permissive().withColumn("_file", F.col("_metadata.file_path")), F.col("_file")
        ),
        "guard-no-position": lambda: guarded(permissive(), F.lit("?")),
        "guard": lambda: guarded(permissive(), F.input_file_name()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    spark = build_session("local[2]", "streamql-bench-guard", {"spark.ui.enabled": "false"})
    base = tempfile.mkdtemp(prefix="bench-guard-")
    src, out = os.path.join(base, "input"), os.path.join(base, "out")
    write_input(src, args.rows)
    made = forms(spark, src)
    times: dict[str, list[float]] = {name: [] for name in made}
    for _ in range(args.rounds):
        for name, make in made.items():
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            make().where("cost > 0").write.json(out)
            times[name].append(time.perf_counter() - t0)
    result = {name: {"median": round(statistics.median(t), 3), "min": round(min(t), 3)} for name, t in times.items()}
    print(json.dumps({"rows": args.rows, "rounds": args.rounds, "seconds": result}, indent=2))
    spark.stop()
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
