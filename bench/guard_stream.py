"""What checking every record costs a streaming batch (issue 16): one filter over JSON
files, written by Spark's file sink, read five ways, alternating rounds in one session.

    .venv/bin/python bench/guard_stream.py [--rows 3000000] [--rounds 10] [--v-last]

Forms:

- ``plain``: as a hand-written query reads. Spark pushes the filter (``v > 10``) into its
  JSON parser, which drops a record as soon as a parsed field fails it.
- ``plain-no-pushdown``: the same with ``spark.sql.json.filterPushdown.enabled=false`` for
  that query: what the parser's early drop is worth.
- ``permissive``: PERMISSIVE with a corrupt-record column, the column dropped (so it is not
  read: no check at all).
- ``guard``: PERMISSIVE with the corrupt-record column read, every column ``CASE WHEN bad
  THEN raise_error(... input_file_name() ...) ELSE col``, then the query's filter: how the
  runtime checked every file record until 2026-11-25, and how it still checks a query that
  skipped records (runtime/badrecords.py).
- ``failfast``: how the runtime reads a file under FAIL and PAUSE now: FAILFAST (Spark fails
  the read at a record it cannot parse), with the parser pushdown off (the runtime's
  setting: it would drop a bad record the filter rejects unseen).

Unlike ``bench/guard_scan.py`` (a batch read), this is the streaming plan a runtime's query
runs. Each round reads the whole input as one batch (``availableNow``). ``--v-last``
writes each record's fields as id, user, v (the filtered field last, as in
``bench/pause_resume.py``'s input), where an early drop skips no parsing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

from pyspark.sql import functions as F
from streaming_rounds import SCHEMA, alternate, json_input, report

from airflow_provider_streamql.runtime import build_session

COLUMNS = ["id", "v", "user"]
CORRUPT = "_corrupt"
FORMS = ("plain", "plain-no-pushdown", "permissive", "guard", "failfast")
NO_PUSHDOWN = {"spark.sql.json.filterPushdown.enabled": "false"}
CONFS = {"plain-no-pushdown": NO_PUSHDOWN, "failfast": NO_PUSHDOWN}


def frame(spark, source: str, form: str):
    if form == "failfast":
        return spark.readStream.schema(SCHEMA).option("mode", "FAILFAST").json(source).where("v > 10")
    if form.startswith("plain"):
        return spark.readStream.schema(SCHEMA).json(source).where("v > 10")
    df = (
        spark.readStream.schema(f"{SCHEMA}, {CORRUPT} STRING")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(source)
    )
    if form == "permissive":
        return df.select(*COLUMNS).where("v > 10")
    bad = F.col(CORRUPT).isNotNull() | F.col("id").isNull()
    message = F.concat(
        F.lit("cannot read a record in "), F.input_file_name(), F.lit(": "), F.coalesce(F.col(CORRUPT), F.lit(""))
    )
    guarded = df.select(*[F.when(bad, F.raise_error(message)).otherwise(F.col(c)).alias(c) for c in COLUMNS])
    return guarded.where("v > 10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--v-last", action="store_true", help="the filtered field last in each record")
    args = parser.parse_args()
    spark = build_session("local[2]", "bench-guard-stream", {"spark.ui.showConsoleProgress": "false"})
    root = tempfile.mkdtemp(prefix="bench-guard-stream-")
    source = json_input(spark, args.rows, root, v_last=args.v_last)

    def form_writer(form: str, out: str):
        return frame(spark, source, form).writeStream.format("json").option("path", out)

    report(*alternate(FORMS, args.rounds, root, form_writer, CONFS, spark), base="plain")
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
