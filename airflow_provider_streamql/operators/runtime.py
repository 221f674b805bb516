"""SubmitRuntimeOperator: start the runtime (the long-running Spark driver) of a pipeline
through the Spark provider's spark-submit hook."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any, Sequence

from airflow.sdk import BaseHook, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from ..engine import Engine
from .base import StreamQLOperator, push
from .links import SparkUILink

APPLICATION = os.path.join(os.path.dirname(os.path.dirname(__file__)), "runtime", "main.py")
WAIT_APP_COMPLETION = {"yarn": "spark.yarn.submit.waitAppCompletion",
                       "k8s": "spark.kubernetes.submission.waitAppCompletion"}


class SubmitRuntimeOperator(StreamQLOperator):
    """Make sure a runtime serves ``pipeline``: return at once if a live runtime (one that
    heartbeats) already does, else spark-submit one and wait until it heartbeats.

    The Spark connection gives the master (``local[*]``, ``spark://host:7077``, ``yarn``,
    ``k8s://...``) and deploy mode. A missing Spark connection fails the task: unlike the
    Spark hook, this operator never falls back to master ``yarn``. In client mode (local,
    standalone) the driver runs on the worker, detached from the task, logging to
    ``<home>/runtimes/``; in cluster mode (YARN, Kubernetes) spark-submit returns once the
    application is accepted. The catalog URL reaches the driver in ``STREAMQL_CATALOG`` and
    its password in ``STREAMQL_CATALOG_PASSWORD`` (a name Spark redacts), never in argv.

    XCom: ``runtime_id``, ``spark_app_id``, ``spark_ui_url`` and, for a driver started
    here in client mode, ``pid`` and ``log``. Returns the runtime ID.

    :param spark_conn_id: the Spark connection; default the streamql connection's
        ``spark_conn_id``, else ``spark_default``. (templated)
    :param conf: Spark configuration for the runtime. (templated)
    :param packages: Maven coordinates for spark-submit ``--packages`` (e.g. the Kafka
        connector). (templated)
    :param py_files: files for ``--py-files`` (e.g. this package as a zip on a cluster).
    :param runtime_args: extra ``streamql runtime`` arguments (``--interval``, ...).
    :param spark_submit_kwargs: further SparkSubmitHook arguments (memory, cores, ...).
    """

    template_fields = ("pipeline", "spark_conn_id", "conf", "packages")
    operator_extra_links = (SparkUILink(),)
    ui_color = "#f0e4d0"

    def __init__(self, *, spark_conn_id: str | None = None, conf: dict[str, Any] | None = None,
                 packages: str | None = None, py_files: str | None = None,
                 runtime_args: Sequence[str] = (), spark_submit_kwargs: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("timeout", 300.0)
        kwargs.setdefault("poll_interval", 1.0)
        super().__init__(**kwargs)
        self.spark_conn_id = spark_conn_id
        self.conf = conf or {}
        self.packages = packages
        self.py_files = py_files
        self.runtime_args = list(runtime_args)
        self.spark_submit_kwargs = spark_submit_kwargs or {}

    def apply(self, context: Context) -> str:
        from ..hooks.streamql import StreamQLHook
        engine = self.engine(context)
        pipeline = engine.pipeline
        live = engine.runtimes(pipeline)
        if live:
            self.log.info("runtime %s already serves pipeline %r; nothing to submit", live[-1]["id"], pipeline)
            return self._push(context, live[-1])
        settings = StreamQLHook.settings(BaseHook.get_connection(self.streamql_conn_id))
        spark_conn_id = self.spark_conn_id or settings["spark_conn_id"] or "spark_default"
        hook = self._hook(spark_conn_id, pipeline, settings)
        master, mode = hook._connection["master"], hook._connection["deploy_mode"] or "client"
        self.log.info("submitting the runtime of pipeline %r to %s (%s mode)", pipeline, master, mode)
        if mode == "cluster":
            if not (hook._is_yarn or hook._is_kubernetes):
                raise AirflowFailException(f"master {master!r}: Spark standalone cannot run Python "
                                           f"applications in cluster deploy mode; use client mode")
            hook.submit(APPLICATION)  # returns once accepted: waitAppCompletion=false
            process, log_path = None, None
        else:
            process, log_path = self._launch_detached(hook, settings["home"], pipeline)
        if not self.wait:
            push(context, pid=process.pid if process else None, log=log_path, spark_ui_url=None)
            return ""
        runtime = self._wait_for_heartbeat(engine, pipeline, process, log_path)
        push(context, pid=process.pid if process else None, log=log_path)
        return self._push(context, runtime)

    def _hook(self, spark_conn_id: str, pipeline: str, settings: dict[str, Any]):
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
        try:
            spark_conn = BaseHook.get_connection(spark_conn_id)
        except AirflowNotFoundException:
            raise AirflowFailException(
                f"Spark connection {spark_conn_id!r} does not exist; SubmitRuntimeOperator does "
                f"not fall back to master 'yarn'. Create a connection of type 'spark' whose host "
                f"is the master (local[*], spark://host:7077, yarn, k8s://https://host)") from None
        if not spark_conn.host:
            raise AirflowFailException(f"Spark connection {spark_conn_id!r} names no master (its host is empty)")
        env = {"STREAMQL_HOME": settings["home"], "STREAMQL_PIPELINE": pipeline}
        if settings["catalog"]:
            from sqlalchemy import make_url
            url = make_url(settings["catalog"])
            env["STREAMQL_CATALOG"] = url.set(password=None).render_as_string(hide_password=False)
            if url.password:
                env["STREAMQL_CATALOG_PASSWORD"] = url.password
        conf = {**self.conf}
        for kind, key in WAIT_APP_COMPLETION.items():
            if kind in spark_conn.host:
                conf.setdefault(key, "false")
        kwargs = {"spark_binary": _spark_binary(spark_conn.extra_dejson.get("spark-binary", "spark-submit")),
                  **self.spark_submit_kwargs}
        return SparkSubmitHook(
            conf=conf, conn_id=spark_conn_id, name=f"streamql-{pipeline}", packages=self.packages,
            py_files=self.py_files, env_vars=env,
            application_args=["--pipeline", pipeline, "--home", settings["home"], *self.runtime_args],
            **kwargs)

    def _launch_detached(self, hook, home: str, pipeline: str) -> tuple[subprocess.Popen, str]:
        # The hook's submit() follows spark-submit to its end; a runtime never ends, so the
        # hook builds the command and the driver is started in a session of its own.
        command = hook._build_spark_submit_command(APPLICATION)
        logs = os.path.join(home, "runtimes")
        os.makedirs(logs, exist_ok=True)
        log_path = os.path.join(logs, f"{pipeline}-{time.strftime('%Y%m%d-%H%M%S')}.log")
        env = {**_pip_spark_env(command[0]), **os.environ, **(hook._env or {})}
        with open(log_path, "ab") as log:
            process = subprocess.Popen(command, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.log.info("runtime driver started (pid %d), log %s", process.pid, log_path)
        return process, log_path

    def _wait_for_heartbeat(self, engine: Engine, pipeline: str, process, log_path) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            live = engine.runtimes(pipeline)
            if live:
                return live[-1]
            if process is not None and process.poll() is not None:
                raise AirflowException(f"the runtime of pipeline {pipeline!r} exited with code "
                                       f"{process.returncode} before it served the pipeline:\n"
                                       f"{_tail(log_path)}")
            if time.monotonic() >= deadline:
                raise AirflowException(f"no runtime of pipeline {pipeline!r} heartbeated within "
                                       f"{self.timeout:g}s" + (f"; its log:\n{_tail(log_path)}" if log_path else ""))
            time.sleep(self.poll_interval)

    def _push(self, context: Context, runtime: dict[str, Any]) -> str:
        push(context, runtime_id=runtime["id"], spark_app_id=runtime.get("spark_app_id"),
             spark_ui_url=runtime.get("spark_ui_url"))
        return runtime["id"]


def _spark_binary(name: str) -> str:
    """``spark-submit`` from PATH, else the one pip's pyspark put beside this Python."""
    if shutil.which(name):
        return name
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.exists(beside) else name


def _pip_spark_env(binary: str) -> dict[str, str]:
    """pip's spark-submit finds Spark and Python through ``python`` on PATH, which a worker
    need not have: point it at this interpreter and its pyspark (unless set already)."""
    if binary != os.path.join(os.path.dirname(sys.executable), os.path.basename(binary)):
        return {}
    import pyspark
    return {"SPARK_HOME": os.path.dirname(pyspark.__file__), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}


def _tail(path: str | None, lines: int = 20) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])
