"""The catalog itself: migrations forward, leases with epochs, heartbeats (both backends)."""
import json
import os
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.exc import DBAPIError

from airflow_provider_streamql.catalog import LATEST, BadRecord, Catalog, Progress, current_version, schema
from airflow_provider_streamql.catalog.commands import LastCommandWatch
from airflow_provider_streamql.engine import Engine

from .conftest import _new_pg_database
from .fixtures.make_catalog_fixtures import PREVIOUS_SCRIPT  # what fixtures/catalog_v10 was made by
from .support import wait_until

#: catalogs frozen as streamql wrote them (see fixtures/make_catalog_fixtures.py): version 1
#: of commit d62f85c, the first shipped schema, then its version 2 (runtimes) on top
FIXTURES = Path(__file__).parent / "fixtures"
OLD_HOME = "/srv/streamql"  # the home the fixtures' rows name
OLD_QUERIES = ["CSAS_CHECKOUT_VIEWS_1", "CSAS_ALL_VIEWS_2"]


def _load_old_catalog(url: str, stages: tuple[str, ...], home: str) -> None:
    """Run the frozen SQL of ``stages`` on an empty database, as plain statements."""
    engine = create_engine(url)
    with engine.begin() as conn:
        for stage in stages:
            sql = (FIXTURES / f"{stage}.{engine.dialect.name}.sql").read_text().replace(OLD_HOME, home)
            lines = [line for line in sql.splitlines() if not line.startswith("--")]
            for statement in "\n".join(lines).split(";\n"):
                if statement.strip():
                    conn.exec_driver_sql(statement)
    engine.dispose()


@pytest.mark.parametrize("stages", [("catalog_v1",), ("catalog_v1", "catalog_v2")],
                         ids=["from-v1", "from-v2"])
