"""The catalog password never shows: a password-bearing PostgreSQL URL (the test server
trusts every local login, so the password is accepted and ignored) is used everywhere, and
every output is searched for it: the CLI's output, the errors of wrong and malformed URLs
(the core's, the hook's and the UI's), the spark-submit command the runtime operator builds
for each kind of master and what its hook logs, and the task logs and XCom of operator runs."""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys

import pytest

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import CatalogError

from .airflow_support import run_dag, set_connection, streamql_connection
from .conftest import _new_pg_database
from .support import cli, wait_until

PASSWORD = "s3cret-Pa55"
FILE = "/run/secrets/streamql-catalog"  # where a cluster-mode driver reads the password
PIPELINE = "CREATE STREAM purchases (id INT KEY, cost DOUBLE); CREATE STREAM big AS SELECT * FROM purchases WHERE cost > 9;"


def assert_hidden(*outputs) -> None:
    for output in outputs:
        assert PASSWORD not in str(output), output


@pytest.fixture(scope="module")
def catalog(postgres_server) -> str:
    """A fresh PostgreSQL catalog whose URL carries the password, with two queries."""
    url = _new_pg_database(postgres_server).replace("streamql@", f"streamql:{PASSWORD}@")
    assert PASSWORD in url
    return url


@pytest.fixture
def cli_env(catalog, home):
    return {**os.environ, "STREAMQL_HOME": home, "STREAMQL_CATALOG": catalog}


# -- the core: CLI and Catalog ----------------------------------------------------------

# (arguments, exit code, what it prints): the URL from $STREAMQL_CATALOG or --catalog
CLI_CASES = [
    (["exec", PIPELINE], 0, "CSAS_BIG_"),
    (["exec", "--json", "SHOW QUERIES"], 0, "CSAS_BIG_"),
    (["queries"], 0, "CSAS_BIG_"),
    (["migrate"], 0, "streamql:***@"),
    (["exec", "PAUSE NO_SUCH_QUERY"], 2, "NO_SUCH_QUERY"),
    (["queries", "--catalog", "postgresql://streamql:{pw}@127.0.0.1:1/nowhere"], 1, "Connection refused"),
    (["queries", "--catalog", "postgresql://streamql:{pw}@127.0.0.1:notaport/db"], 1, "port that is not a number"),
    (["queries", "--catalog", "nosuchdb://streamql:{pw}@host/db"], 1, "no database driver 'nosuchdb'"),
    (["queries", "--catalog", "mysql://streamql:{pw}@host/db"], 1, "not installed"),
    (["queries", "--catalog", "postgresql://streamql:{pw}/db"], 1, "port that is not a number"),
    (["queries", "--catalog", "postgresql://streamql:{pw}@x@host/db"], 1, "percent-encode"),
    (["queries", "--catalog", "user:{pw}"], 1, "not a database URL"),
]


@pytest.mark.parametrize("args, code, shown", CLI_CASES)
def test_the_cli_never_prints_the_password(cli_env, args, code, shown):
    done = cli(cli_env, *[a.format(pw=PASSWORD) for a in args])
    assert done.returncode == code, done.stdout + done.stderr
    assert shown in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert_hidden(done.stdout, done.stderr)


# (URL, what the error says)
BAD_URLS = [
    ("postgresql+psycopg://streamql:{pw}@127.0.0.1:1/nowhere", "Connection refused"),
    ("postgresql://streamql:{pw}@host:notaport/db", "port that is not a number"),
    ("postgresql://streamql:{pw}@host:99999/db", "cannot open catalog"),
    ("nosuchdb://streamql:{pw}@host/db", "no database driver 'nosuchdb'"),
    ("postgresql+nosuchdriver://streamql:{pw}@host/db", "no database driver 'postgresql+nosuchdriver'"),
    ("mysql://streamql:{pw}@host/db", "not installed"),
    ("postgresql://streamql:{pw}/db", "port that is not a number"),
    ("postgresql://streamql:{pw}@x@127.0.0.1/db", "percent-encode"),
    ("postgresql://streamql@127.0.0.1:1/db?password={pw}", "Connection refused"),
    ("streamql:{pw}", "not a database URL"),
    ("streamql:{pw}@", "not a database URL"),
    ("sqlite:////nonexistent/{pw}/catalog.db", "unable to open database file"),
]


