"""SubmitRuntimeOperator: start the runtime (the long-running Spark driver) of a pipeline
through the Spark provider's spark-submit hook."""

# long module: one operator, with every route by which its secrets and environment reach spark-submit

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.providers.common.compat.sdk import conf as airflow_conf
from airflow.providers.common.compat.sdk import mask_secret
from airflow.sdk import BaseHook, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from ..engine import Engine
from ..errors import StateError
from .base import StreamQLOperator, push
from .links import SparkUILink

APPLICATION = os.path.join(os.path.dirname(os.path.dirname(__file__)), "runtime", "main.py")
WAIT_APP_COMPLETION = {
    "yarn": "spark.yarn.submit.waitAppCompletion",
    "k8s": "spark.kubernetes.submission.waitAppCompletion",
}


class SubmitRuntimeOperator(StreamQLOperator):
    """Make sure a runtime serves ``pipeline``: return at once if a live runtime (one that
    heartbeats) already does, else spark-submit one and wait until it heartbeats.

    The Spark connection gives the master (``local[*]``, ``spark://host:7077``, ``yarn``,
    ``k8s://...``) and deploy mode. A missing Spark connection fails the task: unlike the
    Spark hook, this operator never falls back to master ``yarn``. In client mode (local,
    standalone) the driver runs on the worker, detached from the task, logging to
    ``<home>/runtimes/``; in cluster mode (YARN, Kubernetes) spark-submit returns once the
    application is accepted.

    The catalog URL reaches the driver in ``STREAMQL_CATALOG``, without its password, which
    never goes into spark-submit's arguments (``ps`` shows them to every user of the machine,
    and the YARN and Kubernetes masters turn the hook's ``env_vars`` into ``--conf``
    arguments). In client mode the driver is a child of spark-submit and gets the password
    in the environment of that process (``STREAMQL_CATALOG_PASSWORD``). A cluster-mode
    driver runs elsewhere, so the password must already be there: name a Kubernetes secret
    (``catalog_password_secret``) or a file the driver can read (``catalog_password_file``);
    with neither, a catalog URL with a password is refused in cluster mode.

    Kafka secrets (``sasl.jaas.config``, ``ssl.*.password``, ...) take the same routes: the
    streamql connection's ``kafka_properties`` (Kafka client properties) reach a client-mode
    driver in ``STREAMQL_KAFKA_PROPERTIES``, in the spark-submit process's environment; a
    cluster-mode driver reads them from a Kubernetes secret (``kafka_properties_secret``) or a
    file (``kafka_properties_file``). A Kafka secret in ``conf`` or ``runtime_args``
    (``spark.streamql.kafka.sasl.jaas.config``, ...) is refused, naming its key.

    spark-submit and the driver get the environment the Spark connection and the settings
    above make, and of the worker's own environment only what :attr:`PASSED_ENV` (and
    ``pass_env``) name: never Airflow's configuration, connections or variables
    (:attr:`WITHHELD_ENV`), which hold the metadata database URL and the Fernet key.

    XCom: ``runtime_id``, ``spark_app_id``, ``spark_ui_url`` and, for a driver started
    here in client mode, ``pid`` and ``log``. Returns the runtime ID.

    :param spark_conn_id: the Spark connection; default the streamql connection's
        ``spark_conn_id``, else ``spark_default``. (templated)
    :param conf: Spark configuration for the runtime. (templated)
    :param packages: Maven coordinates for spark-submit ``--packages`` (e.g. the Kafka
        connector). (templated)
    :param py_files: files for ``--py-files`` (e.g. this package as a zip on a cluster).
    :param runtime_args: extra ``streamql runtime`` arguments (``--interval``, ...).
    :param catalog_password_secret: ``<secret name>:<key>`` of a Kubernetes secret holding the
        catalog password, for a driver on Kubernetes (Spark's
        ``spark.kubernetes.driver.secretKeyRef``). (templated)
    :param catalog_password_file: path, as the driver sees it, of a file whose first line is
        the catalog password (e.g. shipped to a YARN container with ``files``, or a mounted
        Kubernetes secret). (templated)
    :param kafka_properties_secret: ``<secret name>:<key>`` of a Kubernetes secret holding
        the runtime's Kafka client properties, for a driver on Kubernetes. (templated)
    :param kafka_properties_file: path, as the driver sees it, of a Kafka client properties
        file (``sasl.jaas.config=...`` lines) the runtime reads at start. (templated)
    :param pass_env: more of the worker's environment variables for spark-submit and the
        driver: names, or prefixes ending in ``*`` (never one of :attr:`WITHHELD_ENV`).
    :param spark_submit_kwargs: further SparkSubmitHook arguments (memory, cores, ...).
    :param openlineage_inject_parent_job_info: pass the task's OpenLineage run to the Spark
        application as its parent (``spark.openlineage.parent*``), as the Spark provider's
        ``SparkSubmitOperator`` does; default ``[openlineage] spark_inject_parent_job_info``.
    """

    template_fields = (
        "pipeline",
        "spark_conn_id",
        "conf",
        "packages",
        "catalog_password_secret",
        "catalog_password_file",
        "kafka_properties_secret",
        "kafka_properties_file",
    )
    #: the worker's environment variables spark-submit and the driver get (a name, or a prefix
    #: ending in ``*``): what spark-submit, Java, Python, Spark, Hadoop, YARN, Kubernetes,
    #: Kerberos and streamql read
    PASSED_ENV = (
        *("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG", "LANGUAGE", "LC_*", "LD_LIBRARY_PATH"),
        *("JAVA_HOME", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"),
        *("PYTHONPATH", "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONUNBUFFERED", "VIRTUAL_ENV"),
        *("SPARK_*", "PYSPARK_*", "HADOOP_*", "YARN_CONF_DIR"),
        *("KRB5CCNAME", "KRB5_CONFIG", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"),
        "STREAMQL_*",
    )
    #: never passed from the worker, whatever PASSED_ENV and ``pass_env`` say: Airflow's
    #: configuration (the metadata database URL, the Fernet key, ...), connections and
    #: variables, and the secrets this operator hands the driver its own way
    WITHHELD_ENV = (
        "AIRFLOW__*",
        "AIRFLOW_CONN_*",
        "AIRFLOW_VAR_*",
        "STREAMQL_CATALOG_PASSWORD",
        Engine.KAFKA_PROPERTIES_ENV,
    )
    operator_extra_links = (SparkUILink(),)
    ui_color = "#f0e4d0"

    def __init__(
        self,
        *,
        spark_conn_id: str | None = None,
        conf: dict[str, Any] | None = None,
        packages: str | None = None,
        py_files: str | None = None,
        runtime_args: Sequence[str] = (),
        spark_submit_kwargs: dict[str, Any] | None = None,
        catalog_password_secret: str | None = None,
        catalog_password_file: str | None = None,
        kafka_properties_secret: str | None = None,
        kafka_properties_file: str | None = None,
        pass_env: Sequence[str] = (),
        openlineage_inject_parent_job_info: bool | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("timeout", 300.0)
        kwargs.setdefault("poll_interval", 1.0)
        super().__init__(**kwargs)
        self.spark_conn_id = spark_conn_id
        self.conf = conf or {}
        self.packages = packages
        self.py_files = py_files
        self.runtime_args = list(runtime_args)
        self.spark_submit_kwargs = spark_submit_kwargs or {}
        self.catalog_password_secret = catalog_password_secret
        self.catalog_password_file = catalog_password_file
        self.kafka_properties_secret = kafka_properties_secret
        self.kafka_properties_file = kafka_properties_file
        self.pass_env = list(pass_env)
        self.openlineage_inject_parent_job_info = (
            airflow_conf.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False)
            if openlineage_inject_parent_job_info is None
            else openlineage_inject_parent_job_info
        )

    def apply(self, context: Context) -> str:
        from ..hooks.streamql import StreamQLHook

        engine = self.engine(context)
        pipeline = engine.pipeline
        live = engine.runtimes(pipeline)
        if live:
            self.log.info("runtime %s already serves pipeline %r; nothing to submit", live[-1]["id"], pipeline)
            return self._push(context, live[-1])
        settings = StreamQLHook.settings(BaseHook.get_connection(self.streamql_conn_id))
        # the catalog as this worker opened it (the connection's, else $STREAMQL_CATALOG or
        # SQLite under the home; its password from the connection or the environment)
        settings["catalog"] = engine.catalog_url
        spark_conn_id = self.spark_conn_id or settings["spark_conn_id"] or "spark_default"
        hook, _ = self._hook(spark_conn_id, pipeline, settings, context)
        master, mode = hook._connection["master"], hook._connection["deploy_mode"] or "client"
        self.log.info("submitting the runtime of pipeline %r to %s (%s mode)", pipeline, master, mode)
        if mode == "cluster":
            if not (hook._is_yarn or hook._is_kubernetes):
                raise AirflowFailException(
                    f"master {master!r}: Spark standalone cannot run Python "
                    f"applications in cluster deploy mode; use client mode"
                )
            hook.submit(APPLICATION)  # returns once accepted: waitAppCompletion=false
            process, log_path = None, None
        else:
            process, log_path = self._launch_detached(hook, engine, pipeline)
        if not self.wait:
            push(context, pid=process.pid if process else None, log=log_path, spark_ui_url=None)
            return ""
        runtime = self._wait_for_heartbeat(engine, pipeline, process, log_path)
        push(context, pid=process.pid if process else None, log=log_path)
        return self._push(context, runtime)

    def _hook(self, spark_conn_id: str, pipeline: str, settings: dict[str, Any], context: Context | None = None):
        """The SparkSubmitHook that submits the runtime (spark-submit runs in its
        ``process_env``), and the secrets only that process gets (the catalog password and
        the Kafka properties in client mode: never the hook's ``env_vars``, which YARN and
        Kubernetes masters put into argv)."""
        try:
            spark_conn = BaseHook.get_connection(spark_conn_id)
        except AirflowNotFoundException:
            raise AirflowFailException(
                f"Spark connection {spark_conn_id!r} does not exist; SubmitRuntimeOperator does "
                f"not fall back to master 'yarn'. Create a connection of type 'spark' whose host "
                f"is the master (local[*], spark://host:7077, yarn, k8s://https://host)"
            ) from None
        if not spark_conn.host:
            raise AirflowFailException(f"Spark connection {spark_conn_id!r} names no master (its host is empty)")
        env, conf, secret_env = self._submit_settings(spark_conn, pipeline, settings, context)
        kwargs = {
            "spark_binary": _spark_binary(spark_conn.extra_dejson.get("spark-binary", "spark-submit")),
            **self.spark_submit_kwargs,
        }
        hook = _submit_hook_class()(
            process_env={**_pip_spark_env(kwargs["spark_binary"]), **self._passed_env(), **env, **secret_env},
            conf=conf,
            conn_id=spark_conn_id,
            name=f"streamql-{pipeline}",
            packages=self.packages,
            py_files=self.py_files,
            env_vars=env,
            application_args=["--pipeline", pipeline, "--home", settings["home"], *self.runtime_args],
            **kwargs,
        )
        return hook, secret_env

    def _submit_settings(self, spark_conn, pipeline: str, settings: dict[str, Any], context: Context | None = None):
        """The hook's ``env_vars`` and ``conf`` (both end up in argv on some masters: no
        secret in them), and the spark-submit process's own extra environment. ``conf``
        also carries the connection's Kafka servers unless given, and with
        ``openlineage_inject_parent_job_info`` the task's OpenLineage run as the Spark
        application's parent, as the Spark provider's operator passes it."""
        # where the driver runs, decided as the hook decides it
        mode = self.spark_submit_kwargs.get("deploy_mode") or spark_conn.extra_dejson.get("deploy-mode") or "client"
        env = {"STREAMQL_HOME": settings["home"], "STREAMQL_PIPELINE": pipeline}
        conf = {**self.conf}
        self._refuse_secrets_in_argv(conf)
        if settings.get("kafka_bootstrap_servers"):
            # the runtime's Kafka settings (runtime/kafka.py CONF_PREFIX), never from SQL text
            conf.setdefault("spark.streamql.kafka.bootstrap.servers", settings["kafka_bootstrap_servers"])
        if self.openlineage_inject_parent_job_info and context is not None:
            # a no-op without the OpenLineage provider; keeps spark.openlineage.parent* given in conf
            from airflow.providers.common.compat.openlineage.utils.spark import (
                inject_parent_job_information_into_spark_properties,
            )

            conf = inject_parent_job_information_into_spark_properties(conf, context)
        password = None
        if settings["catalog"]:
            from sqlalchemy import make_url

            env["STREAMQL_CATALOG"] = Engine.url_without_password(settings["catalog"])
            password = make_url(settings["catalog"]).password
        secret_env = self._route("catalog_password", password, spark_conn.host, mode, env, conf)
        secret_env |= self._route("kafka_properties", _kafka_properties(settings), spark_conn.host, mode, env, conf)
        for kind, key in WAIT_APP_COMPLETION.items():
            if kind in spark_conn.host:
                conf.setdefault(key, "false")
        return env, conf, secret_env

    def _refuse_secrets_in_argv(self, conf: Mapping[str, Any]) -> None:
        """A Kafka secret in ``conf`` or ``runtime_args`` would be in spark-submit's or the
        driver's argv: refused, naming its key (never its value)."""
        keys = list(conf)
        args = iter(self.runtime_args)
        for arg in args:
            if arg == "--conf":
                keys.append(next(args, "").partition("=")[0])
            elif arg.startswith("--conf="):
                keys.append(arg.removeprefix("--conf=").partition("=")[0])
        for key in map(str, keys):
            if Engine.kafka_secret_in_argv(key):
                raise AirflowFailException(
                    f"{Engine.kafka_secret_in_argv(key)}; with SubmitRuntimeOperator, in the "
                    f"streamql connection's kafka_properties or a file the driver reads "
                    f"(kafka_properties_file)"
                )

    def _route(
        self, name: str, value: str | None, master: str, mode: str, env: dict[str, str], conf: dict[str, Any]
    ) -> dict[str, str]:
        """How a secret (``name``: ``catalog_password`` or ``kafka_properties``) reaches the
        driver: fills in ``env`` and ``conf`` with where to find it (names, never the secret)
        and returns what only the spark-submit process may get (the secret itself, in client
        mode), in ``STREAMQL_<NAME>`` (``STREAMQL_<NAME>_FILE`` names a file)."""
        secret, path = getattr(self, f"{name}_secret"), getattr(self, f"{name}_file")
        variable = f"STREAMQL_{name.upper()}"
        if secret and path:
            raise AirflowFailException(f"give {name}_secret or {name}_file, not both")
        if secret:
            if "k8s" not in master:
                raise AirflowFailException(
                    f"{name}_secret names a Kubernetes secret, but master {master!r} is not "
                    f"Kubernetes; use {name}_file (a file the driver can read)"
                )
            secret_name, colon, key = secret.partition(":")
            if not (secret_name and colon and key):
                raise AirflowFailException(f"{name}_secret {secret!r} is not '<secret name>:<key>'")
            conf[f"spark.kubernetes.driver.secretKeyRef.{variable}"] = secret
        elif path:
            env[f"{variable}_FILE"] = path
        elif value and mode == "cluster":
            what = {"catalog_password": "the catalog URL has a password"}.get(
                name, "the streamql connection has kafka_properties"
            )
            raise AirflowFailException(
                f"{what}, and a {mode}-mode driver on {master!r} could only get "
                f"it through spark-submit's arguments, which streamql never puts it in. Say where "
                f"the driver finds it: {name}_secret='<secret name>:<key>' (a Kubernetes "
                f"secret) or {name}_file='<path>' (a file the driver can read, e.g. shipped "
                f"with spark_submit_kwargs={{'files': ...}}); or submit in client mode"
            )
        return {variable: value} if value and mode != "cluster" else {}

    def _passed_env(self) -> dict[str, str]:
        """What of the worker's environment spark-submit and the driver get."""
        for name in self.pass_env:
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", name):
                raise AirflowFailException(f"pass_env {name!r} is not an environment variable name or NAME*")
            if _matches(name.rstrip("*"), self.WITHHELD_ENV):
                raise AirflowFailException(
                    f"pass_env {name!r}: {', '.join(self.WITHHELD_ENV)} never reach spark-submit or the driver"
                )
        passed = (*self.PASSED_ENV, *self.pass_env)
        return {k: v for k, v in os.environ.items() if _matches(k, passed) and not _matches(k, self.WITHHELD_ENV)}

    def _launch_detached(self, hook, engine: Engine, pipeline: str) -> tuple[subprocess.Popen, str]:
        # The hook's submit() follows spark-submit to its end; a runtime never ends, so the
        # hook builds the command and the driver is started in a session of its own. The
        # secrets are in the environment of that process only (its children inherit it).
        command = hook._build_spark_submit_command(APPLICATION)
        log_path = engine.runtime_log(pipeline)  # the runtimes folder, and the log in it, are no links out
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                command,
                env=hook.process_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.log.info("runtime driver started (pid %d), log %s", process.pid, log_path)
        return process, log_path

    def _wait_for_heartbeat(self, engine: Engine, pipeline: str, process, log_path) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            live = engine.runtimes(pipeline)
            if live:
                return live[-1]
            if process is not None and process.poll() is not None:
                raise AirflowException(
                    f"the runtime of pipeline {pipeline!r} exited with code "
                    f"{process.returncode} before it served the pipeline:\n"
                    f"{_tail(log_path)}"
                )
            if time.monotonic() >= deadline:
                raise AirflowException(
                    f"no runtime of pipeline {pipeline!r} heartbeated within "
                    f"{self.timeout:g}s" + (f"; its log:\n{_tail(log_path)}" if log_path else "")
                )
            time.sleep(self.poll_interval)

    def _push(self, context: Context, runtime: dict[str, Any]) -> str:
        push(
            context,
            runtime_id=runtime["id"],
            spark_app_id=runtime.get("spark_app_id"),
            spark_ui_url=runtime.get("spark_ui_url"),
        )
        return runtime["id"]


@functools.cache
def _submit_hook_class():
    """The Spark provider's SparkSubmitHook, running spark-submit in ``process_env`` (the
    operator's: the allowlisted part of the worker's environment, ``env_vars`` and the
    secrets), never a copy of the worker's whole environment, which the hook's ``submit``
    otherwise starts from."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class RuntimeSubmitHook(SparkSubmitHook):
        def __init__(self, *, process_env: dict[str, str], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.process_env = process_env

        def _build_spark_submit_command(self, application: str) -> list[str]:
            command = super()._build_spark_submit_command(application)
            self._env = None  # process_env holds env_vars already, without os.environ
            return command

        def submit(self, application: str = "", **kwargs: Any) -> str | None:
            return super().submit(application, **{**kwargs, "env": self.process_env})

    return RuntimeSubmitHook


def _matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether ``name`` is one of ``patterns`` (a name, or a prefix ending in ``*``)."""
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def _kafka_properties(settings: dict[str, Any]) -> str | None:
    """The connection's Kafka properties (else the worker's ``$STREAMQL_KAFKA_PROPERTIES``),
    checked (a malformed line fails the task, naming the line, never a value) and masked in
    the task's logs."""
    text = settings.get("kafka_properties")
    source = "in the streamql connection's kafka_properties"
    if not text:
        text, source = os.environ.get(Engine.KAFKA_PROPERTIES_ENV), f"in ${Engine.KAFKA_PROPERTIES_ENV}"
    if not text:
        return None
    try:
        secrets = Engine.kafka_secrets(text, source)
    except StateError as e:
        raise AirflowFailException(e.message) from None
    for secret in (text, *secrets):
        mask_secret(secret)
    return text


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

    return {
        "SPARK_HOME": os.path.dirname(pyspark.__file__),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def _tail(path: str | None, lines: int = 20) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])
