"""Every wait form ends as soon as what it waits for can no longer come true on its own, and
says why (issue 35): one world on a real runtime holds a query per ending (in ERROR between
the runtime's retries, terminated, held at a bad record, its new version rolled back, caught
up, paused by someone with input waiting), and each form waits on each. A wait that fails fast
or is reached ends long before its timeout (its ending is not TIMED_OUT); one that times out
says what the query was doing."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from dataclasses import dataclass

import pytest

from airflow_provider_streamql.cli.output import WAIT_EXITS
from airflow_provider_streamql.conditions import CaughtUp, Condition, Ending, QueriesInState, VersionRunning
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StateError, WaitFailed, WaitTimeout
from airflow_provider_streamql.triggers.streamql import StreamQLConditionTrigger

from .airflow_support import run_dag, streamql_connection
from .conftest import RuntimeThreads
from .support import CLI, insert, wait_until

WORLD = """
CREATE STREAM bad_in (id INT KEY, user STRING, amount INT);
CREATE STREAM good_in (id INT KEY, user STRING, amount INT);
CREATE STREAM failing WITH (on_error='FAIL') AS SELECT * FROM bad_in;
CREATE STREAM held WITH (on_error='PAUSE') AS SELECT * FROM bad_in;
CREATE STREAM gone AS SELECT * FROM good_in;
CREATE STREAM fine AS SELECT * FROM good_in;
CREATE STREAM paused AS SELECT * FROM good_in;
CREATE STREAM upgraded AS SELECT id, user, amount FROM good_in;
"""
FAILING, HELD, GONE, FINE, PAUSED, UPGRADED = (
    "CSAS_FAILING_1", "CSAS_HELD_2", "CSAS_GONE_3", "CSAS_FINE_4", "CSAS_PAUSED_5", "CSAS_UPGRADED_6")
#: valid to the validator (the same output), but CAST('bob' AS INT) fails at run time
FAILS_ON_NAMES = "CREATE OR REPLACE STREAM upgraded AS SELECT id, user, amount + CAST(user AS INT) AS amount FROM good_in"
MALFORMED = '{"id": 2, "user": "u2", "amount": 1'
#: seconds a wait that should not time out may take: far above any reconcile interval
LONG = 90.0
#: seconds a wait that should time out takes
SHORT = 3.0


@dataclass
class World:
    engine: Engine
    env: dict[str, str]
    bad_file: str


@pytest.fixture(scope="module")
def world(spark, airflow_db, tmp_path_factory):
    """The queries of :data:`WORLD` on one runtime, each brought to the ending it stands for;
    the Airflow connection ``streamql_default`` points at its catalog."""
    root = tmp_path_factory.mktemp("waits")
    home = str(root / "home")
    os.makedirs(home)
    engine = Engine(f"sqlite:///{root}/catalog.db", home=home, issuer="test")
    env = {**os.environ, "STREAMQL_HOME": home, "STREAMQL_CATALOG": engine.catalog.url, "PYTHONUNBUFFERED": "1"}
    connection = os.environ.get("AIRFLOW_CONN_STREAMQL_DEFAULT")
    os.environ["AIRFLOW_CONN_STREAMQL_DEFAULT"] = streamql_connection(engine.catalog.url, home)
    runtimes = RuntimeThreads(spark)
    try:
        engine.execute(WORLD)
        runtimes.start(engine, readiness_window=600)  # the new version fails inside its window
        for query_id in (FAILING, HELD, GONE, FINE, PAUSED, UPGRADED):
            engine.wait_for_state(query_id, "RUNNING", timeout=LONG)
        insert(engine, "good_in", [(1, "ann", 5)])
        for query_id in (FINE, PAUSED, UPGRADED):
            engine.wait_caught_up(query_id, timeout=LONG)
        engine.execute(f"TERMINATE {GONE}; PAUSE {PAUSED}")
        engine.wait_for_state(PAUSED, "PAUSED", timeout=LONG)
        engine.execute(FAILS_ON_NAMES)
        engine.wait_for_version(UPGRADED, 2, timeout=LONG)
        insert(engine, "good_in", [(2, "bob", 7)])  # PAUSED does not read it; version 2 fails on it
        versions = lambda: {v["version"]: v["outcome"] for v in engine.catalog.versions(UPGRADED)}
        wait_until(lambda: versions().get(2) == "ROLLED_BACK", LONG, "the rollback of version 2")
        engine.wait_caught_up(FINE, timeout=LONG)
        bad_file = produce(engine, "bad_in", [json.dumps({"id": 1, "user": "u1", "amount": 1}), MALFORMED])
        engine.wait_for_state(HELD, "PAUSED", timeout=LONG)
        wait_until(lambda: engine.bad_records(FAILING, "FAILED") and engine.state(FAILING) == "ERROR", LONG,
                   "the failing query's ERROR")
        yield World(engine, env, bad_file)
    finally:
        runtimes.stop_all()
        engine.close()
        if connection is None:
            os.environ.pop("AIRFLOW_CONN_STREAMQL_DEFAULT", None)
        else:
            os.environ["AIRFLOW_CONN_STREAMQL_DEFAULT"] = connection


def produce(engine: Engine, stream: str, lines: list[str]) -> str:
    """One file of raw lines in a stream's topic, renamed into place as a producer would."""
    path = engine.catalog.source(stream.upper()).path
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, ".part-bad.json.tmp"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(os.path.join(path, ".part-bad.json.tmp"), os.path.join(path, "part-bad.json"))
    return os.path.realpath(os.path.join(path, "part-bad.json"))