def test_migrations_run_forward_on_an_existing_catalog(catalog_url, home, stages):
    _load_old_catalog(catalog_url, stages, home)
    old = create_engine(catalog_url)
    with old.connect() as conn:
        assert current_version(conn) == len(stages) < LATEST
        assert not inspect(conn).has_table("bad_records")
    old.dispose()

    catalog = Catalog(catalog_url)  # opening it with this streamql migrates it forward
    # -- the schema is today's: every table, column, nullability and primary key ---------
    with catalog.engine.connect() as conn:
        assert current_version(conn) == LATEST
        db = inspect(conn)
        differences = {}  # table -> (its columns as they are, as today's schema has them)
        for table in schema.metadata.sorted_tables:
            have = {c["name"]: c["nullable"] for c in db.get_columns(table.name)} \
                if db.has_table(table.name) else {}
            want = {c.name: c.nullable for c in table.columns}
            if have != want:
                differences[table.name] = ({k: v for k, v in have.items() if want.get(k) != v},
                                           {k: v for k, v in want.items() if have.get(k) != v})
            elif db.get_pk_constraint(table.name)["constrained_columns"] != \
                    [c.name for c in table.primary_key.columns]:
                differences[table.name] = "primary key"
        assert differences == {}

    # -- what version 1 held reads through today's API ---------------------------------
    pageviews = catalog.source("PAGEVIEWS")
    assert [(c.name, c.type.spark(), c.key) for c in pageviews.columns] == \
        [("user_id", "STRING", False), ("page", "STRING", False), ("viewtime", "BIGINT", False)]
    assert (pageviews.kind, pageviews.format, pageviews.path) == ("STREAM", "JSON", f"{home}/topics/PAGEVIEWS")
    assert catalog.source("USERS").key_columns == ["user_id"]
    assert catalog.source("CHECKOUT_VIEWS").writer_query == "CSAS_CHECKOUT_VIEWS_1"
    queries = catalog.queries()
    assert [q.id for q in queries] == OLD_QUERIES
    checkout, all_views = queries
    assert checkout.settings == {"auto.offset.reset": "earliest"} and all_views.settings == {}
    assert (checkout.desired_state, all_views.desired_state) == ("RUNNING", "PAUSED")
    assert checkout.observed_state == ("RUNNING" if "catalog_v2" in stages else "PENDING")
    assert "/checkout" in checkout.plan.spark_sql
    for q in queries:  # what a runtime builds the query from, and the validator compares
        assert q.plan.views.keys() == {"PAGEVIEWS"} and q.plan.output_mode == "append"
        assert q.shape.kind == "CSAS" and q.shape.sink.path == f"{home}/topics/{q.sink}"
        assert q.shape.grace == {} and not q.shape.named  # typed by migration 12 from what it ran with
        assert q.version == 1 and q.running_version is None and q.run_id is None
    assert catalog.query("CSAS_ALL_VIEWS_2") == all_views
    [version] = catalog.versions("CSAS_CHECKOUT_VIEWS_1")
    assert version["version"] == 1 and version["sql"] == checkout.sql
    assert (version["select_sql"], json.loads(version["sources"]), json.loads(version["settings"])) == \
        (checkout.select_sql, ["PAGEVIEWS"], checkout.settings)
    assert [c["name"] for c in json.loads(version["sink_columns"])] == ["user_id", "page", "viewtime"]
    assert (version["verdict"], version["outcome"]) == (None, None)
    log = catalog.commands.all()
    assert [(c["statement"].split()[0], c["issuer"]) for c in log] == [
        ("CREATE", "user:alice"), ("CREATE", "user:alice"),
        ("SET", "airflow:dag=streamql_deploy,run=manual__2026-11-23T09:30:00,task=deploy"),
        ("CREATE", "airflow:dag=streamql_deploy,run=manual__2026-11-23T09:30:00,task=deploy"),
        ("CREATE", "user:alice"), ("PAUSE", "user:bob")]
    if "catalog_v2" in stages:
        before = catalog.observed.progress("CSAS_CHECKOUT_VIEWS_1")
        assert (before.batch_id, before.total_input_rows, before.late_rows, before.state_operators) == \
            (7, 340, 0, [])
        assert [r["id"] for r in catalog.runtimes.all()] == ["rt-7f3a"]

    # -- and a runtime and the statements of today write to it ----------------------------
    with catalog.transaction() as conn:
        assert catalog.commands.log(conn, "SHOW QUERIES", "default", "user:carol") == len(log) + 1
    catalog.runtimes.heartbeat("rt-new", "default", "worker-2", 77, spark_app_id="app-1",
                      spark_ui_url="http://worker-2:4040", master="local[2]")
    epoch = catalog.leases.acquire("CSAS_CHECKOUT_VIEWS_1", "rt-new", 30.0)
    assert epoch == (2 if "catalog_v2" in stages else 1)  # the old runtime's lease expired
    assert catalog.observed.set("CSAS_CHECKOUT_VIEWS_1", "RUNNING", runtime_id="rt-new", epoch=epoch,
                                running_version=1, run_id="run-1")
    catalog.mark_version("CSAS_CHECKOUT_VIEWS_1", 1, started_at=time.time(), outcome="ACTIVE")
    catalog.observed.record_progress(Progress("CSAS_CHECKOUT_VIEWS_1", 8, 5, 5, 2.5, [], time.time(), late_rows=1,
                                     state_operators=[{"operator": "dedupe", "rows": 3, "memory_bytes": 512,
                                                      "dropped_by_watermark": 1}]))
    progress = catalog.observed.progress("CSAS_CHECKOUT_VIEWS_1")
    assert (progress.total_input_rows, progress.late_rows) == \
        ((345, 1) if "catalog_v2" in stages else (5, 1))
    assert [h["batch_id"] for h in catalog.observed.progress_history("CSAS_CHECKOUT_VIEWS_1")] == [8]
    catalog.bad_records.record([BadRecord("CSAS_CHECKOUT_VIEWS_1", "r1", 8, "PAGEVIEWS", "f.json", 3,
                                          "{oops", "malformed JSON")])
    assert [b.record_id for b in catalog.bad_records.of("CSAS_CHECKOUT_VIEWS_1")] == ["r1"]
    runtime = next(r for r in catalog.runtimes.all() if r["id"] == "rt-new")
    assert runtime["spark_ui_url"] == "http://worker-2:4040"
    query = catalog.query("CSAS_CHECKOUT_VIEWS_1")
    assert (query.observed_state, query.running_version, query.run_id) == ("RUNNING", 1, "run-1")

    engine = Engine(catalog, home=home, issuer="user:carol")
    shown = engine.execute("SHOW QUERIES;")[0]
    assert [row[0] for row in shown.rows] == OLD_QUERIES
    engine.execute("EXPLAIN CSAS_CHECKOUT_VIEWS_1; DESCRIBE CHECKOUT_VIEWS; RESUME CSAS_ALL_VIEWS_2;")
    assert catalog.query("CSAS_ALL_VIEWS_2").desired_state == "RUNNING"
    # a deploy script restating the old statement finds it unchanged: not restarted
    again = engine.execute(f"SET 'auto.offset.reset' = 'earliest'; {checkout.sql};", skip_unchanged=True)
    assert again[-1].action == "unchanged"
    replaced = engine.execute("CREATE OR REPLACE STREAM checkout_views AS SELECT user_id, page, viewtime "
                              "FROM pageviews WHERE page = '/cart';")[0]
    assert replaced.version == 2
    assert [v["version"] for v in catalog.versions("CSAS_CHECKOUT_VIEWS_1")] == [1, 2]
    catalog.close()