@pytest.mark.parametrize("url, said", BAD_URLS)
def test_a_wrong_catalog_url_is_a_catalog_error_without_the_password(url, said):
    with pytest.raises(CatalogError) as error:
        Catalog(url.format(pw=PASSWORD))
    assert said in error.value.message
    if not url.startswith("sqlite"):  # a SQLite path is no secret: it is shown
        assert_hidden(error.value.message)


def test_a_password_file_reaches_the_runtime_catalog(catalog, tmp_path, monkeypatch):
    """A cluster-mode driver gets STREAMQL_CATALOG without a password and a file holding it."""
    from airflow_provider_streamql.catalog.urls import without_password
    bare = without_password(catalog)
    assert PASSWORD not in bare and bare.startswith("postgresql+psycopg://streamql@")
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    monkeypatch.setenv("STREAMQL_CATALOG_PASSWORD_FILE", str(tmp_path / "pw"))
    assert Catalog(bare).url == catalog
    monkeypatch.setenv("STREAMQL_CATALOG_PASSWORD_FILE", str(tmp_path / "missing"))
    with pytest.raises(CatalogError, match="cannot read the catalog password file"):
        Catalog(bare)


# -- the Airflow half: hook, UI, operator -----------------------------------------------

MALFORMED = ["postgresql://streamql:{pw}@host:notaport/db", "postgresql://streamql:{pw}/db", "streamql:{pw}",
             "postgresql:/streamql:{pw}@host/db", "postgresql://streamql:{pw}@host/db:5432:x"]


def connection(catalog: str, password: str | None = None):
    from airflow.sdk import Connection
    return Connection(conn_id="streamql_default", conn_type="streamql", password=password,
                      extra=json.dumps({"catalog": catalog, "home": "/tmp/streamql-secrets"}))


@pytest.mark.parametrize("extra", MALFORMED)
def test_the_hook_and_the_ui_never_echo_a_malformed_catalog(extra, monkeypatch):
    from fastapi import HTTPException

    from airflow_provider_streamql.hooks.streamql import StreamQLHook
    from airflow_provider_streamql.plugins import app
    catalog = extra.format(pw=PASSWORD)
    try:
        StreamQLHook.engine_for(connection(catalog))
        hook_error = "no error"
    except Exception as e:
        hook_error = str(e)
    assert "catalog" in hook_error, hook_error  # it says what is wrong
    monkeypatch.setenv("AIRFLOW_CONN_STREAMQL_DEFAULT", connection(catalog).as_json())
    with pytest.raises(HTTPException) as error:
        app.engine()
    assert error.value.status_code == 503
    assert_hidden(hook_error, error.value.detail)


@pytest.mark.parametrize("catalog_url", ["postgresql+psycopg://streamql:{pw}@127.0.0.1:1/nowhere",
                                         "postgresql+psycopg://streamql@127.0.0.1:1/nowhere"])
def test_the_ui_503_of_an_unreachable_catalog_is_masked(catalog_url, monkeypatch):
    """Once with the password in the URL, once in the connection's Password field."""
    from fastapi import HTTPException

    from airflow_provider_streamql.plugins import app
    password = None if "{pw}" in catalog_url else PASSWORD
    conn = connection(catalog_url.format(pw=PASSWORD), password)
    monkeypatch.setenv("AIRFLOW_CONN_STREAMQL_DEFAULT", conn.as_json())
    with pytest.raises(HTTPException) as error:
        app.engine()
    assert error.value.status_code == 503 and "Connection refused" in error.value.detail
    assert_hidden(error.value.detail)


