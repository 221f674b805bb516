"""streamql against Flink SQL and hand-written PySpark (issue 33), on the same files, in one run.

    bench/peers/setup-flink        # once: PyFlink in .venv-flink, beside (never in) .venv
    flock /tmp/streamql-spark.lock .venv/bin/python bench/peers/flink.py [--records 1000000] [--rounds 3]

The streamql and PySpark sides run here, in one SparkSession (``local[2]``); the Flink side runs
in ``.venv-flink`` as a long-lived child (bench/peers/flink_driver.py: PyFlink's local
mini-cluster, parallelism 2, the filesystem connector), told what to run one JSON line at a time,
so that no two sides ever run at once and every JVM stays warm. Rounds alternate the sides:

* **throughput**: the filter ``WHERE cost > 0`` and the GROUP BY ``user`` (count, sum) over
  ``--records`` JSON records in 200 files (bench/pause_resume.py's input): hand-written PySpark
  (``start()`` to every file processed), a streamql runtime (statement to caught up) and a Flink
  SQL job (``execute_sql`` to the job finished, its bounded read in streaming mode). The first
  ``--warmup`` rounds are run, not counted.
* **upgrade gap** (change a filter while one record a file arrives every 0.1 s): streamql's
  CREATE OR REPLACE (bench/upgrade.py ``in_place``) against Flink's stop-with-savepoint and the
  new SQL started from the savepoint; last output before the change to first output after.
* **pause and resume** of an idle query, one record arriving while paused: streamql's PAUSE ->
  PAUSED and RESUME -> first commit (bench/pause_resume.py ``latency``) against Flink's
  stop-with-savepoint and the job started from it -> first committed output file.
* **end-to-end latency** of the filter at a steady ``--rate`` (one record a file): from the file
  in place in the source to the record seen in a committed output file, p50 and p99, streamql
  then Flink (local mini-cluster), ``--seconds`` counted after 10 s of warm-up.

Flink's upgrade and pause/resume run twice a round: each job in a local mini-cluster of its own
(the driver's JVM stays up: no new JVM is started) and on a standalone session cluster started
here from PyFlink's scripts (the job's own restart only: Flink's floor).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)  # the helpers of the file benchmarks

import yaml  # noqa: E402
from pause_resume import FILTER, hand_filter, handwritten, latency, summary, via_runtime, write_input  # noqa: E402
from pyspark.sql import DataFrame  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.streaming import DataStreamWriter  # noqa: E402
from upgrade import in_place  # noqa: E402

from airflow_provider_streamql.catalog import Catalog  # noqa: E402
from airflow_provider_streamql.engine import Engine  # noqa: E402
from airflow_provider_streamql.runtime import Runtime, build_session  # noqa: E402
from airflow_provider_streamql.storage.layout import ALLOWED_PATHS_ENV  # noqa: E402

FLINK_PYTHON = os.path.join(ROOT, ".venv-flink", "bin", "python")
GROUP_BY = ("CREATE TABLE t AS SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM s GROUP BY user", "CTAS_T_1")


def hand_group_by(df: DataFrame, out: str) -> DataStreamWriter:
    """The GROUP BY as a user writes it in PySpark: Spark's file sink takes no updates, so each
    micro-batch's changed groups are written by ``foreachBatch`` (as a streamql TABLE is)."""
    stats = df.groupBy("user").agg(F.count(F.lit(1)).alias("n"), F.sum("cost").alias("total"))
    return stats.writeStream.outputMode("update").foreachBatch(lambda batch, n: batch.write.json(f"{out}/{n}"))


#: each query, hand-written, as a statement, and as the Flink forms that run it
QUERIES: dict[str, tuple[Callable[[DataFrame, str], DataStreamWriter], tuple[str, str], tuple[str, ...]]] = {
    "filter": (hand_filter, FILTER, ("filter",)),
    "group_by": (hand_group_by, GROUP_BY, ("group_by", "group_by_minibatch")),
}