def test_lease_is_exclusive_and_fenced_by_epoch(catalog_url):
    catalog = Catalog(catalog_url)
    assert catalog.leases.acquire("Q", "r1", 0.5) == 1
    assert catalog.leases.acquire("Q", "r2", 0.5) is None  # live lease held by r1
    assert catalog.leases.acquire("Q", "r1", 0.5) == 1  # renewal keeps the epoch
    time.sleep(0.6)
    assert catalog.leases.acquire("Q", "r2", 5.0) == 2  # expired: taken with a new epoch
    assert catalog.leases.renew("Q", "r1", 1, 5.0) is False  # r1 learns it lost the lease
    assert catalog.observed.set("Q", "RUNNING", runtime_id="r1", epoch=1) is False
    catalog.leases.release("Q", "r2")
    assert catalog.leases.acquire("Q", "r1", 5.0) == 1


def test_leases_renewed_together_report_the_lost_ones(catalog_url):
    catalog = Catalog(catalog_url)
    for q in ("KEPT", "TAKEN", "RELEASED", "OLD"):
        assert catalog.leases.acquire(q, "r1", 0.5) == 1
    time.sleep(0.6)
    assert catalog.leases.acquire("TAKEN", "r2", 5.0) == 2  # expired and taken by r2
    catalog.leases.release("RELEASED", "r1")
    held = {"KEPT": 1, "TAKEN": 1, "RELEASED": 1, "OLD": 0, "NEVER": 1}  # OLD: a stale epoch
    assert catalog.leases.renew_all("r1", held, 5.0) == {"TAKEN": 1, "RELEASED": 1, "OLD": 0, "NEVER": 1}
    assert catalog.leases.acquire("KEPT", "r2", 5.0) is None  # renewed, though it had expired
    assert catalog.leases.holders()["TAKEN"]["runtime_id"] == "r2"  # r1's renewal left it alone
    assert catalog.leases.renew_all("r1", {}, 5.0) == {}