SPARK = {"local": {"host": "local[*]"},
         "standalone": {"host": "spark://h", "port": 7077},
         "yarn_client": {"host": "yarn", "extra": {"deploy-mode": "client"}},
         "yarn_cluster": {"host": "yarn", "extra": {"deploy-mode": "cluster"}},
         "k8s_cluster": {"host": "k8s://https://k8s.example:6443", "extra": {"deploy-mode": "cluster"}}}

# (Spark connection, operator arguments, how the password reaches the driver:
#  "process env" / a --conf naming where it is / the refusal's words)
SUBMITS = [
    ("local", {}, "process env"),
    ("standalone", {}, "process env"),
    ("yarn_client", {}, "process env"),
    ("yarn_cluster", {"catalog_password_file": FILE}, f"spark.yarn.appMasterEnv.STREAMQL_CATALOG_PASSWORD_FILE={FILE}"),
    ("k8s_cluster", {"catalog_password_secret": "pg:password"},
     "spark.kubernetes.driver.secretKeyRef.STREAMQL_CATALOG_PASSWORD=pg:password"),
    ("k8s_cluster", {"catalog_password_file": FILE}, f"spark.kubernetes.driverEnv.STREAMQL_CATALOG_PASSWORD_FILE={FILE}"),
    ("yarn_cluster", {}, "refused: catalog_password_file="),
    ("k8s_cluster", {}, "refused: catalog_password_secret="),
    ("yarn_cluster", {"catalog_password_secret": "pg:password"}, "refused: is not Kubernetes"),
    ("k8s_cluster", {"catalog_password_secret": "pg"}, "refused: is not '<secret name>:<key>'"),
]


@pytest.mark.parametrize("spark, kwargs, route", SUBMITS)
def test_the_spark_submit_command_never_holds_the_password(catalog, monkeypatch, caplog, capfd,
                                                           spark, kwargs, route):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_streamql.hooks.streamql import StreamQLHook
    from airflow_provider_streamql.operators.runtime import APPLICATION, SubmitRuntimeOperator
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SECRETS", json.dumps({"conn_type": "spark", **SPARK[spark]}))
    operator = SubmitRuntimeOperator(task_id="submit", **kwargs)
    settings = StreamQLHook.settings(connection(catalog))
    caplog.set_level(logging.DEBUG)
    if route.startswith("refused: "):
        with pytest.raises(AirflowFailException) as error:
            operator._hook("spark_secrets", "default", settings)
        assert route.removeprefix("refused: ") in str(error.value)
        assert_hidden(error.value, caplog.text, capfd.readouterr())
        return
    if spark.startswith("k8s"):
        # the Spark hook needs the cncf.kubernetes provider (not installed here) for a k8s
        # master: check what the operator hands it, and map env_vars as the hook does
        from airflow.sdk import BaseHook
        env, conf, process_env = operator._submit_settings(BaseHook.get_connection("spark_secrets"),
                                                           "default", settings)
        command = [f"{key}={value}" for key, value in conf.items()]
        command += [f"spark.kubernetes.driverEnv.{key}={value}" for key, value in env.items()]
        built = (env, conf)
    else:
        hook, process_env = operator._hook("spark_secrets", "default", settings)
        command = hook._build_spark_submit_command(APPLICATION)
        built = (hook._env, hook._env_vars, hook._conf)
    if route == "process env":
        assert process_env == {"STREAMQL_CATALOG_PASSWORD": PASSWORD}
    else:
        assert route in command and process_env == {}
    logged = caplog.text + str(capfd.readouterr())
    assert spark.startswith("k8s") or "Spark-Submit cmd" in logged
    assert_hidden(command, built, logged)


KAFKA_SECRET = "Qq1 Zz2-kafka"  # the password in the Kafka JAAS configuration: never shown
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{KAFKA_SECRET}";'
PROPERTIES = f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS}\n"
KAFKA_FILE = "/run/secrets/kafka-client.properties"

