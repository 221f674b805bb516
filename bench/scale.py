"""Many queries in one runtime (issue 16): how each control-plane figure grows with N.

    .venv/bin/python bench/scale.py [--sizes 1,10,40,100] [--idle 10] [--rounds 3] [--submit 10] [--on-error FAIL]

Each size N runs in a fresh child process (its own JVM and SparkSession, ``local[2]``,
a SQLite catalog, files): one source stream ``src`` and N file-to-file filter queries
``CREATE STREAM o<i> AS SELECT * FROM src WHERE id % N = i`` in one runtime reconciling
every 0.5 s (the default), under ``--on-error`` (default: the runtime's, LOG_AND_CONTINUE; a
query reading files has no dead-letter companion since 2026-11-28, so one Spark query a query
under every policy; ``streams`` says how many ran). The child measures, in this order:

  * create: the N CREATE STREAM ... AS statements executed as one script -> all RUNNING;
  * idle CPU: CPU seconds per wall second of the whole process tree (Python + JVM) over
    ``--idle`` seconds with no new input;
  * catch-up: one file of N records (one per query) renamed into the source -> every
    query has processed the file and committed its output (``CaughtUp`` on each);
  * PAUSE ALL -> all PAUSED; RESUME ALL -> all RUNNING (medians of ``--rounds`` cycles);
  * RSS of the process tree (driver + JVM) at the end;
  * Spark's own floor, in the same JVM after the runtime has stopped: the same N filters
    hand-written in PySpark (Spark's file sink, named sources as the runtime's), all stopped
    and all restarted on their checkpoints by 8 threads, as a RESUME ALL's workers do
    (medians of ``--rounds``). No catalog, no runtime: what N restarts cost Spark itself.

``--submit K`` adds the comparison an Airflow + Spark user would make: K separate Spark
applications (one ``spark-submit`` each of ``bench/submit_query.py``, as the Spark
provider's operator runs them) against the K-query runtime child: memory, time until all
are running, and records-through latency (one record for each query written to the
source -> every output directory has a data file holding it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

POLL = 0.02
#: the figures compared with N = 1 (the spark_ ones: Spark's own floor, no runtime)
RATIOS = ("create_s", "catch_up_s", "pause_all_s", "resume_all_s", "spark_stop_all_s", "spark_start_all_s")
HERE = os.path.dirname(os.path.abspath(__file__))


def tree_rss(proc: psutil.Process) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def tree_cpu(proc: psutil.Process) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


# -- one runtime, N queries (child process) ---------------------------------------------------
def child(n: int, idle: float, through: bool, rounds: int, on_error: str | None = None) -> dict:
    from airflow_provider_streamql.catalog import Catalog
    from airflow_provider_streamql.conditions import AllOf, CaughtUp, QueriesInState
    from airflow_provider_streamql.engine import Engine
    from airflow_provider_streamql.runtime import Runtime, build_session

    me = psutil.Process()
    t_jvm = time.monotonic()
    spark = build_session("local[2]", "streamql-scale", {"spark.ui.enabled": "false"})
    session_s = time.monotonic() - t_jvm
    home = tempfile.mkdtemp(prefix=f"bench-scale-{n}-")
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute("CREATE STREAM src (id INT, v DOUBLE)")
    runtime = Runtime(Catalog(engine.catalog.url), "default", spark, interval=0.5, on_error=on_error)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    time.sleep(1.0)  # the runtime is up and idle

    script = ";\n".join(f"CREATE STREAM o{i} AS SELECT * FROM src WHERE id % {n} = {i}" for i in range(n))
    t0 = time.monotonic()
    results = engine.execute(script + ";")
    ids = [r.query_id for r in results]
    engine.wait(QueriesInState(ids, ["RUNNING"]), timeout=1800, poll=POLL)
    create_s = time.monotonic() - t0
    time.sleep(2.0)  # first (empty) batches done
    streams = len(spark.streams.active)  # Spark's streaming queries (2N before 2026-11-28: companions)

    c0, w0 = tree_cpu(me), time.monotonic()
    time.sleep(idle)
    idle_cpu = (tree_cpu(me) - c0) / (time.monotonic() - w0)

    src = engine.catalog.source("SRC").path
    t0 = time.monotonic()
    write_records(src, n, 1.0)
    engine.wait(AllOf.of(*[CaughtUp(q) for q in ids]), timeout=1800, poll=POLL)
    catch_up_s = time.monotonic() - t0

    pauses, resumes = [], []
    for _ in range(rounds):  # one PAUSE ALL of one query is ~0.05 s: a single sample is noise
        t0 = time.monotonic()
        engine.execute("PAUSE ALL")
        engine.wait(QueriesInState(ids, ["PAUSED"]), timeout=1800, poll=POLL)
        pauses.append(time.monotonic() - t0)
        time.sleep(1.0)
        t0 = time.monotonic()
        engine.execute("RESUME ALL")
        engine.wait(QueriesInState(ids, ["RUNNING"]), timeout=1800, poll=POLL)
        resumes.append(time.monotonic() - t0)
        time.sleep(2.0)
    pause_s, resume_s = statistics.median(pauses), statistics.median(resumes)

    result = {
        "n": n,
        "on_error": runtime.on_error.value,
        "streams": streams,
        "session_s": round(session_s, 2),
        "create_s": round(create_s, 2),
        "idle_cpu": round(idle_cpu, 3),
        "catch_up_s": round(catch_up_s, 2),
        "pause_all_s": round(pause_s, 3),
        "resume_all_s": round(resume_s, 3),
        "rss_mb": round(tree_rss(me) / 2**20),
    }
    runtime.stop()
    thread.join()
    result.update(spark_floor(spark, n, rounds))
    if through:
        outputs = [engine.catalog.source(f"O{i}").path for i in range(n)]
        result["through_s"] = records_through(src, outputs, n)
    spark.stop()
    return result


def spark_floor(spark, n: int, rounds: int, workers: int = 8) -> dict:
    """Stop and restart N hand-written file-to-file filters on their checkpoints, ``workers``
    at a time (no catalog, no runtime); medians of ``rounds`` cycles, as for PAUSE/RESUME ALL."""
    from concurrent.futures import ThreadPoolExecutor

    from airflow_provider_streamql.runtime.evolution import source_evolution

    base = tempfile.mkdtemp(prefix=f"bench-floor-{n}-")
    src = os.path.join(base, "src")
    os.makedirs(src)
    write_records(src, n, 1.0)
    with source_evolution(spark, True):
        frames = [
            spark.readStream.name("src").schema("id INT, v DOUBLE").json(src).where(f"id % {n} = {i}") for i in range(n)
        ]

    def start(i: int):
        out = os.path.join(base, f"o{i}")
        with source_evolution(spark, True):
            writer = frames[i].writeStream.format("json").option("path", out)
            return writer.option("checkpointLocation", out + ".checkpoint").start()

    with ThreadPoolExecutor(workers) as pool:
        queries = list(pool.map(start, range(n)))
        for q in queries:
            q.processAllAvailable()
        stops, starts = [], []
        for _ in range(rounds):
            t0 = time.monotonic()
            list(pool.map(lambda q: q.stop(), queries))
            stops.append(time.monotonic() - t0)
            time.sleep(1.0)
            t0 = time.monotonic()
            queries = list(pool.map(start, range(n)))
            starts.append(time.monotonic() - t0)
            time.sleep(2.0)
        list(pool.map(lambda q: q.stop(), queries))
    return {
        "spark_stop_all_s": round(statistics.median(stops), 3),
        "spark_start_all_s": round(statistics.median(starts), 3),
    }


def write_records(src: str, n: int, tag: float) -> None:
    """One record per query (``id % n = i``), marked by ``v = tag``, as one file renamed in."""
    tmp = os.path.join(src, f".tmp-{tag}.json")
    with open(tmp, "w") as out:
        for i in range(n):
            out.write(json.dumps({"id": i + n * 1000, "v": tag}) + "\n")
    os.rename(tmp, os.path.join(src, f"bench-{tag}.json"))


def holds(directory: str, tag: float) -> bool:
    """A visible data file of ``directory`` (recursively: Spark's file sink, renamed batch
    files) holds a record marked ``tag``."""
    needle = json.dumps(tag)
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if name.startswith((".", "_")):
                continue
            with open(os.path.join(root, name)) as f:
                if needle in f.read():
                    return True
    return False


def records_through(src: str, outputs: list[str], n: int, rounds: int = 5) -> dict:
    """Median seconds from a record file renamed into ``src`` to every output holding it."""
    times = []
    for r in range(rounds):
        time.sleep(1.0)
        tag = 1000.0 + r + time.time() % 1
        t0 = time.monotonic()
        write_records(src, n, tag)
        left = set(outputs)
        while left:
            left = {o for o in left if not holds(o, tag)}
            time.sleep(POLL)
        times.append(time.monotonic() - t0)
    return summary(times)


# -- K spark-submit applications ---------------------------------------------------------------
def submit_apps(k: int) -> dict:
    base = tempfile.mkdtemp(prefix="bench-submit-")
    src = os.path.join(base, "src")
    os.makedirs(src)
    import pyspark

    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    home = os.path.dirname(pyspark.__file__)  # pip's pyspark is a Spark distribution
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    procs, outputs, ready = [], [], []
    t0 = time.monotonic()
    for i in range(k):
        out = os.path.join(base, f"o{i}")
        outputs.append(out)
        ready.append(out + ".started")
        cmd = [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
        cmd += [os.path.join(HERE, "submit_query.py"), src, out, str(k), str(i)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    while not all(os.path.exists(r) for r in ready):
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a spark-submit application exited")
        time.sleep(POLL)
    all_running = time.monotonic() - t0
    time.sleep(3.0)
    rss = sum(tree_rss(psutil.Process(p.pid)) for p in procs)
    through = records_through(src, outputs, k)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=120)
    return {"apps": k, "all_running_s": round(all_running, 2), "rss_mb": round(rss / 2**20), "through_s": through}


def summary(values: list[float]) -> dict:
    values = sorted(values)
    return {"median": round(statistics.median(values), 3), "min": round(values[0], 3), "max": round(values[-1], 3)}


def run_child(n: int, idle: float, through: bool, rounds: int = 3, on_error: str | None = None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(n), "--idle", str(idle), "--rounds", str(rounds)]
    cmd += ["--on-error", on_error] if on_error else []
    t0 = time.monotonic()
    out = subprocess.run(cmd + (["--through"] if through else []), check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = round(time.monotonic() - t0, 1)  # whole child, JVM start included
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,10,40,100")
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--submit", type=int, default=0, help="compare K queries with K spark-submit apps")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--through", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help="PAUSE ALL / RESUME ALL cycles per size")
    from airflow_provider_streamql.catalog import ERROR_POLICIES

    parser.add_argument(
        "--on-error",
        type=str.upper,  # as `streamql runtime --on-error` takes it
        choices=[policy.value for policy in ERROR_POLICIES],
        help="the runtime's policy for the queries (default: the runtime's, LOG_AND_CONTINUE; every policy "
        "runs one Spark query a file query, as Spark's floor does)",
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.idle, args.through, args.rounds, args.on_error)))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = [run_child(n, args.idle, through=False, rounds=args.rounds, on_error=args.on_error) for n in sizes]
    for row in rows:
        print(json.dumps(row), flush=True)
    one = next((r for r in rows if r["n"] == 1), None)
    if one:
        print("\nratio to N=1 (goal: <= 8 at N=40)")
        for row in rows:
            ratios = {k: round(row[k] / max(one[k], 1e-9), 1) for k in RATIOS}
            print(f"N={row['n']:>4}  {json.dumps(ratios)}")
    if args.submit:
        k = args.submit
        print(f"\n{k} queries in one runtime vs {k} spark-submit applications")
        print("runtime:", json.dumps(run_child(k, args.idle, through=True)))
        print("spark-submit:", json.dumps(submit_apps(k)))


if __name__ == "__main__":
    main()