def test_a_runtime_frozen_inside_a_lease_renewal_does_not_keep_its_queries_from_the_others(postgres_server):
    """PostgreSQL: r1's process freezes (a GC pause, SIGSTOP) inside its renewal's transaction,
    the lease row locked. Once the lease expired r2 takes the query, within the report idle
    limit rather than whenever r1 thaws; r1's renewal does not land over it, and r1 learns it
    lost the lease."""
    url = _new_pg_database(postgres_server)
    frozen, other = Catalog(url), Catalog(url)
    assert frozen.leases.acquire("Q", "r1", 0.5) == 1
    inside, thaw = threading.Event(), threading.Event()

    @event.listens_for(frozen.engine, "after_cursor_execute")
    def freeze(_conn, _cursor, statement, *_):
        if statement.lstrip().upper().startswith("UPDATE LEASES") and not inside.is_set():
            inside.set()
            thaw.wait(60)

    renewal: dict[str, object] = {}

    def renew() -> None:
        try:
            renewal["lost"] = frozen.leases.renew_all("r1", {"Q": 1}, 0.5)
        except Exception as e:  # its session was ended under it
            renewal["error"] = e

    threading.Thread(target=renew, daemon=True).start()
    assert inside.wait(10)
    time.sleep(0.6)  # r1's lease expired: its renewal holds the row and never commits
    took: dict[str, int | None] = {}
    taker = threading.Thread(target=lambda: took.update(epoch=other.leases.acquire("Q", "r2", 30.0)), daemon=True)
    taker.start()
    taker.join(30)
    thaw.set()
    assert took == {"epoch": 2}, "r2 waited on the frozen renewal's row lock"
    wait_until(lambda: renewal, 10, "r1's renewal to end")
    error = renewal.get("error")  # the server ended r1's session: nothing of its renewal committed
    assert isinstance(error, DBAPIError) and "idle-in-transaction timeout" in str(error), renewal
    assert other.leases.holders()["Q"]["runtime_id"] == "r2"
    assert frozen.leases.renew_all("r1", {"Q": 1}, 5.0) == {"Q": 1}  # r1 learns it lost the lease
    frozen.close()
    other.close()


def test_heartbeats_and_runtime_stop(catalog_url):
    catalog = Catalog(catalog_url)
    catalog.runtimes.heartbeat("rt-1", "p", "host", 42)
    first = catalog.runtimes.all()[0]["heartbeat_at"]
    time.sleep(0.01)
    catalog.runtimes.heartbeat("rt-1", "p", "host", 42)
    catalog.leases.acquire("Q", "rt-1", 30)
    assert catalog.runtimes.all()[0]["heartbeat_at"] > first
    catalog.runtimes.stopped("rt-1")
    assert catalog.runtimes.all()[0]["stopped_at"] is not None
    assert catalog.leases.holders() == {}


def test_a_held_look_at_the_newest_statement_sees_each_one_committed_since(catalog_url, home):
    """A runtime looks for a new statement between its passes on one held connection
    (LastCommandWatch): each look sees what another connection committed after the look
    before, as a look on a fresh connection does."""
    engine = Engine(catalog_url, home=home, issuer="test")
    watch = Catalog(catalog_url).commands.watch()
    try:
        seen = [watch.last()]
        for statement in ["CREATE STREAM s (id INT KEY, v DOUBLE);", "CREATE STREAM t AS SELECT * FROM s;", "PAUSE ALL;"]:
            assert not watch.newer_than(seen[-1])
            engine.execute(statement)
            wait_until(lambda: watch.newer_than(seen[-1]), 30, f"a look to see {statement!r}")  # noqa: B023
            seen.append(watch.last())
            assert not watch._conn.in_transaction()  # neither a WAL snapshot kept nor a session idle in one
        assert seen[0] == 0
        assert seen[1] < seen[2] < seen[3] == engine.catalog.commands.last()
    finally:
        watch.close()
        engine.close()


@pytest.mark.parametrize("url, listens, local", [
    ("sqlite:///catalog.db", False, True),  # a read of a local file
    ("postgresql+psycopg://streamql@db/catalog", True, True),  # a look for an announcement
    ("postgresql+pg8000://streamql@db/catalog", False, False),  # another driver: a read, a round trip
])
def test_a_look_listens_only_through_psycopg_and_is_local_without_a_round_trip(url, listens, local):
    """Whether a runtime's look at the newest statement waits for announcements (psycopg's
    notifies()) and costs no round trip (then a runtime looks every 5 ms, else every 50)."""
    import types

    # pg8000 is not installed here: only its name is needed, nothing connects
    engine = create_engine(url, module=types.SimpleNamespace(paramstyle="format")) if "pg8000" in url else create_engine(url)
    watch = LastCommandWatch(engine)
    assert (watch.listens, watch.local) == (listens, local)


