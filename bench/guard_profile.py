"""Where a checked read's time goes: one form of ``bench/guard_stream.py`` run under Java
Flight Recorder, and the executor threads' samples summed by method (issue 16).

    .venv/bin/python bench/guard_profile.py --form guard [--rounds 8] [--rows 3000000]

Prints the methods most often on top of an executor thread's stack, and how many samples
fall in FailureSafeParser's copy of every row into the result row, which Spark makes only
when the corrupt-record column is read (a ``StructType.fieldIndex`` by name per field, and
boxed values). Compare ``--form plain`` (or ``failfast``) with ``--form guard``. Needs the JDK's
``jcmd`` and ``jfr`` tools (next to the ``java`` Spark runs on).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import tempfile

from guard_stream import CONFS, FORMS, frame
from streaming_rounds import alternate, json_input

from airflow_provider_streamql.runtime import build_session

#: the row copy a read with a corrupt-record column makes per record: FailureSafeParser's
#: first toResultRow closure and its field lookups by name, ``fieldIndex`` (without that
#: column Spark returns the parsed row as is; the parser's own lookups are getFieldIndex)
ROW_COPY = ("FailureSafeParser.$anonfun$toResultRow$1", "StructType.fieldIndex")


def samples(jdk: str, recording: str) -> list[list[str]]:
    """The executor threads' stacks (innermost first) as ``Class.method`` names."""
    jfr = os.path.join(jdk, "bin", "jfr")
    out = subprocess.run(
        [jfr, "print", "--json", "--events", "jdk.ExecutionSample", recording],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    stacks = []
    for event in json.loads(out)["recording"]["events"]:
        if "Executor task" in (event["values"]["sampledThread"]["javaName"] or ""):
            frames = event["values"]["stackTrace"]["frames"]
            stacks.append([f"{f['method']['type']['name'].split('/')[-1]}.{f['method']['name']}" for f in frames])
    return stacks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--form", choices=FORMS, default="guard")
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-guard-profile-")
    recording = os.path.join(root, "profile.jfr")
    options = "-XX:StartFlightRecording=name=guard,settings=profile"
    spark = build_session("local[2]", "bench-guard-profile", {"spark.driver.extraJavaOptions": options})
    source = json_input(spark, args.rows, root, v_last=True)

    def form_writer(form: str, out: str):
        return frame(spark, source, form).writeStream.format("json").option("path", out)

    walls, _ = alternate([args.form], args.rounds, root, form_writer, CONFS, spark)
    jvm = spark.sparkContext._jvm
    jdk = jvm.java.lang.System.getProperty("java.home")
    pid = str(jvm.java.lang.ProcessHandle.current().pid())
    subprocess.run(
        [os.path.join(jdk, "bin", "jcmd"), pid, "JFR.dump", "name=guard", f"filename={recording}"],
        check=True,
        capture_output=True,
    )
    spark.stop()
    stacks = samples(jdk, recording)
    top = collections.Counter(stack[0] for stack in stacks if stack)
    copy = sum(1 for stack in stacks if any(name in ROW_COPY for name in stack[:6]))
    matched = collections.Counter(name for stack in stacks for name in set(stack[:6]) if name in ROW_COPY)
    print(
        json.dumps(
            {
                "form": args.form,
                "walls_s": sorted(round(w, 3) for w in walls[args.form]),
                "executor_samples": len(stacks),
                "row_copy_samples": copy,
                "row_copy_share": round(copy / max(len(stacks), 1), 3),
                "row_copy_frames": dict(matched),
            }
        )
    )
    for name, count in top.most_common(12):  # the hottest methods, by samples on top
        print(f"{count:6d}  {name}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