# (Spark connection, operator arguments, the connection's kafka_properties, how they reach the
#  driver: "process env" / a --conf naming where they are / the refusal's words)
KAFKA_SUBMITS = [
    ("local", {}, PROPERTIES, "process env"),
    ("standalone", {}, PROPERTIES, "process env"),
    ("yarn_client", {}, PROPERTIES, "process env"),
    ("local", {}, {"security.protocol": "SASL_SSL", "sasl.jaas.config": JAAS}, "process env"),  # a JSON object
    ("local", {"conf": {"spark.streamql.kafka.security.protocol": "SASL_SSL"}}, PROPERTIES,
     "process env"),  # a setting that is no secret still goes in conf
    ("yarn_cluster", {"catalog_password_file": FILE, "kafka_properties_file": KAFKA_FILE}, PROPERTIES,
     f"spark.yarn.appMasterEnv.STREAMQL_KAFKA_PROPERTIES_FILE={KAFKA_FILE}"),
    ("k8s_cluster", {"catalog_password_file": FILE, "kafka_properties_secret": "kafka:client.properties"}, PROPERTIES,
     "spark.kubernetes.driver.secretKeyRef.STREAMQL_KAFKA_PROPERTIES=kafka:client.properties"),
    ("k8s_cluster", {"catalog_password_file": FILE, "kafka_properties_file": KAFKA_FILE}, PROPERTIES,
     f"spark.kubernetes.driverEnv.STREAMQL_KAFKA_PROPERTIES_FILE={KAFKA_FILE}"),
    ("yarn_cluster", {"catalog_password_file": FILE}, PROPERTIES, "refused: kafka_properties_file='<path>'"),
    ("yarn_cluster", {"catalog_password_file": FILE, "kafka_properties_secret": "k:p"}, PROPERTIES,
     "refused: kafka_properties_secret names a Kubernetes secret, but master 'yarn' is not Kubernetes"),
    ("local", {"kafka_properties_secret": "k:p", "kafka_properties_file": KAFKA_FILE}, None,
     "refused: give kafka_properties_secret or kafka_properties_file, not both"),
    ("local", {"conf": {"spark.streamql.kafka.sasl.jaas.config": JAAS}}, None,
     "refused: 'spark.streamql.kafka.sasl.jaas.config' is a Kafka secret"),
    ("yarn_cluster", {"conf": {"spark.streamql.kafka.ssl.truststore.password": KAFKA_SECRET}}, None,
     "refused: 'spark.streamql.kafka.ssl.truststore.password' is a Kafka secret"),
    ("local", {"runtime_args": ["--interval", "1", "--conf", f"spark.streamql.kafka.sasl.jaas.config={JAAS}"]}, None,
     "refused: 'spark.streamql.kafka.sasl.jaas.config' is a Kafka secret"),
    ("local", {"runtime_args": [f"--conf=spark.streamql.kafka.ssl.key.password={KAFKA_SECRET}"]}, None,
     "refused: 'spark.streamql.kafka.ssl.key.password' is a Kafka secret"),
    ("local", {}, f"sasl.jaas.config={JAAS}\\u12", "refused: line 1 has a malformed \\uXXXX escape"),
    ("local", {}, f"={KAFKA_SECRET}", "refused: kafka_properties: line 1 has a value but no setting name"),
    ("local", {}, 42, "refused: kafka_properties must be Kafka client properties"),
]


def submit_command(operator, spark: str, settings: dict):
    """(argv, what the hook was built from, the process-only secrets) of a submit."""
    from airflow.sdk import BaseHook

    from airflow_provider_streamql.operators.runtime import APPLICATION
    if spark.startswith("k8s"):
        # the Spark hook needs the cncf.kubernetes provider (not installed here) for a k8s
        # master: check what the operator hands it, and map env_vars as the hook does
        env, conf, process_env = operator._submit_settings(BaseHook.get_connection("spark_secrets"),
                                                           "default", settings)
        command = [f"{key}={value}" for key, value in conf.items()]
        command += [f"spark.kubernetes.driverEnv.{key}={value}" for key, value in env.items()]
        return command, (env, conf), process_env
    hook, process_env = operator._hook("spark_secrets", "default", settings)
    command = hook._build_spark_submit_command(APPLICATION)
    return command, (hook._env, hook._env_vars, hook._conf), process_env