def test_on_postgresql_a_look_reads_only_once_a_statement_was_announced(postgres_server, home):
    """A runtime waiting for its next pass looks every 5 ms: on PostgreSQL each logged
    statement is announced (NOTIFY at its commit), so a look asks the held session whether
    one was, without a round trip; it reads once one was."""
    from sqlalchemy import text

    url = _new_pg_database(postgres_server)
    engine, catalog = Engine(url, home=home, issuer="test"), Catalog(url)
    watch = catalog.commands.watch(reread=3600)  # no read but after an announcement
    sent: list[str] = []
    event.listen(catalog.engine, "before_cursor_execute", lambda _c, _r, statement, *_: sent.append(statement))
    try:
        seen = watch.last()
        sent.clear()
        assert not any(watch.newer_than(seen) for _ in range(200))
        assert sent == []
        engine.execute("CREATE STREAM s (id INT KEY, v DOUBLE);")
        wait_until(lambda: watch.newer_than(seen), 30, "the statement announced")
        assert watch.last() == engine.catalog.commands.last() > seen
        assert len(sent) == 2  # the read of newer_than, and the last() above
        # the listening session is the look's own: closed with it, never handed back to the pool
        held = watch._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        watch.close()
        with catalog.engine.connect() as conn:
            ended = text("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = :pid")
            wait_until(lambda: conn.execute(ended, {"pid": held}).scalar(), 30, "the listening session ended")
    finally:
        watch.close()
        catalog.close()
        engine.close()


def test_a_held_look_whose_session_was_ended_fails_once_then_opens_another(postgres_server):
    """The server ended the look's session (a restart, an administrator): that look fails,
    as any catalog read would, and the next one reads on a new session."""
    import psycopg
    from sqlalchemy import text

    catalog = Catalog(_new_pg_database(postgres_server))
    watch = catalog.commands.watch()
    try:
        assert watch.last() == 0
        held = watch._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        watch._conn.rollback()
        with catalog.engine.connect() as conn:  # waits until the session has ended
            assert conn.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": held}).scalar()
        with pytest.raises(DBAPIError):
            watch.last()
        assert watch.last() == 0
        assert watch._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != held
        # a look that only asks whether a statement was announced finds the session ended too
        watch.close()
        watch = catalog.commands.watch(reread=3600)  # it does not read after a while instead
        watch.last()
        held = watch._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        watch._conn.rollback()
        with catalog.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": held}).scalar()
        with pytest.raises(psycopg.OperationalError):
            for _ in range(100):  # psycopg finds the end at the look after the session ended
                watch.newer_than(0)
                time.sleep(0.01)
        assert watch.newer_than(0) is False  # read on a new session: no statement yet
        assert watch._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != held
    finally:
        watch.close()
        catalog.close()


def test_the_catalog_holds_its_parts_over_one_database(sqlite_url):
    """Desired state is the Catalog's own; the rest are parts it holds (no mixins), each on
    the catalog's one engine, and those that need another hold that one: a stopped runtime
    releases its leases, observed state and a hold at a bad record are fenced by the leases,
    and a hold is logged in the command log."""
    catalog = Catalog(sqlite_url)
    parts = [catalog.commands, catalog.leases, catalog.runtimes, catalog.observed, catalog.bad_records,
             catalog.snapshots, catalog.event_cursors]
    assert Catalog.__bases__ == (object,)
    assert {id(part.engine) for part in parts} == {id(catalog.engine)}
    assert catalog.runtimes.leases is catalog.observed.leases is catalog.bad_records.leases is catalog.leases
    assert catalog.bad_records.commands is catalog.commands


def test_newer_catalog_than_code_is_refused(sqlite_url):
    import pytest
    from sqlalchemy import update

    from airflow_provider_streamql.errors import CatalogError
    Catalog(sqlite_url)
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(update(schema.schema_version).values(version=LATEST + 1))
    with pytest.raises(CatalogError, match="newer than this streamql"):
        Catalog(sqlite_url)