@dataclass
class Ended:
    """How one wait ended, as its form says it."""

    ending: Ending
    wait: dict  # the WaitEnd as a dict (message, stop, state, error, position, advice)
    seconds: float


# -- the forms: each waits on a condition of the world and says how it ended -------------------
def by_engine(world: World, condition: Condition, timeout: float, capfd=None) -> Ended:
    started = time.monotonic()
    end = world.engine.wait_end(condition, timeout=timeout, poll=0.2)
    return Ended(end.ending, end.to_dict(), time.monotonic() - started)


def by_trigger(world: World, condition: Condition, timeout: float, capfd=None) -> Ended:
    trigger = StreamQLConditionTrigger(condition=condition.to_dict(), streamql_conn_id="streamql_default",
                                       end_at=time.time() + timeout, poll_interval=0.2)

    async def first() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")
    started = time.monotonic()
    payload = asyncio.run(asyncio.wait_for(first(), timeout + 60))
    return Ended(Ending(payload["wait"]["ending"]), payload["wait"], time.monotonic() - started)


def by_cli(world: World, condition: Condition, timeout: float, capfd=None) -> Ended:
    """``streamql wait QUERY --caught-up`` or ``--state S``, its exit code and --json line."""
    if isinstance(condition, CaughtUp):
        args = [condition.query_id, "--caught-up"]
    else:
        assert isinstance(condition, QueriesInState) and condition.query_ids
        args = [condition.query_ids[0], "--state", condition.states[0]]
    started = time.monotonic()
    done = subprocess.run(CLI + ["wait", *args, "--timeout", str(timeout), "--json"], env=world.env,
                          capture_output=True, text=True, timeout=timeout + 120)
    wait = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == WAIT_EXITS[Ending(wait["ending"])], done.stderr
    return Ended(Ending(wait["ending"]), wait, time.monotonic() - started)


def by_sensor(mode: str):
    """QueryProgressSensor(caught_up=True) under dag.test(), deferred or poking in the worker."""
    def wait(world: World, condition: Condition, timeout: float, capfd=None) -> Ended:
        assert isinstance(condition, CaughtUp)
        started = time.monotonic()
        run = run_dag(f"t_caught_up_{mode}_{timeout:.0f}s", capfd, query_id=condition.query_id)
        seconds = time.monotonic() - started
        wait = run.xcom("task", "wait")
        assert wait is not None, run.log
        assert run.states == {"task": "success" if wait["ending"] == "REACHED" else "failed"}, run.log
        assert wait["message"] in run.log  # the task's log says why it ended
        return Ended(Ending(wait["ending"]), wait, seconds)
    return wait


FORMS = {"engine": by_engine, "trigger": by_trigger, "cli": by_cli,
         "sensor": by_sensor("deferred"), "sensor in worker": by_sensor("poked")}


def caught_up(query_id: str, **kw) -> CaughtUp:
    return CaughtUp(query_id, **kw)


