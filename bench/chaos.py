"""Chaos soak (issue 34): a pipeline of five queries on a PostgreSQL catalog, run by two
`streamql runtime` processes, fed at a steady rate while a seeded scheduler injects faults;
then every output is checked against the pipeline computed from the inputs in plain Python
(bench/chaos_checks.py).

    .venv/bin/python bench/chaos.py [--duration 1800] [--seed 1] [--faults kill,freeze,...]
                                    [--rate 20] [--lease-ttl 8] [--out chaos.json]

Faults (one at a time, at random seeded gaps): ``kill`` (kill -9 of a runtime, restarted as
a supervisor would), ``freeze`` (SIGSTOP of the runtime holding most leases for longer than
the lease TTL, until the other holds its queries, then SIGCONT: it must commit nothing and
step down by itself), ``catalog`` (PostgreSQL stopped in immediate mode for a few seconds),
``pause`` (PAUSE ALL, then RESUME ALL), ``upgrade`` (an in-place version that fails and is
rolled back, then one that runs), ``snapshot`` (SNAPSHOT of the stateful queries),
``poison`` (a bad record between good ones, read by a query under each error policy: the held
ones are resumed with SKIP BAD RECORDS; the record must reach each one's dead-letter stream
once), ``broker`` (the Kafka broker killed with SIGKILL, a few seconds without it, then
started again on its data: with it among the faults the soak runs a broker of its own, the
feeder produces each record to a Kafka topic too, through a real idempotent producer, and two
queries read that topic, one into a file stream, one into a topic produced exactly once,
which must each hold every record once, the topic as a read_committed consumer reads it).
Each kind comes once before any comes twice, and each comes at least once. The time to recover after a fault runs
from its end until every query is RUNNING and has committed every record written before that
end. Figures: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from airflow_provider_streamql.conditions import CaughtUp
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StateError
from airflow_provider_streamql.runtime import kafka_connector
from airflow_provider_streamql.runtime.kafka import CONF_PREFIX
from airflow_provider_streamql.storage import topics

try:
    from bench import chaos_checks as checks
    from bench.broker import REPO, KafkaBroker
except ImportError:  # run as a script, without the repository on the path
    import chaos_checks as checks  # type: ignore[no-redef]
    from broker import REPO, KafkaBroker  # type: ignore[no-redef]

FAULTS = ("kill", "freeze", "catalog", "pause", "upgrade", "snapshot", "poison", "broker")

PIPELINE = """
CREATE STREAM orders (id INT KEY, user STRING, amount DOUBLE, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE users (user STRING PRIMARY KEY, region STRING);
CREATE STREAM big AS SELECT id, user, amount, ts FROM orders WHERE amount >= 50;
CREATE STREAM big_doubled AS SELECT id, user, amount * 2 AS doubled FROM big;
CREATE TABLE totals AS SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY user;
CREATE TABLE per_minute AS SELECT user, COUNT(*) AS n FROM orders WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user;
CREATE STREAM enriched AS SELECT o.id AS id, o.user AS user, u.region AS region
  FROM orders o JOIN users u ON o.user = u.user;
"""
#: queries under each error policy, over a stream the ``poison`` fault writes bad records to
POLICIES = ("FAIL", "PAUSE", "LOG_AND_CONTINUE")
PILLS = "CREATE STREAM pills (id INT KEY, n INT);" + "".join(
    f"CREATE STREAM pills_{p.lower()} WITH (on_error='{p}') AS SELECT id, n FROM pills;" for p in POLICIES
)
#: the filter's in-place versions: one that fails on its first record (CAST('u1' AS INT)) and
#: is rolled back, one that runs and writes what the first did
FAILING = (
    "CREATE OR REPLACE STREAM big AS SELECT id, user, amount / CAST(user AS INT) AS amount, ts "
    "FROM orders WHERE amount >= 50"
)
RUNNING = tuple(
    f"CREATE OR REPLACE STREAM big AS SELECT id, user, amount, ts FROM orders WHERE amount >= {t}"
    for t in ("50.0", "50")
)  # the same filter, written two ways: each upgrade a new version

#: queries over a Kafka topic the feeder produces to, for the ``broker`` fault: one into a file
#: stream, one into a topic written exactly once ({events}, {once}: the topics' names)
KAFKA = (
    "SET 'auto.offset.reset' = 'earliest';"
    "CREATE STREAM events (id INT KEY, n INT) WITH (kafka_topic='{events}');"
    "CREATE STREAM events_copy AS SELECT id, n FROM events;"
    "SET 'processing.guarantee' = 'exactly_once_v2';"
    "CREATE STREAM events_once WITH (kafka_topic='{once}') AS SELECT id, n FROM events PARTITION BY id;"
)

PG_BIN = os.environ.get("STREAMQL_PG_BIN") or max(
    glob.glob("/usr/lib/postgresql/*/bin"),
    key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
    default="/usr/lib/postgresql/15/bin",
)


@dataclasses.dataclass
class Settings:
    duration: float = 1800.0  # seconds of faults (at least one of each kind, however long that takes)
    seed: int = 1
    faults: tuple[str, ...] = FAULTS
    rate: float = 20.0  # records a second
    lease_ttl: float = 8.0
    gap: tuple[float, float] = (5.0, 20.0)  # seconds between the recovery from a fault and the next
    recover_timeout: float = 180.0
    root: str | None = None  # where the catalog's data, the home and the logs go (default: a new temp dir)


class Postgres:
    """A PostgreSQL server of the soak's own, so a fault can stop it."""

    def __init__(self) -> None:
        # a folder of its own under the temp dir: the server runs as postgres when we are root
        self.data, self.port = tempfile.mkdtemp(prefix="streamql-chaos-pg-"), _free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.data, "postgres")
        self._run(f"{PG_BIN}/initdb", "-D", self.data, "-U", "streamql", "--auth=trust", "-E", "UTF8")
        self.url = f"postgresql+psycopg://streamql@127.0.0.1:{self.port}/postgres"
        self.running = False

    def _run(self, *cmd: str, check: bool = True) -> None:
        subprocess.run([*self.as_user, *cmd], check=check, capture_output=True)

    def start(self) -> None:
        self.running = True  # from the attempt on: a start that timed out may still bring it up
        self._run(
            f"{PG_BIN}/pg_ctl",
            "-D",
            self.data,
            "-l",
            f"{self.data}/log",
            "-w",
            "-o",
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1",
            "start",
        )

    def stop(self, *, check: bool = True) -> None:
        self._run(f"{PG_BIN}/pg_ctl", "-D", self.data, "-m", "immediate", "stop", check=check)
        self.running = False

    def stop_if_running(self) -> None:
        """The soak's last stop: one already down (``pg_ctl`` fails to stop it) is fine."""
        if self.running:
            self.stop(check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runtimes:
    """Two `streamql runtime` processes of the pipeline, each restarted when it exits (as a
    supervisor would); ``held`` pauses that for a runtime a fault owns."""

    def __init__(self, env: dict[str, str], logs: str, lease_ttl: float, conf: tuple[str, ...] = ()):
        self.env, self.logs, self.lease_ttl, self.conf = env, logs, lease_ttl, conf
        self.procs: list[subprocess.Popen] = []
        self.exits: list[tuple[int, int | None]] = []  # (slot, exit code) of exits no fault made
        self.lock = threading.RLock()  # a kill and its restart are one step to the supervisor
        self.stopping = threading.Event()

    def start(self, slot: int) -> subprocess.Popen:
        log = open(os.path.join(self.logs, f"runtime-{slot}-{len(self.exits) + len(self.procs)}.log"), "w")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "airflow_provider_streamql.cli",
                "runtime",
                "--master",
                "local[1]",
                "--interval",
                "0.2",
                "--lease-ttl",
                str(self.lease_ttl),
                "--readiness-window",
                "30",
                "--conf",
                "spark.ui.enabled=false",
                *self.conf,
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc.log = log.name  # type: ignore[attr-defined]
        with self.lock:
            if slot < len(self.procs):
                self.procs[slot] = proc
            else:
                self.procs.append(proc)
        return proc

    def supervise(self) -> None:
        while not self.stopping.wait(0.5):
            with self.lock:
                if self.stopping.is_set():
                    return
                for slot, proc in enumerate(self.procs):
                    if proc.poll() is not None:
                        self.exits.append((slot, proc.returncode))
                        self.start(slot)

    def signal(self, slot: int, sig: int) -> None:
        os.killpg(self.procs[slot].pid, sig)

    def kill(self, slot: int) -> None:
        """kill -9 of the driver (Python and JVM), restarted at once."""
        with self.lock:
            proc = self.procs[slot]
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.start(slot)

    def stop(self) -> None:
        with self.lock:  # the supervisor starts nothing after this
            self.stopping.set()
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.killpg(proc.pid, signal.SIGCONT)
                    proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)