def test_progress_history_keeps_the_last_batches(catalog_url):
    from airflow_provider_streamql.catalog import Progress
    from airflow_provider_streamql.catalog.observed import HISTORY
    catalog = Catalog(catalog_url)
    batch = lambda n: Progress("Q", n, 10, 10, float(n), [], 1000.0 + n)
    for n in range(HISTORY + 11):
        catalog.observed.record_progress(batch(n))
    history = catalog.observed.progress_history("Q")
    assert [h["batch_id"] for h in history] == list(range(11, HISTORY + 11))
    assert history[-1] == {"batch_id": HISTORY + 10, "at": 1000.0 + HISTORY + 10, "input_rows": 10,
                           "rows_per_second": float(HISTORY + 10)}
    assert catalog.observed.progress("Q").total_input_rows == 10 * (HISTORY + 11)
    catalog.observed.record_progress(batch(40))  # a rolled-back checkpoint runs batch 40 again
    assert [h["batch_id"] for h in catalog.observed.progress_history("Q")] == list(range(11, 41))


def test_a_query_recorded_before_plans_is_planned_with_the_grace_it_ran_with(tmp_path):
    """Catalogs from before stored plans are planned by today's planner on migration, except
    for what they ran with: a WINDOW without GRACE PERIOD had grace 0 then (24 hours now)."""
    from airflow_provider_streamql.catalog.migrations import _plan
    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path / "home"))
    engine.execute("CREATE STREAM clicks (user STRING, ts TIMESTAMP) WITH (timestamp='ts');"
                   "CREATE TABLE per_minute AS SELECT user, COUNT(*) AS n FROM clicks "
                   "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user")
    query = engine.catalog.query("CTAS_PER_MINUTE_1")
    assert query.plan.watermarks == {"CLICKS": ["ts", 24 * 3600.0]}  # planned today
    known = {name: engine.catalog.source(name) for name in ("CLICKS", "PER_MINUTE")}
    _select, plan, shape = _plan(query, known)
    assert plan["watermarks"] == {"CLICKS": ["ts", 0.0]} and shape["grace"] == {"CLICKS": 0.0}
    engine.close()


def test_a_forked_process_opens_its_own_connections(catalog_url):
    """Catalog connections are pooled; a forked child (an Airflow task) writes through the
    same Catalog on a connection of its own, and the parent's stays usable."""
    import os

    from sqlalchemy import text

    catalog = Catalog(catalog_url)
    catalog.runtimes.heartbeat("parent", "p", "host", os.getpid())
    session = "SELECT pg_backend_pid()" if catalog.dialect == "postgresql" else "SELECT 1"
    with catalog.engine.connect() as conn:  # the connection the pool hands out again
        parent_session = conn.execute(text(session)).scalar()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its session, write, and close its catalog
        try:
            with catalog.engine.connect() as conn:
                os.write(write, str(conn.execute(text(session)).scalar()).encode())
            catalog.runtimes.heartbeat("child", "p", "host", os.getpid())
            catalog.close()  # closes the child's connections, not the parent's
        finally:
            os._exit(0)
    os.close(write)
    child_session = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    assert {r["id"] for r in catalog.runtimes.all()} == {"parent", "child"}
    if catalog.dialect == "postgresql":
        assert child_session != str(parent_session)  # not the parent's server session
    with catalog.engine.connect() as conn:  # the parent's pooled session is still alive
        assert conn.execute(text(session)).scalar() == parent_session
    catalog.runtimes.heartbeat("parent", "p", "host", os.getpid())
    catalog.close()