# (form, what it waits for, how long it may wait, the ending, stop, fragments of its message)
CASES = [
    # the query fails on a record it cannot read at every retry (policy FAIL)
    ("engine", lambda: caught_up(FAILING), LONG, "FAILED_FAST", "ERROR",
     ["query CSAS_FAILING_1 is in ERROR while waiting for it to catch up: ", "part-bad.json:2)",
      "on_error='LOG_AND_CONTINUE'"]),
    ("trigger", lambda: caught_up(FAILING), LONG, "FAILED_FAST", "ERROR", ["is in ERROR", "part-bad.json:2)"]),
    ("cli", lambda: caught_up(FAILING), LONG, "FAILED_FAST", "ERROR", ["is in ERROR", "part-bad.json:2)"]),
    ("cli", lambda: QueriesInState([FAILING], ["PAUSED"]), LONG, "FAILED_FAST", "ERROR",
     ["query CSAS_FAILING_1 is in ERROR while waiting for PAUSED"]),
    ("sensor", lambda: caught_up(FAILING), LONG, "FAILED_FAST", "ERROR", ["is in ERROR", "part-bad.json:2)"]),
    ("sensor in worker", lambda: caught_up(FAILING), LONG, "FAILED_FAST", "ERROR", ["is in ERROR"]),
    # held at the record (policy PAUSE)
    ("engine", lambda: caught_up(HELD), LONG, "FAILED_FAST", "HELD",
     ["query CSAS_HELD_2 is held (PAUSED) at a bad record while waiting for it to catch up: malformed JSON",
      "part-bad.json:2)", "RESUME CSAS_HELD_2 SKIP BAD RECORDS"]),
    ("trigger", lambda: caught_up(HELD), LONG, "FAILED_FAST", "HELD", ["RESUME CSAS_HELD_2 SKIP BAD RECORDS"]),
    ("cli", lambda: caught_up(HELD), LONG, "FAILED_FAST", "HELD", ["RESUME CSAS_HELD_2 SKIP BAD RECORDS"]),
    ("cli", lambda: QueriesInState([HELD], ["RUNNING"]), LONG, "FAILED_FAST", "HELD", ["while waiting for RUNNING"]),
    ("sensor", lambda: caught_up(HELD), LONG, "FAILED_FAST", "HELD", ["RESUME CSAS_HELD_2 SKIP BAD RECORDS"]),
    # terminated
    ("engine", lambda: caught_up(GONE), LONG, "FAILED_FAST", "TERMINATED",
     ["query CSAS_GONE_3 was terminated while waiting for it to catch up; a terminated query does not run again"]),
    ("trigger", lambda: caught_up(GONE), LONG, "FAILED_FAST", "TERMINATED", ["was terminated"]),
    ("cli", lambda: caught_up(GONE), LONG, "FAILED_FAST", "TERMINATED", ["was terminated"]),
    ("sensor", lambda: caught_up(GONE), LONG, "FAILED_FAST", "TERMINATED", ["was terminated"]),
    # its version 2 failed in its readiness window and was rolled back (a wait that began on it)
    ("engine", lambda: VersionRunning(UPGRADED, 2, ready=True), LONG, "FAILED_FAST", "ROLLED_BACK",
     ["version 2 of CSAS_UPGRADED_6 was rolled back while waiting for version 2 to be ready: ",
      "the runtime runs version 1 again"]),
    ("engine", lambda: caught_up(UPGRADED, version=2), LONG, "FAILED_FAST", "ROLLED_BACK",
     ["version 2 of CSAS_UPGRADED_6 was rolled back while waiting for it to catch up"]),
    ("trigger", lambda: VersionRunning(UPGRADED, 2, ready=True), LONG, "FAILED_FAST", "ROLLED_BACK",
     ["was rolled back"]),
    ("trigger", lambda: caught_up(UPGRADED, version=2), LONG, "FAILED_FAST", "ROLLED_BACK", ["was rolled back"]),
    # caught up
    ("engine", lambda: caught_up(FINE), LONG, "REACHED", None, ["CSAS_FINE_4 caught up"]),
    ("trigger", lambda: caught_up(FINE), LONG, "REACHED", None, ["CSAS_FINE_4 caught up"]),
    ("cli", lambda: caught_up(FINE), LONG, "REACHED", None, ["CSAS_FINE_4 caught up"]),
    ("sensor", lambda: caught_up(FINE), LONG, "REACHED", None, ["CSAS_FINE_4 caught up"]),
    ("sensor in worker", lambda: caught_up(FINE), LONG, "REACHED", None, ["CSAS_FINE_4 caught up"]),
    # paused by someone, with input waiting: it may be resumed, so the wait goes on and times out
    ("engine", lambda: caught_up(PAUSED), SHORT, "TIMED_OUT", None,
     ["query CSAS_PAUSED_5 has not processed 1 of 2 input files after 3s; CSAS_PAUSED_5 is PAUSED, last batch ",
      "1 input file(s) not processed"]),
    ("trigger", lambda: caught_up(PAUSED), SHORT, "TIMED_OUT", None, ["CSAS_PAUSED_5 is PAUSED, last batch "]),
    ("cli", lambda: caught_up(PAUSED), SHORT, "TIMED_OUT", None, ["CSAS_PAUSED_5 is PAUSED, last batch "]),
    ("cli", lambda: QueriesInState([PAUSED], ["RUNNING"]), SHORT, "TIMED_OUT", None,
     ["CSAS_PAUSED_5 is PAUSED; waiting for RUNNING after 3s; CSAS_PAUSED_5 is PAUSED, last batch "]),
    ("sensor", lambda: caught_up(PAUSED), SHORT, "TIMED_OUT", None, ["CSAS_PAUSED_5 is PAUSED, last batch "]),
    ("sensor in worker", lambda: caught_up(PAUSED), SHORT, "TIMED_OUT", None,
     ["CSAS_PAUSED_5 is PAUSED, last batch "]),
]