class Feeder(threading.Thread):
    """Appends ``rate`` records a second to the orders topic, a file every quarter second, as a
    producer would: straight to the topic, never through the catalog (which a fault stops).
    With a Kafka topic, each record is produced to it too (key: its id), by a producer that
    keeps what it could not deliver yet while the broker is down."""

    def __init__(self, engine: Engine, rate: float, kafka: KafkaBroker | None = None, topic: str = ""):
        super().__init__(daemon=True)
        src = engine.catalog.source("ORDERS")
        self.path, self.format, self.columns = src.path, src.format, src.columns
        self.rate, self.stopping, self.fed = rate, threading.Event(), 0
        self.topic, self.undelivered = topic, []  # the broker's answers to records it refused
        if kafka is not None:
            from confluent_kafka import Producer

            # log_level 2: not a line a second per refused connection while the broker is down
            # (a record it could not deliver is said at the end, by the delivery reports)
            self.producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True, "log_level": 2})

    def _report(self, error, message) -> None:
        if error:
            self.undelivered.append(f"{message.key().decode()}: {error}")

    def flush(self) -> int:
        """Records the producer still holds after waiting for their delivery."""
        return self.producer.flush(60) if self.topic else 0

    def run(self) -> None:
        owed = 0.0
        while not self.stopping.wait(0.25):
            owed += self.rate / 4
            n, owed = int(owed), owed - int(owed)
            if n:
                rows = [checks.Order(i).row() for i in range(self.fed + 1, self.fed + n + 1)]
                topics.append(self.path, self.format, self.columns, rows)
                for row in rows if self.topic else ():
                    self.producer.produce(
                        self.topic, key=str(row["id"]), value=json.dumps({"n": 1}), on_delivery=self._report
                    )
                    self.producer.poll(0)
                self.fed += n