def test_writes_from_many_threads_all_land(catalog_url):
    """A runtime's workers and listener write at once: every write lands, none times out."""
    from concurrent.futures import ThreadPoolExecutor

    catalog = Catalog(catalog_url)

    def take(worker: int) -> list[int | None]:
        return [catalog.leases.acquire(f"Q{worker}_{n}", f"rt-{worker}", 60) for n in range(25)]

    with ThreadPoolExecutor(16) as pool:
        epochs = list(pool.map(take, range(16)))
    assert epochs == [[1] * 25] * 16
    leases = catalog.leases.holders()
    assert {(q, lease["runtime_id"]) for q, lease in leases.items()} == {
        (f"Q{w}_{n}", f"rt-{w}") for w in range(16) for n in range(25)
    }
    catalog.close()


def test_a_read_after_a_write_takes_no_write_lock(sqlite_url):
    """Readers never wait for writers, nor writers for readers: a pooled connection that
    wrote before reads with a plain BEGIN."""
    import sqlite3

    from sqlalchemy import text

    catalog = Catalog(sqlite_url)
    catalog.runtimes.heartbeat("rt", "p", "host", 1)  # a write: its connection goes back to the pool
    with catalog.engine.connect() as reader, reader.begin():
        reader.execute(text("SELECT count(*) FROM runtimes")).scalar()
        other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # "database is locked" if the reader took the lock
        other.execute("ROLLBACK")
        other.close()
    catalog.close()


@pytest.mark.parametrize("exclusive, synchronous", [(True, 2), (False, 1)])  # FULL, NORMAL
def test_statements_are_synced_to_disk_and_reports_are_not(sqlite_url, exclusive, synchronous):
    """SQLite: a statement's commit waits for the disk; a runtime's report does not."""
    from airflow_provider_streamql.catalog.connections import write_connection

    catalog = Catalog(sqlite_url)
    with write_connection(catalog.engine, exclusive=exclusive) as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == synchronous
    catalog.close()




def test_the_previous_release_catalog_migrates_and_keeps_reading_its_outputs(catalog_url, home):
    """The catalog of the release before typed shapes and one spelling per column (frozen:
    fixtures/catalog_v10, written by commit 8d9f4ee) opens: every output reads back what its
    files hold, in every spelling they hold it, and an upgrade that release ran in place still
    runs in place (its shapes' type text is today's, its INSERT INTO is not created twice)."""
    _load_old_catalog(catalog_url, ("catalog_v10",), home)
    os.makedirs(f"{home}/topics/UO")
    with open(f"{home}/topics/UO/CSAS_UO_1-v0001-b000000000000.json", "w") as f:
        f.write('{"id":7,"name":"bob"}\n')  # as that release's plan wrote it: SELECT id, name
    with open(f"{home}/topics/UO/INSERTQUERY_2-v0001-b000000000000.json", "w") as f:
        f.write('{"ID":8,"NAME":"al"}\n')  # and its second writer: SELECT ID, NAME
    engine = Engine(catalog_url, home=home)
    assert [c.name for c in engine.catalog.source("UO").columns] == ["id", "name"]
    assert sorted(engine.execute("SELECT * FROM UO")[0].rows) == [[7, "bob"], [8, "al"]]
    assert engine.query("INSERTQUERY_2").plan.spark_sql == \
        "SELECT ID AS `id`, NAME AS `name` FROM sq_insertquery_2_u AS U"  # writes the adopted spelling now
    assert {i.action for i in engine.plan(PREVIOUS_SCRIPT).items} == {"unchanged"}  # a redeploy changes nothing
    for replaced in (  # a filter changed: in place, as that release said
        "CREATE OR REPLACE STREAM TYPED AS SELECT ID, AMT, AT, named_struct('a', ID) AS S FROM U WHERE ID > 1",
        "CREATE OR REPLACE TABLE TOTALS AS SELECT NAME, SUM(AMT) AS TOTAL FROM U WHERE ID > 0 GROUP BY NAME",
    ):
        report = engine.validate(replaced)
        assert report.verdict == "IN_PLACE", report.render()
    typed = engine.catalog.source("TYPED")
    assert [c.type.spark() for c in typed.columns] == ["INT", "DECIMAL(10, 0)", "TIMESTAMP", "STRUCT<a: INT>"]
    engine.close()
