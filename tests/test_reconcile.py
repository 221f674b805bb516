"""The runtime's decisions without Spark: what reconciling a query does for a typed
observation (runtime/reconcile.py ``plan``), the back-off of failing queries
(runtime/schedule.py), and one query's looks through the real observer, reconciler and
catalog on SQLite, whose start fails before it reaches Spark (its sink is gone)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_streamql.runtime.holds import Holds
from airflow_provider_streamql.runtime.leases import Leases
from airflow_provider_streamql.runtime.listener import ProgressListener
from airflow_provider_streamql.runtime.observe import Failure, Lease, Observation, Observer, Run, Upgrade
from airflow_provider_streamql.runtime.reconcile import Desired, DesiredState, Reconciler, Step, plan
from airflow_provider_streamql.runtime.rollout import Rollout
from airflow_provider_streamql.runtime.schedule import BackOff, Done, Schedule, Stuck
from airflow_provider_streamql.runtime.spark_queries import SparkQueries
from airflow_provider_streamql.runtime.status import Status

RUNNING = Desired(DesiredState.RUNNING, 1)
RUNNING_V2 = Desired(DesiredState.RUNNING, 2)
PAUSED = Desired(DesiredState.PAUSED, 1)
TERMINATED = Desired(DesiredState.TERMINATED, 1)


def seen(**kw) -> Observation:
    """An observation of a query whose lease this runtime holds (and nothing else, unless said)."""
    return Observation(**{"lease": Lease.HELD, "reported": "RUNNING", "epoch": 1, **kw})


NOT_HELD = {"lease": Lease.NOT_HELD, "epoch": None}
ACTIVE = {"run": Run.ACTIVE, "version": 1}
STOPPED = {"run": Run.STOPPED, "version": 1, "failure": Failure("[CAST_INVALID_INPUT] 'ann' cannot be cast")}
BAD_RECORD = Failure("STREAMQL_BAD_RECORD CSAS_O_1 cannot read a record of S in f.json:3: {", bad_records=True)

PLANS = [
    # what a user notices                                          desired     observation                                                 step
    ("a new query's lease is taken before anything else",            RUNNING,    seen(**NOT_HELD, reported="PENDING"),                        Step.TAKE_LEASE),
    ("with its lease, a query that should run is started",           RUNNING,    seen(reported="PENDING"),                                    Step.START),
    ("a query running its version is kept running",                  RUNNING,    seen(**ACTIVE),                                              Step.KEEP),
    ("a new version is swapped in place",                            RUNNING_V2, seen(**ACTIVE),                                              Step.UPGRADE),
    ("a new version in its readiness window keeps running",          RUNNING_V2, seen(**{**ACTIVE, "version": 2}, upgrade=Upgrade.PENDING),   Step.KEEP),
    ("a new version that proved itself is kept",                     RUNNING_V2, seen(**{**ACTIVE, "version": 2}, upgrade=Upgrade.READY),     Step.KEEP),
    ("a query whose start failed waits out its back-off",            RUNNING,    seen(reported="ERROR", failures=1, retry_in=0.4),            Step.WAIT),
    ("a query whose start failed is started again after it",         RUNNING,    seen(reported="ERROR", failures=1, retry_in=0.0),            Step.START),
    ("one failing on a record just skipped starts without waiting",  RUNNING,    seen(reported="ERROR", failures=4, retry_in=9.0, skipped=True), Step.START),
    ("a start that ran the driver out of memory is not retried",     RUNNING,    seen(reported="ERROR", stuck=1),                             Step.STAY_FAILED),
    ("a new version of it is started",                               RUNNING_V2, seen(reported="ERROR", stuck=1),                             Step.START),
    ("paused, it shows PAUSED (RESUME starts it again)",             PAUSED,     seen(reported="ERROR", stuck=1),                             Step.PAUSE),
    ("a query Spark stopped shows ERROR and backs off",              RUNNING,    seen(**STOPPED),                                             Step.BACK_OFF),
    ("a query Spark stopped without an error backs off too",         RUNNING,    seen(**{**STOPPED, "failure": Failure(None)}),               Step.BACK_OFF),
    ("a failure is handled before a PAUSE that came meanwhile",      PAUSED,     seen(**STOPPED),                                             Step.BACK_OFF),
    ("a new version failing in its window is rolled back",           RUNNING_V2, seen(**STOPPED, upgrade=Upgrade.PENDING),                    Step.ROLL_BACK),
    ("a version failing after it proved itself is rolled back too",  RUNNING_V2, seen(**STOPPED, upgrade=Upgrade.READY),                      Step.ROLL_BACK),
    ("a bad record is looked for before a rollback (it may hold)",   RUNNING_V2, seen(**{**STOPPED, "failure": BAD_RECORD}, upgrade=Upgrade.PENDING), Step.FIND_BAD_RECORDS),
    ("a query that fails on a bad record has its records found",     RUNNING,    seen(**{**STOPPED, "failure": BAD_RECORD}),                  Step.FIND_BAD_RECORDS),
    ("a paused query that runs is stopped",                          PAUSED,     seen(**ACTIVE),                                              Step.PAUSE),
    ("a paused query is not restarted",                              PAUSED,     seen(reported="PAUSED"),                                     Step.PAUSE),
    ("a paused query is not restarted after its back-off",           PAUSED,     seen(reported="ERROR", failures=3, retry_in=0.0),            Step.PAUSE),
    ("a query paused during its back-off shows PAUSED at once",      PAUSED,     seen(reported="ERROR", failures=3, retry_in=7.5),            Step.PAUSE),
    ("a query held by no one here is acted on once its lease is",    PAUSED,     seen(**NOT_HELD, reported="UNASSIGNED"),                     Step.TAKE_LEASE),
    ("a terminated query is stopped and its lease released",         TERMINATED, seen(**ACTIVE),                                              Step.TERMINATE),
    ("a terminated query not yet shown so is reported",              TERMINATED, seen(**NOT_HELD, reported="PAUSED"),                         Step.TAKE_LEASE),
    ("a terminated query shown so is left alone, no lease taken",    TERMINATED, seen(**NOT_HELD, reported="TERMINATED"),                     Step.LEAVE),
    ("a query whose lease was lost is stopped",                      RUNNING,    seen(**ACTIVE, lease=Lease.LOST),                            Step.DROP),
    ("a lost query Spark stopped is left to the lease's holder",     RUNNING,    seen(**STOPPED, lease=Lease.LOST),                           Step.DROP),
    ("a lost lease of a paused query is forgotten",                  PAUSED,     seen(reported="PAUSED", lease=Lease.LOST),                   Step.DROP),
    ("a lost lease of a terminated query is forgotten",              TERMINATED, seen(reported="TERMINATED", lease=Lease.LOST),               Step.DROP),
]


@pytest.mark.parametrize("desired, observation, step", [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_what_reconciling_a_query_does(desired, observation, step):
    assert plan(desired, observation) is step


@pytest.mark.parametrize("failures, expected", [
    (0, BackOff(1, 1.0)),     # the first failure: started again after a second
    (1, BackOff(2, 2.0)),
    (4, BackOff(5, 16.0)),
    (5, BackOff(6, 32.0)),
    (6, BackOff(7, 60.0)),    # doubling stops at a minute
    (40, BackOff(41, 60.0)),
])
def test_a_failing_query_backs_off_doubling_up_to_a_minute(failures, expected):
    assert BackOff.after_failure(failures) == expected


@pytest.mark.parametrize("decision, later, failures, retry_in", [
    (BackOff(1, 1.0), 0.0, 1, 1.0),
    (BackOff(1, 1.0), 0.25, 1, 0.75),
    (BackOff(3, 4.0), 4.0, 3, 0.0),   # due: the next look starts it
    (BackOff(3, 4.0), 9.0, 3, 0.0),
    (Done(3), 0.0, 3, 0.0),           # started again fine: its failures stay, so a next one waits longer
    (Done(), 0.0, 0, 0.0),            # paused, held or rolled back: forgotten
    (Stuck(4, 2), 60.0, 2, 0.0),      # out of memory: no back-off, it is not started at all
])
def test_the_schedule_is_what_the_last_decision_said(decision, later, failures, retry_in):
    schedule = Schedule()
    schedule.record("Q", BackOff(7, 50.0), 90.0)
    schedule.record("Q", decision, 100.0)
    assert (schedule.failures("Q"), schedule.due_in("Q", 100.0 + later)) == (failures, retry_in)
    assert schedule.stuck("Q") == (decision.version if isinstance(decision, Stuck) else None)


class Looks:
    """One runtime's observer and reconciler over the catalog, on no SparkSession: a look is
    the loop's step for one query at a clock reading (observe, reconcile, schedule)."""

    def __init__(self, engine, runtime_id: str = "here"):
        catalog = self.catalog = engine.catalog
        self.engine, self.leases, self.schedule = engine, Leases(catalog, runtime_id, 60.0), Schedule()
        holds = Holds(catalog, None, runtime_id, "FAIL")
        self.queries = SparkQueries(None, catalog, self.leases, holds, ProgressListener(catalog, self.leases.owns))
        status = Status(catalog, runtime_id)
        rollout = Rollout(catalog, 30.0, self.queries, status)
        self.observer = Observer(self.queries, self.leases, rollout, holds, self.schedule)
        self.reconciler = Reconciler(self.queries, self.leases, status, rollout, holds)

    def look(self, query_id: str, at: float, **changed):
        """Reconcile the query as the catalog has it (with ``changed`` fields) at ``at``."""
        query = replace(self.engine.query(query_id), **changed)
        decision = self.reconciler.reconcile(query, self.observer.observe(query, at))
        self.schedule.record(query_id, decision, at)
        return decision