@pytest.mark.parametrize("spark, kwargs, properties, route", KAFKA_SUBMITS)
def test_kafka_secrets_never_reach_the_spark_submit_command(catalog, monkeypatch, caplog, capfd,
                                                            spark, kwargs, properties, route):
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowException

    from airflow_provider_streamql.hooks.streamql import StreamQLHook
    from airflow_provider_streamql.operators.runtime import SubmitRuntimeOperator
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SECRETS", json.dumps({"conn_type": "spark", **SPARK[spark]}))
    caplog.set_level(logging.DEBUG)
    operator = SubmitRuntimeOperator(task_id="submit", **kwargs)
    conn = Connection(conn_id="streamql_default", conn_type="streamql", extra=json.dumps(
        {"catalog": catalog, "home": "/tmp/streamql-secrets", "kafka_properties": properties}))
    if route.startswith("refused: "):
        with pytest.raises(AirflowException) as error:
            submit_command(operator, spark, StreamQLHook.settings(conn))
        assert route.removeprefix("refused: ") in str(error.value)
        assert "Traceback" not in str(error.value)
        assert KAFKA_SECRET not in str(error.value) and KAFKA_SECRET not in caplog.text + str(capfd.readouterr())
        return
    command, built, process_env = submit_command(operator, spark, StreamQLHook.settings(conn))
    if route == "process env":
        from airflow_provider_streamql.storage.kafka_properties import parse
        assert parse(process_env["STREAMQL_KAFKA_PROPERTIES"], "env")["sasl.jaas.config"] == JAAS
    else:
        assert route in command and process_env == {}
    if "conf" in kwargs:  # settings that are no secrets stay where they were
        assert "spark.streamql.kafka.security.protocol=SASL_SSL" in command
    logged = caplog.text + str(capfd.readouterr())
    for shown in (command, built, logged):
        assert KAFKA_SECRET not in str(shown) and PASSWORD not in str(shown)


FAKE_SPARK_SUBMIT = """#!{python}
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "received.json"), "w") as f:
    json.dump({{"argv": sys.argv, "env": dict(os.environ)}}, f)
"""
#: the worker's environment in these tests: Airflow's secrets, connections and variables, and
#: what spark-submit, Java, Spark, Hadoop, Kerberos and streamql read
WORKER_ENV = {
    "AIRFLOW__CORE__FERNET_KEY": "fernet-Qq1Zz2", "AIRFLOW__API_AUTH__JWT_SECRET": "jwt-Qq1Zz2",
    "AIRFLOW_CONN_METADATA": "postgresql://airflow:Qq1Zz2@db/airflow", "AIRFLOW_VAR_API_TOKEN": "token-Qq1Zz2",
    "AWS_SECRET_ACCESS_KEY": "aws-Qq1Zz2", "GITHUB_TOKEN": "gh-Qq1Zz2",
    "STREAMQL_CATALOG_PASSWORD": "worker-Qq1Zz2", "STREAMQL_KAFKA_PROPERTIES": "ssl.key.password=worker-Qq1Zz2",
    "JAVA_HOME": "/opt/java", "SPARK_CONF_DIR": "/etc/spark", "HADOOP_CONF_DIR": "/etc/hadoop",
    "YARN_CONF_DIR": "/etc/yarn", "KRB5CCNAME": "/tmp/krb5cc", "LC_ALL": "C.UTF-8", "TZ": "UTC",
    "STREAMQL_ALLOWED_PATHS": "/data", "AWS_PROFILE": "streamql", "MY_SETTING": "1",
    "PYTHONPATH": os.environ.get("PYTHONPATH", "/opt/spark/python"),  # set, whether or not the test run sets it
}
#: what the worker's environment passes (by default; pass_env adds AWS_PROFILE and MY_SETTING)
PASSED = ["PATH", "JAVA_HOME", "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "KRB5CCNAME", "LC_ALL", "TZ",
          "PYTHONPATH", "STREAMQL_ALLOWED_PATHS"]

