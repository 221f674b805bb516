"""What a shareable stream output costs a micro-batch (issue 16): the same streaming filter
written by Spark's file sink and by the runtime's batch writer (foreachBatch into a hidden
directory with runtime/connectors.py's QUICK_COMMIT settings, then each file renamed into the
stream's directory), alternating rounds in one session.

    .venv/bin/python bench/batch_writer.py [--rows 3000000] [--rounds 7]

Forms: ``sink`` (Spark's file sink, as a hand-written query writes), ``batch-writer`` (the
runtime's write), ``no-rename`` (the same write, files left where Hadoop's committer put
them: what the renames cost). Each round reads the whole input as one batch
(``availableNow``) into a fresh output and checkpoint; printed: wall time and Spark's
``addBatch`` (the sink's write), median and min.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from streaming_rounds import SCHEMA, alternate, json_input, report

from airflow_provider_streamql.runtime import build_session
from airflow_provider_streamql.runtime.batch_writer import QUICK_COMMIT

FORMS = ("sink", "batch-writer", "no-rename")


def writer(df, form: str, out: str):
    if form == "sink":
        return df.writeStream.format("json").option("path", out)

    def batch(rows, batch_id: int) -> None:
        tmp = os.path.join(out, f".tmp-{batch_id}")
        rows.write.format("json").options(**QUICK_COMMIT).mode("overwrite").save(tmp)
        if form == "batch-writer":
            parts = sorted(f for f in os.listdir(tmp) if f.startswith("part-"))
            for i, part in enumerate(parts):
                os.rename(os.path.join(tmp, part), os.path.join(out, f"b{batch_id:012d}-p{i:05d}.json"))
            shutil.rmtree(tmp)

    return df.writeStream.foreachBatch(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    spark = build_session("local[2]", "bench-batch-writer", {"spark.ui.showConsoleProgress": "false"})
    root = tempfile.mkdtemp(prefix="bench-batch-writer-")
    source = json_input(spark, args.rows, root)

    def form_writer(form: str, out: str):
        return writer(spark.readStream.schema(SCHEMA).json(source).where("v > 10"), form, out)

    report(*alternate(FORMS, args.rounds, root, form_writer), base="sink")
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
