"""The runtime on a real Spark standalone cluster: a master and a worker on 127.0.0.1 from
pip's pyspark, the runtime submitted by SubmitRuntimeOperator through the Spark provider's
hook (client mode: the driver beside Airflow, executors on the worker), a query run, paused
and resumed, and the application stopped cleanly. Topics and checkpoints are on a path the
driver and the executors both reach (one machine here; a shared filesystem on a real one)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import requests

from .airflow_support import run_dag, set_connection, streamql_connection
from .conftest import _free_port
from .support import insert, table, wait_until

PIPELINE = """
CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
CREATE TABLE stats AS SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM valid GROUP BY user;
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker (1 core, 1 GiB); yields the master's URLs."""
    import pyspark
    spark_home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    work = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SPARK_HOME": spark_home, "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work)}
    port, ui = _free_port(), _free_port()
    started = []

    def start(name, *args):
        log = open(work / f"{name}.log", "w")
        started.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True))
    start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
          "--webui-port", str(ui))
    start("worker", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
          "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(work / "work"))
    state = lambda: requests.get(f"http://127.0.0.1:{ui}/json/", timeout=5).json()

    def workers_alive():
        try:
            return state()["aliveworkers"] >= 1
        except (requests.ConnectionError, ValueError):
            return False
    try:
        wait_until(workers_alive, 120, "the standalone master with a live worker")
        yield {"master": f"spark://127.0.0.1:{port}", "port": port, "state": state, "logs": work}
    finally:
        for proc in reversed(started):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)


def alive(pid: int) -> bool:
    """The process runs (an exited child not yet reaped is a zombie: not alive)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_runtime_on_a_standalone_cluster(cluster, sqlite_engine, home, monkeypatch, airflow_db, capfd):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    set_connection(monkeypatch, "streamql_default", streamql_connection(engine.catalog.url, home))
    set_connection(monkeypatch, "spark_cluster", json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster["port"],
         "extra": {"deploy-mode": "client"}}))
    run = run_dag("t_submit_runtime", capfd, spark_conn_id="spark_cluster",
                  conf={"spark.executor.memory": "512m", "spark.cores.max": "1", "spark.ui.enabled": "false"})
    pid = run.xcom("task", "pid")
    try:
        assert run.states == {"task": "success"}, run.log
        runtime = engine.runtimes("default")[0]
        assert runtime["master"] == cluster["master"]
        apps = cluster["state"]()["activeapps"]
        assert [(a["id"], a["name"]) for a in apps] == [(runtime["spark_app_id"], "streamql-default")]
        for query_id in ("CSAS_VALID_1", "CTAS_STATS_2"):
            engine.wait_for_state(query_id, "RUNNING", timeout=180)
        insert(engine, "purchases", [(1, "ann", 5.0), (2, "bob", -1.0), (3, "ann", 2.5)])
        engine.wait_caught_up("CSAS_VALID_1", timeout=120)
        engine.wait_caught_up("CTAS_STATS_2", timeout=120)
        assert table(engine, "stats") == {"ann": (2, 7.5)}

        paused = run_dag("t_pause", capfd, query_id="CTAS_STATS_2")
        assert paused.xcom("task", "state") == "PAUSED"
        insert(engine, "purchases", [(4, "bob", 4.0)])
        engine.wait_caught_up("CSAS_VALID_1", timeout=120)
        assert table(engine, "stats") == {"ann": (2, 7.5)}
        resumed = run_dag("t_resume", capfd, query_id="CTAS_STATS_2")
        assert resumed.xcom("task", "state") == "RUNNING"
        engine.wait_caught_up("CTAS_STATS_2", timeout=120)
        assert table(engine, "stats") == {"ann": (2, 7.5), "bob": (1, 4.0)}
    finally:
        # stop the application cleanly: SIGTERM to the driver, as a supervisor would
        driver = next((r["pid"] for r in engine.runtimes("default")), None)
        if driver:
            os.kill(driver, signal.SIGTERM)
        wait_until(lambda: not engine.runtimes("default"), 120, "the runtime to stop")
        if pid:
            wait_until(lambda: not alive(pid), 60, "spark-submit to exit")
    finished = cluster["state"]()
    assert finished["activeapps"] == []
    assert [(a["id"], a["state"]) for a in finished["completedapps"]] == [(runtime["spark_app_id"], "FINISHED")]
    assert {q["state"] for q in engine.queries()} == {"UNASSIGNED"}  # stopped, resumable by the next runtime
