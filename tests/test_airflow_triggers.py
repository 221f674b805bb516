"""The trigger behind every deferrable wait, run with asyncio against a real catalog, and
round-tripped the way the triggerer stores it; the conditions it carries; the provider's
registration with Airflow."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from airflow_provider_streamql.conditions import (
    AllOf,
    CaughtUp,
    Condition,
    ProgressSince,
    QueriesInState,
    VersionRunning,
)
from airflow_provider_streamql.triggers.streamql import StreamQLConditionTrigger

from .airflow_support import set_connection, streamql_connection

CONDITIONS = [
    QueriesInState(["csas_a_1"], ["running"]),
    QueriesInState(None, ["PAUSED", "DESIRED"], pipeline="p", fail_on_error=False),
    VersionRunning("CSAS_A_1", 3, ready=True),
    ProgressSince("CSAS_A_1", batches=2, since_batch=7, since_rows=40),
    ProgressSince("CSAS_A_1", rows=10),
    CaughtUp("CSAS_A_1", as_of=1_700_000_000.5),
    AllOf.of(QueriesInState(["CSAS_A_1"], ["RUNNING"]), VersionRunning("CSAS_A_1", 2)),
]


@pytest.mark.parametrize("condition", CONDITIONS, ids=lambda c: c.kind)
def test_conditions_round_trip_through_their_dicts(condition):
    again = Condition.from_dict(condition.to_dict())
    assert type(again) is type(condition) and again.to_dict() == condition.to_dict()


def test_bad_conditions_are_refused():
    from airflow_provider_streamql.errors import ValidationError
    with pytest.raises(ValidationError, match="unknown condition kind 'nap'"):
        Condition.from_dict({"kind": "nap"})
    with pytest.raises(ValidationError, match="progress needs batches or rows"):
        ProgressSince("CSAS_A_1")


def test_trigger_round_trips_through_the_triggerers_storage(airflow_db):
    from importlib import import_module

    from airflow.models.trigger import Trigger
    import_string = lambda path: getattr(import_module(path.rpartition(".")[0]), path.rpartition(".")[2])
    trigger = StreamQLConditionTrigger(condition=CONDITIONS[2].to_dict(), streamql_conn_id="sq",
                                       end_at=1_800_000_000.0, poll_interval=0.5, pipeline="p")
    classpath, kwargs = trigger.serialize()
    stored = Trigger._decrypt_kwargs(Trigger.encrypt_kwargs(kwargs))
    again = import_string(classpath)(**stored)
    assert again.serialize() == (classpath, kwargs)
    assert Condition.from_dict(again.condition).to_dict() == CONDITIONS[2].to_dict()


async def first_event(trigger: StreamQLConditionTrigger) -> dict:
    async for event in trigger.run():
        return event.payload
    raise AssertionError("the trigger ended without an event")


def fire(condition: Condition, *, within: float = 60.0) -> dict:
    trigger = StreamQLConditionTrigger(condition=condition.to_dict(), streamql_conn_id="streamql_default",
                                       end_at=time.time() + within, poll_interval=0.1)
    return asyncio.run(asyncio.wait_for(first_event(trigger), within + 30))


@pytest.fixture
def catalog_conn(sqlite_engine, home, monkeypatch, airflow_db):
    set_connection(monkeypatch, "streamql_default", streamql_connection(sqlite_engine.catalog.url, home))
    sqlite_engine.execute("CREATE STREAM s (id INT); CREATE STREAM a AS SELECT * FROM s;")
    return sqlite_engine


def test_trigger_fires_when_the_runtime_reports_the_state(catalog_conn, runtimes):
    engine = catalog_conn
    runtimes.start(engine)
    engine.wait_for_state("CSAS_A_1", "RUNNING", timeout=90)
    engine.execute("PAUSE CSAS_A_1")
    event = fire(QueriesInState(["CSAS_A_1"], ["PAUSED"]))
    assert event["status"] == "done" and event["details"]["states"] == {"CSAS_A_1": "PAUSED"}
    assert engine.state("CSAS_A_1") == "PAUSED"


def test_trigger_fails_when_the_state_can_no_longer_come(catalog_conn):
    catalog_conn.execute("TERMINATE CSAS_A_1")
    event = fire(QueriesInState(["CSAS_A_1"], ["RUNNING"]))
    assert event["status"] == "failed"
    assert event["message"].startswith("query CSAS_A_1 was terminated while waiting for RUNNING; ")
    assert (event["wait"]["ending"], event["wait"]["stop"]) == ("FAILED_FAST", "TERMINATED")
    dropped = fire(QueriesInState(["CSAS_GONE_7"], ["RUNNING"]))
    assert (dropped["status"], dropped["message"]) == ("failed", "no query 'CSAS_GONE_7'")


def test_trigger_times_out_by_itself(catalog_conn):
    started = time.monotonic()
    event = fire(QueriesInState(["CSAS_A_1"], ["RUNNING"]), within=1.0)  # no runtime runs it
    assert event["status"] == "timeout" and "CSAS_A_1 is PENDING" in event["message"]
    assert time.monotonic() - started < 20


def test_the_provider_is_registered_with_airflow(airflow_db):
    from airflow.providers_manager import ProvidersManager
    manager = ProvidersManager()
    assert "airflow-provider-streamql" in manager.providers
    assert manager.hooks["streamql"].hook_class_name == "airflow_provider_streamql.hooks.streamql.StreamQLHook"
    assert {"airflow_provider_streamql.operators.links.StreamQLQueryLink",
            "airflow_provider_streamql.operators.links.SparkUILink"} <= set(manager.extra_links_class_names)
    assert any(t.package_name == "airflow-provider-streamql" for t in manager.trigger)
    listed = subprocess.run([sys.executable, "-m", "airflow", "providers", "list"],
                            capture_output=True, text=True, timeout=120)
    assert "airflow-provider-streamql" in listed.stdout


def test_the_core_runs_without_airflow(tmp_path):
    """Nothing above the line imports Airflow: the CLI works with airflow unimportable."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nclass Block:\n"
                       "    def find_spec(self, name, path=None, target=None):\n"
                       "        if name == 'airflow' or name.startswith('airflow.'):\n"
                       "            raise ImportError('airflow is blocked in this test')\n"
                       "sys.meta_path.insert(0, Block())\n")
    code = ("import airflow_provider_streamql.engine, airflow_provider_streamql.cli, "
            "airflow_provider_streamql.conditions, "
            "airflow_provider_streamql.get_provider_info, airflow_provider_streamql.runtime.driver\n"
            "from airflow_provider_streamql.cli import main\n"
            f"raise SystemExit(main(['exec', '--home', {str(tmp_path / 'home')!r}, "
            "'CREATE STREAM s (id INT); SHOW STREAMS']))")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "S    | JSON" in out.stdout
    blocked = subprocess.run([sys.executable, "-c", "import airflow"], env=env, capture_output=True, text=True)
    assert "airflow is blocked" in blocked.stderr  # the blocker works
