"""The Flink side of bench/peers/flink.py: Flink SQL jobs from PyFlink, each in a local
mini-cluster of its own or (``rest_port``) on a running session cluster; run in ``.venv-flink``
(bench/peers/setup-flink), never in the project's venv.

    .venv-flink/bin/python bench/peers/flink_driver.py

One JSON command a line on stdin, one JSON answer a line on stdout (Flink's own logging goes to
its log files), so the JVM stays warm between rounds as the Spark session does on the other
side. Commands (``op``):

* ``throughput`` ``query`` ``source`` ``out``: one job over the files already in ``source`` (a
  bounded read, in streaming mode), from ``execute_sql`` until the job has finished and its
  sink has committed; answers the wall time and Flink's own net runtime of the job.
* ``upgrade`` ``source`` ``work``: a job fed one new file every 0.1 s; after 3 s it is stopped
  with a savepoint and the changed SQL is started from it; answers the gap from the last output
  file committed before the stop to the first committed after the restart.
* ``start`` ``source`` ``work``, then ``cancel``: the filter left running between the two (the
  caller feeds it and times its output: the end-to-end latency).
* ``pause_resume`` ``source`` ``work``: an idle running job is stopped with a savepoint (the
  pause: until the savepoint is written and the job stopped); one record is written; the job is
  started from the savepoint (the resume: until that record's output is committed).

A stop with a savepoint can fail after the savepoint is written (seen on a session cluster: the
file source's enumerator sends new splits to a reader that has already finished, and Flink
fails the job); the savepoint is consistent and the next job starts from it, as Flink's
message says to, and the answer says ``stop_failed``.

Flink's file sink commits its files on checkpoints, so every job checkpoints every
``checkpoint_ms`` (default 200 ms) and the source looks for new files every ``monitor_ms``
(default 100 ms): intervals far below what a production job would use, to give Flink its best.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time

from pyflink.common.completable_future import CompletableFuture
from pyflink.java_gateway import get_gateway
from pyflink.table import EnvironmentSettings, TableEnvironment, TableResult

COLUMNS = "id INT, `user` STRING, cost DOUBLE"
POLL = 0.01

#: the filters a running query alternates between (bench/upgrade.py's two versions)
FILTERS = ("cost > 0", "cost > -1")

QUERIES = {
    "filter": ("({columns})", "json", "SELECT * FROM s WHERE cost > 0", {}),
    "group_by": (
        "(`user` STRING, n BIGINT, total DOUBLE, PRIMARY KEY (`user`) NOT ENFORCED)",
        "debezium-json",  # the filesystem sink takes a GROUP BY's updates only as a changelog format
        "SELECT `user`, COUNT(*) AS n, SUM(cost) AS total FROM s GROUP BY `user`",
        {},
    ),
    # Flink's own tuning for aggregations: updates buffered and folded per key before they are sent
    "group_by_minibatch": (
        "(`user` STRING, n BIGINT, total DOUBLE, PRIMARY KEY (`user`) NOT ENFORCED)",
        "debezium-json",
        "SELECT `user`, COUNT(*) AS n, SUM(cost) AS total FROM s GROUP BY `user`",
        {
            "table.exec.mini-batch.enabled": "true",
            "table.exec.mini-batch.allow-latency": "200 ms",
            "table.exec.mini-batch.size": "5000",
        },
    ),
}


def environment(cmd: dict, settings: dict[str, str]) -> TableEnvironment:
    """A streaming TableEnvironment: its jobs run in a local mini-cluster of their own, or on
    the session cluster at ``cmd["rest_port"]`` (already running: a restart then costs only
    the job's own start)."""
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    if cmd.get("rest_port"):
        settings = {
            "execution.target": "remote",
            "rest.address": "localhost",
            "rest.port": str(cmd["rest_port"]),
            **settings,
        }
    for key, value in {"parallelism.default": "2", **settings}.items():
        config.set(key, value)
    return env


def source_table(env: TableEnvironment, path: str, monitor_ms: int | None) -> None:
    monitor = f", 'source.monitor-interval' = '{monitor_ms} ms'" if monitor_ms else ""
    env.execute_sql(
        f"CREATE TABLE s ({COLUMNS}) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json'{monitor})"
    )


def sink_table(env: TableEnvironment, path: str, columns: str = f"({COLUMNS})", fmt: str = "json") -> None:
    # a row format (JSON) rolls its in-progress file by size or age only, checked every minute
    # by default: roll it every 100 ms so that each checkpoint has a file to commit
    env.execute_sql(
        f"CREATE TABLE o {columns} WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = '{fmt}', "
        "'sink.rolling-policy.rollover-interval' = '100 ms', 'sink.rolling-policy.check-interval' = '100 ms')"
    )


def throughput(cmd: dict) -> dict:
    columns, fmt, select, settings = QUERIES[cmd["query"]]
    started = time.perf_counter()
    env = environment(cmd, {"execution.checkpointing.interval": f"{cmd.get('checkpoint_ms', 200)} ms", **settings})
    source_table(env, cmd["source"], None)
    sink_table(env, cmd["out"], columns.format(columns=COLUMNS), fmt)
    result = env.execute_sql(f"INSERT INTO o {select}")
    job = result.get_job_client().get_job_execution_result().result()
    return {"wall_s": time.perf_counter() - started, "net_runtime_s": job.get_net_runtime() / 1000}


def committed(out: str) -> set[str]:
    """The sink's committed files: in-progress and pending ones are hidden (``.part-...``)."""
    return {n for n in os.listdir(out) if not n.startswith(".")} if os.path.isdir(out) else set()


class Watcher(threading.Thread):
    """When each committed output file was first seen (polled every 10 ms)."""

    def __init__(self, out: str):
        super().__init__(daemon=True)
        self.out, self.seen, self.stopping = out, {}, threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            now = time.time()
            for name in committed(self.out) - self.seen.keys():
                self.seen[name] = now
            time.sleep(POLL)

    def first_new(self, old: set[str], timeout: float = 120) -> float:
        """When the first committed file not in ``old`` was seen (waits for one)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            new = [t for name, t in list(self.seen.items()) if name not in old]
            if new:
                return min(new)
            time.sleep(POLL)
        raise TimeoutError(f"no new output committed in {self.out!r}")

    def last_of(self, old: set[str], stopped: float) -> float:
        """When the last of ``old`` (listed once the job had stopped) was committed: seen, or
        ``stopped`` if the poll had not seen it yet."""
        return min(max(self.seen.get(name, stopped) for name in old), stopped)


class Feeder(threading.Thread):
    """One new source file of one record every ``every`` s, written aside and renamed in (the
    source skips hidden files), as a streamql INSERT writes a file."""

    def __init__(self, source: str, every: float = 0.1):
        super().__init__(daemon=True)
        self.source, self.every, self.stopping, self.n = source, every, threading.Event(), 0

    def run(self) -> None:
        while not self.stopping.wait(self.every):
            self.write()

    def write(self) -> None:
        self.n += 1
        write_record(self.source, f"feed-{self.n:06d}", self.n)


def write_record(source: str, name: str, i: int) -> None:
    hidden = os.path.join(source, f".{name}.json")
    with open(hidden, "w") as f:
        f.write(json.dumps({"id": i, "user": f"u{i % 1000}", "cost": 1.0}) + "\n")
    os.rename(hidden, os.path.join(source, f"{name}.json"))


def start_job(cmd: dict, where: str, savepoint: str | None) -> TableResult:
    settings = {
        "execution.checkpointing.interval": f"{cmd.get('checkpoint_ms', 200)} ms",
        "execution.checkpointing.savepoint-dir": savepoints(cmd),
    }
    if savepoint:
        settings["execution.state-recovery.path"] = savepoint
    for attempt in range(PLANNER_ATTEMPTS):
        env = environment(cmd, settings)
        source_table(env, cmd["source"], cmd.get("monitor_ms", 100))
        sink_table(env, os.path.join(cmd["work"], "out"))
        try:
            return env.execute_sql(f"INSERT INTO o SELECT * FROM s WHERE {where}")
        except Exception as e:
            if "metadataHandlerProvider" not in str(e) or attempt == PLANNER_ATTEMPTS - 1:
                raise
            PLANNER_RETRIES.append(time.time())
    raise AssertionError("unreachable")


#: Flink's planner at times fails a statement with ``NullPointerException:
#: metadataHandlerProvider`` (Calcite's metadata handlers are a thread-local, and Py4J may run
#: a call on another Java thread); nothing was submitted, so it is planned again, and each
#: retry is counted in the figures it lands in (``planner_retries``)
PLANNER_ATTEMPTS = 3
PLANNER_RETRIES: list[float] = []


#: how Flink names the savepoint of a stop that wrote it and then failed
SAVEPOINT_OF_FAILED_STOP = re.compile(r"A savepoint has been created at: (\S+), but the corresponding job")


def stop_with_savepoint(job: TableResult, cmd: dict) -> tuple[str, bool]:
    """The savepoint's path, and whether the job failed while stopping after writing it (Flink
    then says to restart from it, which is what the next job does)."""
    try:
        return _stop_with_savepoint(job, cmd), False
    except Exception as e:
        written = SAVEPOINT_OF_FAILED_STOP.search(str(e))
        if not written:
            raise
        return written.group(1), True


def _stop_with_savepoint(job: TableResult, cmd: dict) -> str:
    # PyFlink 2.3's JobClient.stop_with_savepoint calls a Java signature that no longer exists
    # (Flink 1.15 added the savepoint format): call Java's stopWithSavepoint directly
    formats = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType
    client = job.get_job_client()._j_job_client
    return CompletableFuture(client.stopWithSavepoint(False, savepoints(cmd), formats.CANONICAL), str).result()


def savepoints(cmd: dict) -> str:
    return "file://" + os.path.join(cmd["work"], "savepoints")


def running(cmd: dict, watcher: Watcher, savepoint: str | None = None, where: str = FILTERS[0]) -> TableResult:
    """A job started (from ``savepoint``) whose output has been committed at least once since."""
    old = committed(watcher.out)
    job = start_job(cmd, where, savepoint)
    watcher.first_new(old)
    return job


def upgrade(cmd: dict) -> dict:
    out = os.path.join(cmd["work"], "out")
    watcher, feeder = Watcher(out), Feeder(cmd["source"])
    watcher.start()
    feeder.start()
    retried = len(PLANNER_RETRIES)
    try:
        job = running(cmd, watcher)
        time.sleep(3)
        asked = time.time()
        savepoint, failed = stop_with_savepoint(job, cmd)
        stopped = time.time()
        old = committed(out)  # all the stopped job committed (the savepoint commits its last files)
        job = start_job(cmd, FILTERS[1], savepoint)
        first = watcher.first_new(old)
        last = watcher.last_of(old, stopped)
        job.get_job_client().cancel().result()
    finally:
        feeder.stopping.set()
        watcher.stopping.set()
    return {
        "gap_s": first - last,
        "stop_with_savepoint_s": stopped - asked,
        "restart_to_first_output_s": first - stopped,
        "stop_failed": failed,
        "records_fed": feeder.n,
        "planner_retries": len(PLANNER_RETRIES) - retried,
    }


def pause_resume(cmd: dict) -> dict:
    out = os.path.join(cmd["work"], "out")
    watcher = Watcher(out)
    watcher.start()
    write_record(cmd["source"], "first", 0)
    try:
        job = running(cmd, watcher)
        time.sleep(1.0)  # idle
        t0 = time.time()
        savepoint, failed = stop_with_savepoint(job, cmd)
        paused = time.time() - t0
        write_record(cmd["source"], "while-paused", 1)
        old = committed(out)
        t0 = time.time()
        job = start_job(cmd, FILTERS[0], savepoint)
        resumed = watcher.first_new(old) - t0
        job.get_job_client().cancel().result()
    finally:
        watcher.stopping.set()
    return {"pause_s": paused, "resume_to_first_output_s": resumed, "stop_failed": failed}


#: the job ``start`` left running, for ``cancel``
RUNNING: list[TableResult] = []


def start(cmd: dict) -> dict:
    """The filter started on ``source`` (the caller feeds it and watches its output)."""
    RUNNING.append(start_job(cmd, FILTERS[0], None))
    return {}


def cancel(cmd: dict) -> dict:
    RUNNING.pop().get_job_client().cancel().result()
    return {}


OPS = {"throughput": throughput, "upgrade": upgrade, "pause_resume": pause_resume, "start": start, "cancel": cancel}


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            answer = OPS[cmd["op"]](cmd)
        except Exception as e:  # the parent reports it and stops; Java's last cause says why
            causes = [line for line in str(e).splitlines() if line.startswith("Caused by")]
            answer = {"error": causes[-1] if causes else f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