class SessionCluster:
    """A standalone Flink session cluster (one JobManager, one TaskManager of two slots) from
    PyFlink's own scripts, its configuration, logs and pid files under ``home``: jobs submitted
    to it skip the mini-cluster's start, Flink's fastest restart."""

    def __init__(self, home: str):
        pyflink = glob.glob(os.path.join(ROOT, ".venv-flink", "lib", "python3*", "site-packages", "pyflink"))[0]
        conf_dir = os.path.join(home, "conf")
        os.makedirs(conf_dir)
        for name in os.listdir(os.path.join(pyflink, "conf")):
            shutil.copy(os.path.join(pyflink, "conf", name), conf_dir)
        with open(os.path.join(conf_dir, "config.yaml")) as f:
            conf = yaml.safe_load(f)
        self.port = free_port()
        conf["jobmanager"]["rpc"]["port"] = free_port()
        conf["rest"]["port"] = self.port
        conf["taskmanager"]["numberOfTaskSlots"] = 2
        conf["parallelism"]["default"] = 2
        with open(os.path.join(conf_dir, "config.yaml"), "w") as f:
            yaml.safe_dump(conf, f)
        self.bin = os.path.join(pyflink, "bin")
        self.env = {
            **os.environ,
            "FLINK_HOME": pyflink,
            "FLINK_CONF_DIR": conf_dir,
            "FLINK_LOG_DIR": os.path.join(home, "log"),
            "FLINK_PID_DIR": os.path.join(home, "pid"),
        }
        for folder in ("FLINK_LOG_DIR", "FLINK_PID_DIR"):
            os.makedirs(self.env[folder])
        self.daemons("start")
        deadline = time.monotonic() + 120
        while self.overview().get("taskmanagers") != 1:
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"Flink's session cluster did not start: see {home}/log")
            time.sleep(0.2)

    def daemons(self, action: str) -> None:
        # the scripts stop exactly the processes their pid files name
        for script in ("jobmanager.sh", "taskmanager.sh") if action == "start" else ("taskmanager.sh", "jobmanager.sh"):
            subprocess.run(
                ["bash", os.path.join(self.bin, script), action], env=self.env, check=True, capture_output=True
            )

    def overview(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://localhost:{self.port}/overview", timeout=2) as answer:
                return json.load(answer)
        except OSError:
            return {}

    def stop(self) -> None:
        self.daemons("stop")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


class Flink:
    """The Flink driver in its own venv: one command, one answer."""

    def __init__(self, log: str, checkpoint_ms: int, monitor_ms: int, session_port: int):
        if not os.path.exists(FLINK_PYTHON):
            raise SystemExit(f"{FLINK_PYTHON!r} is missing: run bench/peers/setup-flink first")
        self.settings = {"checkpoint_ms": checkpoint_ms, "monitor_ms": monitor_ms}
        #: where its jobs run: a local mini-cluster of their own, or the session cluster
        self.deployments: dict[str, int | None] = {"local": None, "session": session_port}
        self.process = subprocess.Popen(
            [FLINK_PYTHON, os.path.join(BENCH, "peers", "flink_driver.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "w"),  # noqa: SIM115 - the child's for its whole life
            text=True,
        )
        self.read()  # ready

    def read(self) -> dict:
        answer = json.loads(self.process.stdout.readline())  # type: ignore[union-attr]
        if "error" in answer:
            raise RuntimeError(f"the Flink side failed: {answer['error']}")
        return answer

    def __call__(self, op: str, **cmd) -> dict:
        self.process.stdin.write(json.dumps({"op": op, **self.settings, **cmd}) + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        return self.read()

    def close(self) -> None:
        self.process.stdin.close()  # type: ignore[union-attr]
        self.process.wait()


def lines(folder: str) -> int:
    """Records in a sink's committed files (hidden and ``_`` files are not output)."""
    total = 0
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if not name.startswith((".", "_")):
                with open(os.path.join(parent, name)) as f:
                    total += sum(1 for _ in f)
    return total


def throughput(spark, flink: Flink, base: str, records: int, rounds: int, warmup: int) -> dict:
    src = os.path.join(base, "input")
    write_input(src, records, 200)
    passing = sum(1 for i in range(records) if (i % 200) - 50 > 0)
    seen: dict[str, list[float]] = {}
    for r in range(-warmup, rounds):
        for name, (shape, statement, flink_forms) in QUERIES.items():
            times = {
                f"pyspark_{name}": handwritten(spark, src, os.path.join(base, f"hand-{name}-{r}"), shape),
                f"streamql_{name}": via_runtime(spark, src, os.path.join(base, f"streamql-{name}-{r}"), statement),
            }
            for form in flink_forms:
                for where, port in flink.deployments.items():
                    out = os.path.join(base, f"flink-{where}-{form}-{r}")
                    answer = flink("throughput", query=form, source=src, out=out, rest_port=port)
                    if form == "filter" and lines(out) != passing:  # a job that did less would look fast
                        raise AssertionError(f"Flink's filter wrote {lines(out)} records, not {passing}")
                    times[f"flink_{where}_{form}"] = answer["wall_s"]
                    times[f"flink_{where}_{form}_net"] = answer["net_runtime_s"]
            print(json.dumps({"round": r, **{k: round(v, 3) for k, v in times.items()}}), file=sys.stderr, flush=True)
            if r >= 0:
                for key, value in times.items():
                    seen.setdefault(key, []).append(value)
    return {"records": records, **{key: summary(values) for key, values in seen.items()}}


def on_flink(flink: Flink, op: str, base: str, r: int) -> dict[str, dict]:
    """``op`` run once on each Flink deployment, each on a new source folder."""
    answers = {}
    for where, port in flink.deployments.items():
        work = os.path.join(base, f"flink-{where}-{op}-{r}")
        os.makedirs(os.path.join(work, "source"))
        answers[where] = flink(op, source=os.path.join(work, "source"), work=work, rest_port=port)
    return answers


def flink_summaries(theirs: list[dict[str, dict]], measures: dict[str, str]) -> dict:
    """Each measure of each deployment over the rounds, and how many stops failed."""
    result: dict = {}
    for where in theirs[0]:
        for name, key in measures.items():
            result[f"flink_{where}_{name}"] = summary([t[where][key] for t in theirs])
        result[f"flink_{where}_stops_failed"] = sum(t[where]["stop_failed"] for t in theirs)
        result[f"flink_{where}_planner_retries"] = sum(t[where].get("planner_retries", 0) for t in theirs)
    return result


def upgrades(spark, flink: Flink, base: str, rounds: int) -> dict:
    ours, theirs = [], []
    for r in range(rounds):
        ours.append(in_place(spark, 1)[0])
        theirs.append(on_flink(flink, "upgrade", base, r))
        print(json.dumps({"round": r, "streamql_gap_s": ours[-1], "flink": theirs[-1]}), file=sys.stderr, flush=True)
    measures = {
        "gap_s": "gap_s",
        "stop_with_savepoint_s": "stop_with_savepoint_s",
        "restart_to_first_output_s": "restart_to_first_output_s",
    }
    return {"streamql_gap_s": summary(ours), **flink_summaries(theirs, measures)}


def pauses(spark, flink: Flink, base: str, rounds: int) -> dict:
    ours, theirs = [], []
    for r in range(rounds):
        ours.append(latency(spark, 1))
        theirs.append(on_flink(flink, "pause_resume", base, r))
        print(json.dumps({"round": r, "streamql": ours[-1], "flink": theirs[-1]}), file=sys.stderr, flush=True)
    return {
        "streamql_pause_s": summary([o["pause_to_paused_s"]["median"] for o in ours]),
        "streamql_resume_to_first_commit_s": summary([o["resume_to_first_commit_s"]["median"] for o in ours]),
        **flink_summaries(
            theirs, {"stop_with_savepoint_s": "pause_s", "restart_to_first_output_s": "resume_to_first_output_s"}
        ),
    }


class Arrivals(threading.Thread):
    """When each record (by id) was first seen in a committed file under ``out`` (both sides
    put whole files in place; hidden and ``_`` files are not output), polled every 5 ms."""

    def __init__(self, out: str):
        super().__init__(daemon=True)
        self.out, self.files, self.seen, self.stopping = out, set(), {}, threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.005):
            now = time.time()
            for parent, dirs, files in os.walk(self.out):
                dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
                for name in files:
                    path = os.path.join(parent, name)
                    if name.startswith((".", "_")) or path in self.files:
                        continue
                    self.files.add(path)
                    with open(path) as f:
                        for line in f:
                            self.seen.setdefault(json.loads(line)["id"], now)


class Writer(threading.Thread):
    """``rate`` files a second into ``source``, one record each (``cost`` 1.0: every record
    passes the filter), each written aside and renamed in; when each was in place, by id."""

    def __init__(self, source: str, rate: float):
        super().__init__(daemon=True)
        self.source, self.every, self.stopping, self.written = source, 1 / rate, threading.Event(), {}

    def run(self) -> None:
        n, next_at = 0, time.monotonic()
        while not self.stopping.is_set():
            n += 1
            hidden = os.path.join(self.source, f".r{n:07d}.json")
            with open(hidden, "w") as f:
                f.write(json.dumps({"id": n, "user": f"u{n % 1000}", "cost": 1.0}) + "\n")
            os.rename(hidden, os.path.join(self.source, f"r{n:07d}.json"))
            self.written[n] = time.time()
            next_at += self.every
            time.sleep(max(0.0, next_at - time.monotonic()))


def steady(source: str, out: str, rate: float, warmup: float, seconds: float) -> list[float]:
    """Write at ``rate`` for ``warmup`` + ``seconds``; the latency (s) of each record written
    after the warm-up, from in place in the source to seen in the committed output."""
    arrivals, writer = Arrivals(out), Writer(source, rate)
    arrivals.start()
    writer.start()
    time.sleep(warmup)
    counted_from = time.time()
    time.sleep(seconds)
    writer.stopping.set()
    time.sleep(5)  # the last records' way through
    arrivals.stopping.set()
    counted = {n: t for n, t in writer.written.items() if t >= counted_from}
    missing = [n for n in counted if n not in arrivals.seen]
    if missing:
        raise AssertionError(f"{len(missing)} records never reached {out!r}")
    return [arrivals.seen[n] - t for n, t in counted.items()]


def latencies(spark, flink: Flink, base: str, rate: float, warmup: float, seconds: float) -> dict:
    """End-to-end latency of the filter at a steady rate: a streamql runtime, then a Flink job
    (local mini-cluster), one after the other on sources of their own."""
    home, src = os.path.join(base, "latency-streamql"), os.path.join(base, "latency-streamql-source")
    os.makedirs(src)
    os.environ[ALLOWED_PATHS_ENV] = os.path.dirname(src)
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute(f"CREATE STREAM s (id INT, user STRING, cost DOUBLE) WITH (path='{src}');" + FILTER[0])
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    engine.wait_for_state(FILTER[1], "RUNNING", timeout=120)
    ours = steady(src, engine.catalog.source("F").path, rate, warmup, seconds)
    runtime.stop()
    thread.join()
    work = os.path.join(base, "latency-flink")
    os.makedirs(os.path.join(work, "source"))
    flink("start", source=os.path.join(work, "source"), work=work)
    theirs = steady(os.path.join(work, "source"), os.path.join(work, "out"), rate, warmup, seconds)
    flink("cancel")
    return {"rate_per_s": rate, "streamql_s": percentiles(ours), "flink_local_s": percentiles(theirs)}


def percentiles(values: list[float]) -> dict:
    values = sorted(values)
    at = lambda q: round(values[min(len(values) - 1, int(q * len(values)))], 3)
    return {"p50": at(0.5), "p99": at(0.99), "max": round(values[-1], 3), "n": len(values)}


PARTS = ("throughput", "upgrade", "pause_resume", "latency")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="throughput rounds run first and not counted")
    parser.add_argument("--checkpoint-ms", type=int, default=200, help="Flink's checkpoint (and file commit) interval")
    parser.add_argument("--monitor-ms", type=int, default=100, help="how often Flink's source looks for new files")
    parser.add_argument("--rate", type=float, default=10, help="latency: records (files) a second")
    parser.add_argument("--seconds", type=float, default=30, help="latency: seconds counted, after 10 of warm-up")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args()
    parts = args.parts.split(",")
    base = tempfile.mkdtemp(prefix="bench-flink-")
    spark = build_session("local[2]", "streamql-bench", {"spark.ui.enabled": "false"})
    cluster = SessionCluster(os.path.join(base, "flink-session"))
    flink = Flink(os.path.join(base, "flink-driver.log"), args.checkpoint_ms, args.monitor_ms, cluster.port)
    result: dict = {"flink_checkpoint_ms": args.checkpoint_ms, "flink_monitor_ms": args.monitor_ms}
    try:
        if "throughput" in parts:
            result["throughput"] = throughput(spark, flink, base, args.records, args.rounds, args.warmup)
        if "upgrade" in parts:
            result["upgrade"] = upgrades(spark, flink, base, args.rounds)
        if "pause_resume" in parts:
            result["pause_resume"] = pauses(spark, flink, base, args.rounds)
        if "latency" in parts:
            result["latency"] = latencies(spark, flink, base, args.rate, 10, args.seconds)
    finally:
        flink.close()
        cluster.stop()
        spark.stop()
    print(json.dumps(result, indent=2))
    shutil.rmtree(base)  # 1.7 GB after a full run; a failed run keeps it (and Flink's logs) to read


if __name__ == "__main__":
    main()