@dataclasses.dataclass
class Fault:
    kind: str
    at: float  # seconds since the faults began
    detail: str = ""
    recovered_s: float | None = None


class Soak:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.root = settings.root or tempfile.mkdtemp(prefix="streamql-chaos-")
        self.pg = Postgres()
        self.home = os.path.join(self.root, "home")
        os.makedirs(self.home, exist_ok=True)
        self.issued: list[str] = []
        self.faults: list[Fault] = []
        self.query_ids: list[str] = []
        self.pills: list[int] = []  # ids of the good records of the pills stream
        self.poisoned: list[str] = []  # the bad records' text, each with a mark of its own
        self.stale: list[checks.Verdict] = []  # whether each frozen lease holder stepped down
        self.kafka: KafkaBroker | None = None  # the soak's own broker, with the ``broker`` fault
        self.events, self.once = "chaos-events", "chaos-events-once"

    # -- the control plane, as an operator or Airflow would drive it -------------------------
    def issue(self, sql: str) -> list:
        results = self.engine.execute(sql)
        self.issued.extend(r.statement for r in results)  # the log has each statement of a script
        return results

    def retrying(self, what: Callable, timeout: float = 60.0):
        """``what()``, again while the catalog is not there yet (after its restart)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return what()
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        start = time.monotonic()
        while not self.retrying(predicate):
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.2)
        return time.monotonic() - start

    def settled(self, as_of: float) -> Callable[[], bool]:
        """Every query RUNNING, each having committed every record written by ``as_of``."""
        caught_up = {q: CaughtUp(q, as_of=as_of) for q in self.query_ids}

        def check() -> bool:
            return all(self.engine.state(q) == "RUNNING" for q in self.query_ids) and all(
                c.check(self.engine).done for c in caught_up.values()
            )

        return check

    def holders(self) -> dict[str, int]:
        """query -> slot of the runtime process holding its lease"""
        slot_of = {
            r["id"]: self.runtimes.procs.index(p)
            for r in self.engine.runtimes("default")
            for p in self.runtimes.procs
            if p.pid == r["pid"]
        }
        return {
            q: slot_of[h["runtime_id"]]
            for q, h in self.engine.catalog.leases.holders().items()
            if h["runtime_id"] in slot_of
        }

    # -- faults --------------------------------------------------------------------------------
    def kill(self) -> str:
        slot = self.rng.randrange(2)
        self.runtimes.kill(slot)
        return f"runtime {slot}"

    def freeze(self) -> str:
        held = self.holders()
        slot = max((0, 1), key=lambda s: sum(1 for h in held.values() if h == s))
        mine = [q for q, h in held.items() if h == slot]
        frozen_at = time.monotonic()
        self.runtimes.signal(slot, signal.SIGSTOP)
        try:
            # the other runtime takes every lease the frozen one held, once they expire
            self.wait(
                lambda: all(self.holders().get(q) == 1 - slot for q in mine),
                self.settings.lease_ttl * 3 + 120,
                "the other runtime to take the frozen one's queries",
            )
            time.sleep(max(0.0, self.settings.lease_ttl + 1 - (time.monotonic() - frozen_at)))
        finally:
            self.runtimes.signal(slot, signal.SIGCONT)
        frozen = f"runtime {slot} stopped {time.monotonic() - frozen_at:.1f}s holding {len(mine)} queries"
        log = self.runtimes.procs[slot].log  # type: ignore[attr-defined]
        said = lambda: open(log).read().count("lost the lease")
        before = said()
        try:  # the stale holder finds out by itself (its next renewal, or the fence at a commit)
            stepped = self.wait(lambda: not mine or said() > before, 60, "the frozen runtime to step down")
        except TimeoutError:
            self.stale.append(checks.Verdict(f"frozen runtime {slot} steps down by itself", False, frozen))
            return f"{frozen}; it never said it lost a lease"
        self.stale.append(checks.Verdict(f"frozen runtime {slot} steps down by itself", True, frozen))
        return f"{frozen}; it stepped down {stepped:.1f}s after SIGCONT"

    def catalog(self) -> str:
        self.pg.stop()
        down = self.rng.uniform(2, 6)
        time.sleep(down)
        self.pg.start()
        return f"down {down:.1f}s"

    def broker(self) -> str:
        assert self.kafka is not None
        down = self.rng.uniform(3, 10)
        seen: dict[tuple[str, str, str | None], float] = {}  # (query, state, error) -> seconds in, when first seen
        began, stopping = time.monotonic(), threading.Event()

        def watch() -> None:  # what a user sees of the Kafka queries meanwhile (SHOW QUERIES, DESCRIBE)
            while not stopping.wait(0.5):
                for q in (q for q in self.query_ids if "EVENTS" in q):
                    with contextlib.suppress(Exception):  # the catalog may be down too
                        seen.setdefault((q, self.engine.state(q), self.engine.query(q).error), time.monotonic() - began)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            back = self.kafka.restart(down, signal.SIGKILL)
        finally:
            stopping.set()
            watcher.join()
        shown = "; ".join(
            f"{at:.1f}s {q} {state}{f': {error}' if error else ''}" for (q, state, error), at in seen.items()
        )
        return f"SIGKILL, down {down:.1f}s, answering {back:.1f}s after its start; seen: {shown}"

    def pause(self) -> str:
        self.issue("PAUSE ALL")
        self.wait(lambda: all(self.engine.state(q) == "PAUSED" for q in self.query_ids), 120, "PAUSE ALL")
        self.issue("RESUME ALL")
        return f"{len(self.query_ids)} queries"

    def upgrade(self) -> str:
        query = self.query_ids[0]
        outcome = lambda v: {r["version"]: r["outcome"] for r in self.engine.catalog.versions(query)}.get(v)
        (failing,) = self.issue(FAILING)
        self.wait(lambda: outcome(failing.version) == "ROLLED_BACK", 180, f"the rollback of {query}")
        self.wait(
            lambda: self.engine.query(query).running_version == failing.version - 1,
            120,
            f"{query} back on its version {failing.version - 1}",
        )
        (running,) = self.issue(RUNNING[sum(1 for f in self.faults if f.kind == "upgrade") % 2])
        self.wait(lambda: outcome(running.version) == "ACTIVE", 180, f"{query} version {running.version}")
        return f"{query}: version {failing.version} rolled back, {running.version} active"

    def snapshot(self) -> str:
        stateful = [q for q in self.query_ids if q.startswith("CTAS_")]
        for query in stateful:
            self.issue(f"SNAPSHOT {query}")
        return ", ".join(stateful)

    def poison(self) -> str:
        src = self.engine.catalog.source("PILLS")
        for part in ("good", "bad", "good"):
            if part == "bad":  # a record no query can read: an id that is no INT
                mark = f"pill-{len(self.poisoned) + 1}"
                name = f"i{time.time_ns():020d}-{mark}{topics.FORMATS[src.format][1]}"
                with open(os.path.join(src.path, f".{name}.tmp"), "w") as f:
                    f.write(json.dumps({"id": mark, "n": 1}) + "\n")
                os.rename(os.path.join(src.path, f".{name}.tmp"), os.path.join(src.path, name))
                self.poisoned.append(mark)
            else:  # ids go on from the last good record's, so none is fed twice
                rows = [{"id": len(self.pills) + i, "n": 1} for i in range(1, 4)]
                topics.append(src.path, src.format, src.columns, rows)
                self.pills += [r["id"] for r in rows]
        held = [q for q in self.query_ids if q.startswith(("CSAS_PILLS_FAIL", "CSAS_PILLS_PAUSE"))]
        for query in held:  # once the bad record holds it (ERROR, or PAUSED with the reason)
            self.wait(lambda: self.skip(query), 120, f"the bad record to hold {query}")
        return f"{self.poisoned[-1]}; skipped in {', '.join(held)}"

    def skip(self, query: str) -> bool:
        try:
            self.issue(f"RESUME {query} SKIP BAD RECORDS")
        except StateError:  # no bad record holds it yet
            return False
        return True

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> dict:
        """The soak: start everything, inject the faults, check. Whatever happens (a fault
        that times out, an error of the harness), every process it started is stopped."""
        self.engine: Engine | None = None
        self.runtimes: Runtimes | None = None
        with contextlib.ExitStack() as started:  # each stop runs, whatever the others and the soak raised
            started.callback(shutil.rmtree, self.pg.data, ignore_errors=True)
            started.callback(lambda: self.kafka.stop() if self.kafka is not None else None)
            started.callback(self.pg.stop_if_running)
            started.callback(lambda: self.engine.close() if self.engine is not None else None)
            started.callback(lambda: self.runtimes.stop() if self.runtimes is not None else None)
            return self._run()

    def _run(self) -> dict:
        s = self.settings
        self.pg.start()
        conf: tuple[str, ...] = ()
        if "broker" in s.faults:
            self.kafka = KafkaBroker().start()
            self.kafka.create_topic(self.events, partitions=2)
            self.kafka.create_topic(self.once, partitions=2)
            conf = ("--conf", f"{CONF_PREFIX}bootstrap.servers={self.kafka.bootstrap}")
        bootstrap = self.kafka.bootstrap if self.kafka else None
        self.engine = Engine(self.pg.url, home=self.home, issuer="chaos", kafka_bootstrap_servers=bootstrap)
        results = self.issue(
            PIPELINE
            + (PILLS if "poison" in s.faults else "")
            + (KAFKA.format(events=self.events, once=self.once) if self.kafka else "")
        )
        self.query_ids = [r.query_id for r in results if r.query_id]
        users = self.engine.catalog.source("USERS")
        topics.append(
            users.path, users.format, users.columns, [{"user": u, "region": r} for u, r in checks.REGIONS.items()]
        )
        env = {**os.environ, "STREAMQL_HOME": self.home, "STREAMQL_CATALOG": self.pg.url, "PYTHONUNBUFFERED": "1"}
        env.setdefault(kafka_connector.JARS_ENV, os.path.join(REPO, ".kafka", "connector"))  # as the tests
        self.runtimes = Runtimes(env, self.root, s.lease_ttl, conf)
        self.runtimes.start(0)
        self.runtimes.start(1)
        threading.Thread(target=self.runtimes.supervise, daemon=True).start()
        feeder = self.feeder = Feeder(self.engine, s.rate, self.kafka, self.events if self.kafka else "")
        feeder.start()
        first = self.rng.sample(s.faults, len(s.faults))
        began = time.monotonic()
        try:
            self.wait(self.settled(time.time()), 300, "the pipeline to start")
            faulting = time.monotonic()
            while first or time.monotonic() - faulting < s.duration:
                time.sleep(self.rng.uniform(*s.gap))
                # each kind once first (in a seeded order), so a short run meets them all
                kind = first.pop() if first else self.rng.choice(s.faults)
                fault = Fault(kind, round(time.monotonic() - began, 1))
                try:
                    fault.detail = getattr(self, kind)()
                    stalled = False
                except TimeoutError as e:  # a step of the fault never happened: a finding, not an abort
                    fault.detail, stalled = f"{e}", True
                try:
                    recovered = self.wait(self.settled(time.time()), s.recover_timeout, f"recovery from {kind}")
                    fault.recovered_s = None if stalled else round(recovered, 2)
                except TimeoutError as e:
                    fault.detail += f"; {e}"
                self.faults.append(fault)
                print(f"{fault.at:8.1f}s {kind:9} recovered in {fault.recovered_s}s  {fault.detail}", flush=True)
        finally:
            feeder.stopping.set()
            feeder.join()
        try:
            catch_up: float | None = self.wait(self.settled(time.time()), s.recover_timeout, "the final catch-up")
        except TimeoutError:  # checked all the same: the checks say what is behind
            catch_up = None
        verdicts = self.check(feeder.fed)
        return self.summary(time.monotonic() - began, feeder.fed, catch_up, verdicts)

    def check(self, fed: int) -> list[checks.Verdict]:
        want = checks.expected(checks.Order(i) for i in range(1, fed + 1))
        verdicts = [
            checks.exactly_once(name, ids, (r[0] for r in self.read(f"SELECT id FROM {name}")))
            for name, ids in want.streams.items()
        ]
        verdicts.append(
            checks.equal_table(
                "totals",
                want.tables["totals"],
                {r[0]: (r[1], r[2]) for r in self.read("SELECT user, n, total FROM totals")},
            )
        )
        verdicts.append(
            checks.equal_table(
                "per_minute",
                want.tables["per_minute"],
                {
                    (r[0], checks.minute(r[1])): (r[2],)
                    for r in self.read("SELECT user, WINDOWSTART, n FROM per_minute")
                },
            )
        )
        if "poison" in self.settings.faults:
            verdicts += self.check_pills()
        if self.kafka is not None:
            verdicts += self.check_kafka(fed)
        holders = self.engine.catalog.leases.holders()
        live = {r["id"] for r in self.engine.runtimes("default")}
        for query_id in self.query_ids:
            query = self.engine.query(query_id)
            verdicts.append(
                checks.explained(
                    checks.QueryAtEnd(
                        query_id,
                        query.desired_state,
                        self.engine.state(query_id),
                        query.version,
                        query.running_version,
                        holders.get(query_id, {}).get("runtime_id") in live,
                        tuple(v["outcome"] for v in self.engine.catalog.versions(query_id)),
                        query.error,
                    )
                )
            )
        verdicts += self.stale
        logged = [c["statement"] for c in self.engine.catalog.commands.all() if c["issuer"] == "chaos"]
        verdicts.append(checks.command_log(self.issued, logged))
        return verdicts

    def check_pills(self) -> list[checks.Verdict]:
        verdicts = []
        for policy in POLICIES:
            (query,) = (q for q in self.query_ids if q.startswith(f"CSAS_PILLS_{policy}_"))
            written = (r[0] for r in self.read(f"SELECT id FROM pills_{policy.lower()}"))
            verdicts.append(checks.exactly_once(f"pills_{policy.lower()}", set(self.pills), written))
            dead = [json.loads(r[0])["id"] for r in self.read(f"SELECT raw FROM {query}_DLQ")] if self.poisoned else []
            verdicts.append(checks.exactly_once(f"{query}_DLQ", set(self.poisoned), dead))
        return verdicts

    def check_kafka(self, fed: int) -> list[checks.Verdict]:
        """The records produced to the events topic, each once in the file stream and in the
        exactly-once topic as a read_committed consumer reads it."""
        assert self.kafka is not None
        held = self.feeder.flush()
        problems = self.feeder.undelivered + ([f"{held} never delivered"] if held else [])
        wanted = set(range(1, fed + 1))
        # the last batch's commit marker is written a moment after its commit returns
        kafka = self.kafka
        self.wait(
            lambda: not kafka.transaction_open(self.once),
            60,
            f"no transaction open on {self.once}",
        )
        once = [int(k) for k, *_ in kafka.read_to_end(self.once)]
        return [
            checks.Verdict(
                "events: the producer delivered every record",
                not problems,
                "; ".join(problems[:10]) or f"{fed} records",
            ),
            checks.exactly_once("events_copy", wanted, (r[0] for r in self.read("SELECT id FROM events_copy"))),
            checks.exactly_once("events_once (read_committed)", wanted, once),
        ]

    def read(self, sql: str) -> list:
        return self.engine.execute(sql)[0].rows

    def summary(self, took: float, fed: int, catch_up: float | None, verdicts: list[checks.Verdict]) -> dict:
        recovered = [f.recovered_s for f in self.faults if f.recovered_s is not None]
        counts = {k: sum(1 for f in self.faults if f.kind == k) for k in self.settings.faults}
        return {
            "seed": self.settings.seed,
            "duration_s": round(took, 1),
            "records": fed,
            "queries": self.query_ids,
            "faults": counts,
            "unrecovered": sum(1 for f in self.faults if f.recovered_s is None),
            "recovery_s": {"median": round(statistics.median(recovered), 2), "max": max(recovered)}
            if recovered
            else None,
            "final_catch_up_s": None if catch_up is None else round(catch_up, 2),
            "runtime_exits": len(self.runtimes.exits),
            "history": [dataclasses.asdict(f) for f in self.faults],
            "checks": [dataclasses.asdict(v) for v in verdicts],
            "passed": catch_up is not None
            and all(v.ok for v in verdicts)
            and all(f.recovered_s is not None for f in self.faults),
            "root": self.root,
        }


def report(summary: dict) -> str:
    lines = [
        f"{summary['duration_s']}s, {summary['records']} records, faults {summary['faults']}, "
        f"recovery {summary['recovery_s']}, runtime exits {summary['runtime_exits']}"
    ]
    if summary["final_catch_up_s"] is None:
        lines.append("  FAIL the pipeline caught up once the faults stopped: not within the recovery timeout")
    lines += [f"  {'ok  ' if v['ok'] else 'FAIL'} {v['check']}: {v['detail']}" for v in summary["checks"]]
    lines.append("PASSED" if summary["passed"] else "FAILED")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of faults")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated kinds")
    parser.add_argument("--rate", type=float, default=20.0, help="records a second")
    parser.add_argument("--lease-ttl", type=float, default=8.0)
    parser.add_argument("--gap", default="5,20", help="seconds between a recovery and the next fault: MIN,MAX")
    parser.add_argument("--out", default="chaos.json", help="the JSON summary")
    args = parser.parse_args()
    faults = tuple(args.faults.split(","))
    if set(faults) - set(FAULTS):
        parser.error(f"unknown faults {sorted(set(faults) - set(FAULTS))!r}; known: {', '.join(FAULTS)}")
    try:
        low, high = (float(v) for v in args.gap.split(","))
    except ValueError:
        low = high = -1.0
    if not 0 <= low <= high:
        parser.error(f"--gap {args.gap!r}: two numbers of seconds, 0 <= MIN <= MAX")
    summary = Soak(Settings(args.duration, args.seed, faults, args.rate, args.lease_ttl, gap=(low, high))).run()
    print(report(summary))
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=2)
    sys.exit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()
