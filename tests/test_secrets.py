"""The catalog password never shows: a password-bearing PostgreSQL URL (the test server
trusts every local login, so the password is accepted and ignored) is used everywhere, and
every output is searched for it: the CLI's output, the errors of wrong and malformed URLs
(the core's, the hook's and the UI's), the spark-submit command the runtime operator builds
for each kind of master and what its hook logs, and the task logs and XCom of operator runs."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess

import pytest

from airflow_provider_streamql.catalog import Catalog
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


def test_a_runtime_started_in_client_mode_gets_the_password_in_its_environment_only(airflow, monkeypatch, capfd):
    set_connection(monkeypatch, "spark_local", json.dumps({"conn_type": "spark", "host": "local[1]"}))
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
        # every process of the driver's session: spark-submit's JVM and the Python driver
        argvs = [argv]
        for proc in os.listdir("/proc"):
            if proc.isdigit():
                try:
                    if os.getsid(int(proc)) == pid:
                        with open(f"/proc/{proc}/cmdline", "rb") as f:
                            argvs.append(f.read().decode(errors="replace"))
                except (OSError, ProcessLookupError):
                    pass
        assert len(argvs) > 1
        with open(run.xcom("task", "log")) as log:
            driver_log = log.read()
        assert "serving pipeline 'default'" in driver_log
        assert_hidden(run.log, run_values(run), driver_log, *argvs)
    finally:
        if pid:
            os.killpg(pid, signal.SIGTERM)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                wait_until(lambda: subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode,
                           60, "the runtime to stop")