# (Spark connection, operator arguments, the secrets it hands spark-submit's process)
ENVIRONMENTS = [
    ("local", {}, {"STREAMQL_CATALOG_PASSWORD": PASSWORD, "STREAMQL_KAFKA_PROPERTIES": PROPERTIES}),
    ("standalone", {}, {"STREAMQL_CATALOG_PASSWORD": PASSWORD, "STREAMQL_KAFKA_PROPERTIES": PROPERTIES}),
    ("yarn_client", {}, {"STREAMQL_CATALOG_PASSWORD": PASSWORD, "STREAMQL_KAFKA_PROPERTIES": PROPERTIES}),
    ("local", {"pass_env": ["AWS_PROFILE", "MY_*"]},
     {"STREAMQL_CATALOG_PASSWORD": PASSWORD, "STREAMQL_KAFKA_PROPERTIES": PROPERTIES}),
    ("yarn_cluster", {"catalog_password_file": FILE, "kafka_properties_file": KAFKA_FILE}, {}),
    ("local", {"pass_env": ["AIRFLOW__CORE__FERNET_KEY"]}, "pass_env 'AIRFLOW__CORE__FERNET_KEY': AIRFLOW__*"),
    ("local", {"pass_env": ["AIRFLOW_CONN_*"]}, "pass_env 'AIRFLOW_CONN_*': AIRFLOW__*, AIRFLOW_CONN_*"),
    ("local", {"pass_env": ["STREAMQL_CATALOG_PASSWORD"]}, "never reach spark-submit or the driver"),
    ("local", {"pass_env": ["*"]}, "pass_env '*' is not an environment variable name or NAME*"),
    ("local", {"pass_env": ["A B"]}, "pass_env 'A B' is not an environment variable name"),
]


@pytest.mark.parametrize("spark, kwargs, secrets", ENVIRONMENTS)
def test_spark_submit_gets_an_allowlisted_environment(catalog, tmp_path, monkeypatch, spark, kwargs, secrets):
    """A spark-submit on PATH that writes down what it received: its environment holds what
    the allowlist names and the operator's own settings, never Airflow's secrets."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_streamql.hooks.streamql import StreamQLHook
    from airflow_provider_streamql.operators.runtime import APPLICATION, SubmitRuntimeOperator, _matches
    fake = tmp_path / "bin" / "spark-submit"
    fake.parent.mkdir()
    fake.write_text(FAKE_SPARK_SUBMIT.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    for name, value in WORKER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SECRETS", json.dumps({"conn_type": "spark", **SPARK[spark]}))
    conn = Connection(conn_id="streamql_default", conn_type="streamql", extra=json.dumps(
        {"catalog": catalog, "home": str(tmp_path / "home"), "kafka_properties": PROPERTIES}))
    operator = SubmitRuntimeOperator(task_id="submit", **kwargs)
    if isinstance(secrets, str):
        with pytest.raises(AirflowFailException, match=re.escape(secrets)):
            operator._hook("spark_secrets", "default", StreamQLHook.settings(conn))
        return
    hook, _ = operator._hook("spark_secrets", "default", StreamQLHook.settings(conn))
    if SPARK[spark].get("extra", {}).get("deploy-mode") == "cluster":
        hook.submit(APPLICATION)  # as the operator submits in cluster mode: to its end
    else:
        engine = Engine(catalog, home=str(tmp_path / "home"))  # the runtime log's place is the engine's
        try:
            process, _log = operator._launch_detached(hook, engine, "default")
        finally:
            engine.close()
        assert process.wait(60) == 0
    received = json.loads((tmp_path / "bin" / "received.json").read_text())
    env, argv = received["env"], received["argv"]
    assert not [name for name in env if name.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_"))], env
    assert "Qq1Zz2" not in json.dumps(received) and KAFKA_SECRET not in " ".join(argv)
    assert {name: env.get(name) for name in PASSED} == {name: os.environ[name] for name in PASSED}
    passed_too = ["AWS_PROFILE", "MY_SETTING"] if kwargs.get("pass_env") else []
    assert [name for name in ("AWS_PROFILE", "MY_SETTING") if name in env] == passed_too
    # everything else it got is the operator's: where and what to serve, the secrets, pip's Spark
    assert {k: v for k, v in env.items() if k in secrets} == secrets
    assert all(_matches(name, (*SubmitRuntimeOperator.PASSED_ENV, *passed_too)) for name in env), env
    assert env["STREAMQL_HOME"] == str(tmp_path / "home") and env["STREAMQL_PIPELINE"] == "default"
    assert env["STREAMQL_CATALOG"].startswith("postgresql+psycopg://streamql@")


# -- operator runs under dag.test() ------------------------------------------------------

def run_values(run) -> list:
    """Every XCom value the run left."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id)).all()
        return [(row.key, XComModel.deserialize_value(row)) for row in rows]