@pytest.fixture
def looks(sqlite_engine):
    sqlite_engine.execute("CREATE STREAM s (id INT, v DOUBLE); CREATE STREAM o AS SELECT * FROM s WHERE v > 0")
    return Looks(sqlite_engine)


def test_a_query_whose_start_fails_is_retried_after_its_back_off_until_paused(looks):
    engine, gone = looks.engine, {"sink": "GONE"}  # its start fails at the runtime's own check
    assert looks.look("CSAS_O_1", 100.0, **gone) == BackOff(1, 1.0)
    query = engine.query("CSAS_O_1")
    assert (query.observed_state, query.error) == ("ERROR", "GONE no longer exist(s) in the catalog")
    assert query.failures == 1 and query.retry_at > query.updated_at  # shown as the attempt to come and when
    assert looks.look("CSAS_O_1", 100.6, **gone) == BackOff(1, pytest.approx(0.4))  # waits: no second attempt
    assert engine.query("CSAS_O_1").updated_at == query.updated_at  # nothing written meanwhile
    assert looks.look("CSAS_O_1", 101.0, **gone) == BackOff(2, 2.0)  # tried again, and failed again
    assert looks.look("CSAS_O_1", 103.0, **gone) == BackOff(3, 4.0)
    assert engine.query("CSAS_O_1").failures == 3

    engine.execute("PAUSE CSAS_O_1")  # during its back-off: PAUSED at once, the failures forgotten
    assert looks.look("CSAS_O_1", 104.0, **gone) == Done()
    assert engine.state("CSAS_O_1") == "PAUSED" and not looks.queries.active
    assert (engine.query("CSAS_O_1").failures, engine.query("CSAS_O_1").retry_at) == (None, None)
    assert looks.look("CSAS_O_1", 200.0, **gone) == Done()  # long after: a paused query is not started
    engine.execute("RESUME CSAS_O_1")  # started at once, backing off from the first delay again
    assert looks.look("CSAS_O_1", 200.1, **gone) == BackOff(1, 1.0)


def test_a_query_whose_lease_another_runtime_holds_is_never_touched(looks):
    engine = looks.engine
    assert engine.catalog.leases.acquire("CSAS_O_1", "elsewhere", 60) is not None
    assert looks.look("CSAS_O_1", 100.0, sink="GONE") == Done()
    query = engine.query("CSAS_O_1")
    assert (query.observed_state, query.error) == ("PENDING", None) and not looks.leases.epochs


def test_terminate_reports_it_and_releases_the_lease(looks):
    engine = looks.engine
    looks.look("CSAS_O_1", 100.0, sink="GONE")
    assert looks.leases.epochs == {"CSAS_O_1": 1}
    engine.execute("TERMINATE CSAS_O_1")
    assert looks.look("CSAS_O_1", 100.5) == Done()
    assert engine.state("CSAS_O_1") == "TERMINATED" and not looks.leases.epochs
    assert engine.catalog.leases.acquire("CSAS_O_1", "elsewhere", 60) is not None  # free for anyone
