"""Query events as Airflow asset events, end to end: a real Airflow (api-server, scheduler,
dag-processor and triggerer on a PostgreSQL metadata database, LocalExecutor) runs the
example repair DAG (dags/streamql_repair.py) when its AssetWatcher's QueryEventTrigger sees
a query held at a poison pill, and the DAG resumes the query past the bad record."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from airflow_provider_streamql.views.events import EventFeed

from .conftest import REPO, _free_port, _new_pg_database
from .support import wait_until
from .test_bad_records import ids, produce

MALFORMED = '{"id": 3, "user": "u3", "product": "pen", "cost": 1.5'
PIPELINE = """
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE, quantity INT) WITH (value_format='JSON');
CREATE STREAM valid_purchases WITH (on_error='PAUSE') AS SELECT * FROM purchases WHERE cost > 0;
"""
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


def purchase(i: int) -> str:
    return json.dumps({"id": i, "user": f"u{i}", "product": "pen", "cost": 1.5, "quantity": 1})


@pytest.fixture
def airflow(tmp_path, postgres_server, sqlite_engine):
    """Airflow's four components, serving a DAG folder that holds only the repair DAG, with
    the test's streamql catalog as ``streamql_default``."""
    from cryptography.fernet import Fernet

    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(os.path.join(REPO, "dags", "streamql_repair.py"), dags)
    port = _free_port()
    home = tmp_path / "airflow"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    metadata = _new_pg_database(postgres_server)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata,  # psycopg 3 is async too (no asyncpg here)
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API_AUTH__JWT_SECRET": "streamql-test-secret",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
        "AIRFLOW__STREAMQL__POLL_INTERVAL": "0.5",
        "AIRFLOW_CONN_STREAMQL_DEFAULT": json.dumps({"conn_type": "streamql", "extra": {
            "catalog": str(sqlite_engine.catalog.url), "home": sqlite_engine.home}}),
    })
    migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    processes = {}
    for name in COMPONENTS:
        args = ["api-server", "-H", "127.0.0.1", "-p", str(port), "-w", "1"] if name == "api-server" else [name]
        log = open(tmp_path / f"{name}.log", "w")
        processes[name] = subprocess.Popen([sys.executable, "-m", "airflow", *args], env=env, stdout=log,
                                           stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    db = create_engine(metadata)

    def logs() -> str:
        return "\n".join(f"--- {n}\n" + (tmp_path / f"{n}.log").read_text()[-2500:] for n in COMPONENTS)

    yield {"db": db, "logs": logs, "processes": processes}
    for process in processes.values():
        os.killpg(process.pid, signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    db.dispose()


def rows(airflow, sql: str, **params) -> list:
    with airflow["db"].connect() as conn:
        return list(conn.execute(text(sql), params))


def test_a_query_held_at_a_poison_pill_is_resumed_by_the_dag_its_event_triggers(airflow, sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    engine.wait_for_state("CSAS_VALID_PURCHASES_1", "RUNNING", timeout=120)

    def alive() -> bool:
        dead = [n for n, p in airflow["processes"].items() if p.poll() is not None]
        assert not dead, f"{dead} exited:\n{airflow['logs']()}"
        return True

    # the dag processor has parsed the DAG and registered its watcher's trigger
    wait_until(lambda: alive() and rows(airflow, "SELECT id FROM trigger WHERE classpath LIKE '%QueryEventTrigger'"),
               180, "the asset watcher's trigger in the metadata database")
    produce(engine, "purchases", [purchase(1), purchase(2)], "part-0.json")
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=60)
    assert rows(airflow, "SELECT run_id FROM dag_run WHERE dag_id = 'streamql_repair'") == []
    # the other events of a running query, as a watcher of them would see them
    feed = EventFeed("test", "CSAS_VALID_PURCHASES_1", ["caught_up", "held", "error", "upgraded"])
    [caught_up] = feed.poll(engine)
    assert (caught_up.kind, caught_up.key) == ("caught_up", str(engine.progress("CSAS_VALID_PURCHASES_1").batch_id))
    feed.acknowledge(engine, caught_up)
    assert feed.poll(engine) == []

    produce(engine, "purchases", [MALFORMED, purchase(4)], "part-1.json")
    engine.wait_for_state("CSAS_VALID_PURCHASES_1", "PAUSED", timeout=90)

    def repaired():
        alive()
        runs = rows(airflow, "SELECT run_type, state FROM dag_run WHERE dag_id = 'streamql_repair'")
        assert all(state not in ("failed",) for _type, state in runs), airflow["logs"]()
        return runs if runs and runs[0][1] == "success" else None

    runs = wait_until(repaired, 240, "the repair DAG run")
    assert [tuple(r) for r in runs] == [("asset_triggered", "success")]
    # the event that started it, as the task read it
    [(extra,)] = rows(airflow, "SELECT extra FROM asset_event")
    payload = (json.loads(extra) if isinstance(extra, str) else extra)["payload"]
    assert (payload["event"], payload["query_id"], payload["details"]["bad_records"]) == (
        "held", "CSAS_VALID_PURCHASES_1", 1)

    # resumed past the bad record: the rest of its batch and later input go through
    engine.wait_for_state("CSAS_VALID_PURCHASES_1", "RUNNING", timeout=60)
    produce(engine, "purchases", [purchase(5)], "part-2.json")
    engine.wait_caught_up("CSAS_VALID_PURCHASES_1", timeout=90)
    assert ids(engine, "valid_purchases") == [1, 2, 4, 5]
    [record] = engine.bad_records("CSAS_VALID_PURCHASES_1")
    assert (record.status, record.raw) == ("SKIPPED", MALFORMED)
    assert record.handled_by.startswith("airflow:dag=streamql_repair/")
    [(raw, status)] = engine.execute("SELECT raw, status FROM CSAS_VALID_PURCHASES_1_DLQ")[0].rows
    assert (raw, status) == (MALFORMED, "SKIPPED")
    # delivered once: the trigger keeps running, and the hold it reported is not reported again
    with engine.catalog.engine.connect() as conn:
        cursors = list(conn.execute(text("SELECT query_id, kind, last_key FROM event_cursors WHERE consumer != 'test'")))
    assert cursors == [("CSAS_VALID_PURCHASES_1", "held", str(engine.catalog.commands.last_hold("CSAS_VALID_PURCHASES_1")))]
    assert len(rows(airflow, "SELECT run_id FROM dag_run WHERE dag_id = 'streamql_repair'")) == 1