@pytest.mark.parametrize(("form", "condition", "timeout", "ending", "stop", "said"), CASES,
                         ids=[f"{c[0]}-{c[3]}-{c[4] or ''}-{i}" for i, c in enumerate(CASES)])
def test_each_wait_form_ends_as_soon_as_it_can(world, capfd, form, condition, timeout, ending, stop, said):
    ended = FORMS[form](world, condition(), timeout, capfd)
    assert (ended.ending, ended.wait.get("stop")) == (ending, stop), ended.wait["message"]
    for fragment in said:
        assert fragment in ended.wait["message"], ended.wait["message"]
    if ending != "TIMED_OUT":
        assert ended.seconds < timeout  # it did not wait for its timeout
    if stop is not None:
        assert ended.wait["query_id"] and ended.wait["state"] and ended.wait["advice"]


def test_a_failed_wait_raises_with_its_ending(world):
    with pytest.raises(WaitFailed, match="query CSAS_FAILING_1 is in ERROR") as failed:
        world.engine.wait_caught_up(FAILING, timeout=LONG)
    assert isinstance(failed.value, StateError) and failed.value.end.stopped.position.endswith("part-bad.json:2")
    with pytest.raises(WaitTimeout, match="CSAS_PAUSED_5 is PAUSED, last batch") as timed_out:
        world.engine.wait_caught_up(PAUSED, timeout=SHORT)
    assert timed_out.value.end.ending is Ending.TIMED_OUT


def test_a_wait_through_retries_waits_out_an_error_but_not_a_hold(world):
    ended = by_engine(world, CaughtUp(FAILING, through_retries=True), SHORT)
    assert ended.ending is Ending.TIMED_OUT and "last error: " in ended.wait["message"]
    held = by_engine(world, CaughtUp(HELD, through_retries=True), LONG)
    assert (held.ending, held.wait["stop"]) == (Ending.FAILED_FAST, "HELD")


def test_exec_wait_says_how_it_ended(world):
    created = subprocess.run(CLI + ["exec", "CREATE STREAM more AS SELECT * FROM good_in", "--wait", "--timeout",
                                    str(LONG)], env=world.env, capture_output=True, text=True, timeout=LONG + 60)
    assert created.returncode == 0, created.stderr
    # a pipeline no runtime serves: the query stays PENDING, and the timeout says so
    pending = subprocess.run(CLI + ["exec", "CREATE STREAM idle AS SELECT * FROM good_in", "--wait", "--timeout",
                                    str(SHORT), "--pipeline", "nobody"],
                             env=world.env, capture_output=True, text=True, timeout=SHORT + 60)
    assert pending.returncode == 3, pending.stderr
    assert "CSAS_IDLE_8 is PENDING, no batch committed yet, 2 input file(s) not processed" in pending.stderr
    # a long wait is not silent: it says what it waits for before it ends
    assert pending.stderr.index("waiting: CSAS_IDLE_8 is PENDING") < pending.stderr.index("error: ")


def test_replace_operator_fails_fast_when_its_version_is_rolled_back(world, capfd):
    sql = FAILS_ON_NAMES.replace("amount + CAST", "amount * CAST")
    world.engine.wait_caught_up(UPGRADED, timeout=LONG)
    started = time.monotonic()
    from .test_airflow_operators import meanwhile, once_deferred
    # carl comes once version 3 runs: version 1 would read him without failing, and version 3
    # would then have nothing to fail on inside its readiness window
    join = meanwhile(once_deferred(), lambda: world.engine.wait_for_version(UPGRADED, 3, timeout=LONG),
                     lambda: insert(world.engine, "good_in", [(3, "carl", 1)]))
    run = run_dag("t_replace", capfd, sql=sql, query_id=UPGRADED, mode="in_place")
    join()
    assert run.states == {"task": "failed"}, run.log
    wait = run.xcom("task", "wait")
    assert (wait["ending"], wait["stop"]) == ("FAILED_FAST", "ROLLED_BACK"), wait
    assert "version 3 of CSAS_UPGRADED_6 was rolled back while waiting for version 3 to be ready" in run.log
    assert time.monotonic() - started < LONG  # the operator's own timeout (tests/dags: 90 s)
