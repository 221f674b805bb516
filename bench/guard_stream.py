"""What the bad-record guard costs a streaming batch (issue 16): one filter over JSON files,
written by Spark's file sink, read four ways, alternating rounds in one session.

    .venv/bin/python bench/guard_stream.py [--rows 3000000] [--rounds 10]

Forms: ``plain`` (as a hand-written query reads), ``permissive`` (PERMISSIVE with a
corrupt-record column, the column dropped), ``guard`` (the same with runtime/badrecords.py's
form: every column ``CASE WHEN bad THEN raise_error(... input_file_name() ...) ELSE col``,
then the query's filter) and ``guard-no-file`` (the guard with the record's text but no file
in its message). Unlike ``bench/guard_scan.py`` (a batch read), this is the streaming plan a
runtime's query runs. Each round reads the whole input as one batch (``availableNow``).
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
FORMS = ("plain", "permissive", "guard", "guard-no-file")


def frame(spark, source: str, form: str):
    if form == "plain":
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
    where = F.input_file_name() if form == "guard" else F.lit("a file")
    message = F.concat(F.lit("cannot read a record in "), where, F.lit(": "), F.coalesce(F.col(CORRUPT), F.lit("")))
    guarded = df.select(*[F.when(bad, F.raise_error(message)).otherwise(F.col(c)).alias(c) for c in COLUMNS])
    return guarded.where("v > 10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    spark = build_session("local[2]", "bench-guard-stream", {"spark.ui.showConsoleProgress": "false"})
    root = tempfile.mkdtemp(prefix="bench-guard-stream-")
    source = json_input(spark, args.rows, root)

    def form_writer(form: str, out: str):
        return frame(spark, source, form).writeStream.format("json").option("path", out)

    report(*alternate(FORMS, args.rounds, root, form_writer), base="plain")
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
