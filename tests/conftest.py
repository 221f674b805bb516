"""Shared fixtures: one local SparkSession per test process, a real PostgreSQL server, a real
Kafka broker (started when a test first asks for it), catalogs on both backends, and runtimes
running in threads on the shared session."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid

import pytest

# Airflow reads its configuration when first imported: a throwaway home with a SQLite
# metadata database, no example DAGs, and two DAG bundles: the repository's example DAGs
# and the test DAGs (dag.test() runs only DAGs of a configured bundle).
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRFLOW_HOME = tempfile.mkdtemp(prefix="streamql-airflow-")
_bundle = lambda name, path: {"name": name, "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                              "kwargs": {"path": path, "refresh_interval": 0}}
os.environ.update({
    "AIRFLOW_HOME": AIRFLOW_HOME,
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    # as the compose stack sets it: streamql's waits run in the triggerer (Airflow ships false)
    "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
    "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(REPO, "dags"),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
    "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps([
        _bundle("dags-folder", os.path.join(REPO, "dags")),
        _bundle("streamql-tests", os.path.join(REPO, "tests", "dags"))]),
})
# Spark's Kafka connector, as scripts/setup installs it: a runtime (in a thread or a process)
# puts it on its classpath when it first starts a query on a Kafka topic
os.environ.setdefault("STREAMQL_KAFKA_CONNECTOR", os.path.join(REPO, ".kafka", "connector"))
# and Spark's Avro functions, which it puts there when it first starts a query on an AVRO topic
os.environ.setdefault("STREAMQL_AVRO_JARS", os.path.join(REPO, ".kafka", "formats"))

from airflow_provider_streamql.catalog import Catalog
from airflow_provider_streamql.engine import Engine

from .support import CLI

# Debian's postgresql package (15 on Debian 12; Ubuntu ships 14 or 16): the newest found
PG_BIN = os.environ.get("STREAMQL_PG_BIN") or max(
    glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
    default="/usr/lib/postgresql/15/bin")


@pytest.fixture(scope="session")
def spark():
    from airflow_provider_streamql.runtime import build_session
    session = build_session("local[2]", "streamql-tests", {"spark.ui.enabled": "false"})
    yield session
    session.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL 15 started for this test session (or $STREAMQL_TEST_PG_URL)."""
    if os.environ.get("STREAMQL_TEST_PG_URL"):
        yield os.environ["STREAMQL_TEST_PG_URL"]
        return
    if not os.path.exists(os.path.join(PG_BIN, "initdb")):
        pytest.fail(f"PostgreSQL server binaries not found in {PG_BIN!r}; run scripts/setup "
                    f"(apt-get install postgresql) or set STREAMQL_TEST_PG_URL")
    data = tempfile.mkdtemp(prefix="streamql-pg-")
    port = _free_port()
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(data, "postgres")
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True)
    run(f"{PG_BIN}/initdb", "-D", data, "-U", "streamql", "--auth=trust", "-E", "UTF8")
    run(f"{PG_BIN}/pg_ctl", "-D", data, "-l", f"{data}/log", "-w", "-o",
        f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        yield f"postgresql+psycopg://streamql@127.0.0.1:{port}/postgres"
    finally:
        # immediate: the data folder is thrown away, and open pools must not delay the exit
        run(f"{PG_BIN}/pg_ctl", "-D", data, "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_broker():
    """A real Apache Kafka broker (one KRaft node on loopback, tests/kafka_broker.py), started
    once for the test session when a test first asks for it, stopped at its end."""
    from .kafka_broker import BrokerError, KafkaBroker
    try:
        broker = KafkaBroker().start()
    except BrokerError as e:
        pytest.fail(str(e))
    yield broker
    broker.stop()


@pytest.fixture
def kafka_topics(kafka_broker, request):
    """The session's broker as a test sees it: topics it makes have names no other test has."""
    from .kafka_broker import Topics
    return Topics(kafka_broker, request.node.name)


@pytest.fixture
def kafka_spark(spark, kafka_broker):
    """The shared session with the broker as its runtimes' Kafka (their bootstrap servers), and
    Spark's Kafka connector on its classpath (as a runtime puts it there)."""
    from airflow_provider_streamql.runtime import kafka_connector
    kafka_connector.ensure(spark)
    spark.conf.set("spark.streamql.kafka.bootstrap.servers", kafka_broker.bootstrap)
    yield spark
    spark.conf.unset("spark.streamql.kafka.bootstrap.servers")


def _new_pg_database(server_url: str) -> str:
    from sqlalchemy import create_engine, text
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return server_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request, tmp_path):
    """A fresh, empty catalog database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/catalog.db"
    return _new_pg_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path}/catalog.db"


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "home"
    path.mkdir()
    return str(path)


@pytest.fixture
def engine(catalog_url, home):
    e = Engine(catalog_url, home=home, issuer="test")
    yield e
    e.close()


#: Lease TTL of the tests' runtimes. A runtime renews its leases as it reconciles each query
#: (and at each batch commit), so a lease outlives its renewal only by what is left of the
#: TTL after the longest reconcile pass; a pass that starts or swaps queries can take many
#: seconds on a busy 2-core machine. Leases that expire under a live runtime show its
#: queries UNASSIGNED and let a second runtime take them, so the TTL is far above any pass.
#: Runtimes that stop cleanly release their leases; only a test that kills a runtime
#: (kill -9) waits for them to expire, and passes its own shorter ``lease_ttl``.
LEASE_TTL = 60.0
#: Lease TTL of a runtime a test kills with kill -9: its successor takes its queries once
#: their leases expire, this long after its last renewal (with LEASE_TTL, a minute of the
#: test spent waiting). Short, to keep such tests quick; long enough that a reconcile pass of
#: the tests' small pipelines renews every lease in time.
KILLED_LEASE_TTL = 10.0


class RuntimeThreads:
    """Runtimes of the test, each reconciling in its own thread on the shared session."""

    def __init__(self, spark):
        self.spark = spark
        self.started: list = []

    def start(self, engine: Engine, pipeline: str = "default", **kw):
        from airflow_provider_streamql.runtime import Runtime
        kw.setdefault("interval", 0.2)
        kw.setdefault("lease_ttl", LEASE_TTL)
        runtime = Runtime(Catalog(engine.catalog.url), pipeline, self.spark, **kw)
        thread = threading.Thread(target=runtime.run, name=f"runtime-{pipeline}", daemon=True)
        thread.start()
        self.started.append((runtime, thread))
        return runtime

    def stop(self, runtime) -> None:
        for r, thread in self.started:
            if r is runtime:
                r.stop()
                thread.join(60)

    def stop_all(self) -> None:
        for runtime, thread in self.started:
            runtime.stop()
            thread.join(60)
        for query in self.spark.streams.active:
            query.stop()


@pytest.fixture
def sqlite_engine(sqlite_url, home):
    """An engine on SQLite only: for runtime tests that need not run on both backends."""
    e = Engine(sqlite_url, home=home, issuer="test")
    yield e
    e.close()


@pytest.fixture
def runtimes(spark):
    threads = RuntimeThreads(spark)
    yield threads
    threads.stop_all()


@pytest.fixture
def env(sqlite_engine, home):
    return {**os.environ, "STREAMQL_HOME": home, "STREAMQL_CATALOG": sqlite_engine.catalog.url,
            "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def processes(tmp_path, env):
    started: list[subprocess.Popen] = []

    def start(pipeline: str = "default", *args: str, lease_ttl: float = LEASE_TTL) -> subprocess.Popen:
        """A `streamql runtime` process (more ``args`` to it); ``proc.log`` is its output."""
        path = tmp_path / f"runtime-{pipeline}-{len(started)}.log"
        with open(path, "w") as log:
            proc = subprocess.Popen(
                CLI + ["runtime", "--pipeline", pipeline, "--master", "local[1]", "--interval", "0.2",
                       "--lease-ttl", str(lease_ttl), "--conf", "spark.ui.enabled=false", *args],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        proc.log = str(path)
        started.append(proc)
        return proc
    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="session")
def airflow_db():
    """The Airflow metadata database, migrated once per test session."""
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                   capture_output=True, timeout=300)
    return AIRFLOW_HOME


# -- the fast selection: `pytest -m "not slow"` ---------------------------------------------
#: fixtures that start Spark, runtime processes, a Kafka broker or Airflow's metadata database
SLOW_FIXTURES = {"spark", "runtimes", "processes", "kafka_broker", "airflow_db", "openlineage"}
#: modules whose tests start Airflow, an api-server, a browser or spark-submit themselves
SLOW_MODULES = {"test_airflow_operators", "test_airflow_triggers", "test_cluster", "test_compose",
                "test_docs", "test_example_dags", "test_processes", "test_secrets", "test_ui"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(item.fixturenames) or item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