@pytest.fixture
def airflow(catalog, home, monkeypatch, airflow_db):
    set_connection(monkeypatch, "streamql_default", streamql_connection(catalog, home))
    return catalog


def test_a_refused_cluster_submit_shows_no_password(airflow, monkeypatch, capfd):
    set_connection(monkeypatch, "spark_yarn", json.dumps({"conn_type": "spark", **SPARK["yarn_cluster"]}))
    run = run_dag("t_submit_runtime", capfd, spark_conn_id="spark_yarn")
    assert run.states == {"task": "failed"}
    assert "catalog_password_file=" in run.log
    assert_hidden(run.log, run_values(run))


def test_a_runtime_started_in_client_mode_gets_the_password_in_its_environment_only(airflow, home, monkeypatch,
                                                                                    capfd):
    """... and the Kafka properties; and of the worker's environment none of Airflow's
    settings, connections or variables (the metadata database URL is among them)."""
    set_connection(monkeypatch, "spark_local", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    set_connection(monkeypatch, "streamql_default", streamql_connection(airflow, home, kafka_properties=PROPERTIES))
    monkeypatch.setenv("AIRFLOW_VAR_STREAMQL_TOKEN", "token-of-the-worker")
    assert os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]  # set for every test (conftest.py)
    run = run_dag("t_submit_runtime", capfd, spark_conn_id="spark_local", conf={"spark.ui.enabled": "false"})
    pid = run.xcom("task", "pid")
    try:
        assert run.states == {"task": "success"}, run.log
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace")
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().decode(errors="replace").split("\0")
        assert f"STREAMQL_CATALOG_PASSWORD={PASSWORD}" in environ  # how it reaches the driver
        assert any(e.startswith("STREAMQL_CATALOG=postgresql+psycopg://streamql@") for e in environ)
        assert f"STREAMQL_KAFKA_PROPERTIES={PROPERTIES}" in environ
        # every process of the driver's session: spark-submit's JVM and the Python driver
        argvs, environs = [argv], [environ]
        for proc in os.listdir("/proc"):
            if proc.isdigit():
                try:
                    if os.getsid(int(proc)) == pid:
                        with open(f"/proc/{proc}/cmdline", "rb") as f:
                            argvs.append(f.read().decode(errors="replace"))
                        with open(f"/proc/{proc}/environ", "rb") as f:
                            environs.append(f.read().decode(errors="replace").split("\0"))
                except (OSError, ProcessLookupError):
                    pass
        assert len(argvs) > 1
        airflows = [e.partition("=")[0] for env in environs for e in env
                    if e.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_"))]
        assert airflows == []
        with open(run.xcom("task", "log")) as log:
            driver_log = log.read()
        assert "serving pipeline 'default'" in driver_log
        # read at start, by name
        assert "Kafka properties read at start: sasl.jaas.config, sasl.mechanism, security.protocol" in driver_log
        assert_hidden(run.log, run_values(run), driver_log, *argvs)
        for shown in (run.log, run_values(run), driver_log, *argvs):
            assert KAFKA_SECRET not in str(shown)
    finally:
        if pid:
            os.killpg(pid, signal.SIGTERM)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                wait_until(lambda: subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode,
                           60, "the runtime to stop")
