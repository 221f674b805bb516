"""Runtimes as separate processes, driven by the `streamql` CLI from yet another process:
PAUSE across processes, two runtimes of one pipeline at once, SIGTERM and kill -9 restarts
(mid-batch, mid-upgrade), exit codes."""
from __future__ import annotations

import collections
import json
import os
import re
import signal

import pytest

from airflow_provider_streamql.conditions import CaughtUp
from airflow_provider_streamql.storage import topics
from airflow_provider_streamql.storage.checkpoints import last_committed_batch

from .conftest import KILLED_LEASE_TTL
from .support import cli, insert, reconcile_passes, sigterm, stream_rows, table, wait_until


def test_pause_from_the_cli_reaches_the_right_runtime(sqlite_engine, env, processes):
    engine = sqlite_engine
    engine.execute("CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE)")
    engine.execute("CREATE STREAM a AS SELECT * FROM purchases", pipeline="one")
    engine.execute("CREATE STREAM b AS SELECT * FROM purchases", pipeline="two")
    one, two = processes("one"), processes("two")
    for query_id in ("CSAS_A_1", "CSAS_B_2"):
        assert cli(env, "wait", query_id, "--state", "RUNNING", "--timeout", "120").returncode == 0

    paused = cli(env, "exec", "--wait", "PAUSE CSAS_A_1")
    assert paused.returncode == 0, paused.stderr
    assert "Paused CSAS_A_1" in paused.stdout
    insert(engine, "purchases", [(1, "ann", 5.0), (2, "bob", 1.0)])
    assert cli(env, "wait", "CSAS_B_2", "--caught-up").returncode == 0
    states = {q["query_id"]: q["state"] for q in json.loads(cli(env, "queries", "--json").stdout)}
    assert states == {"CSAS_A_1": "PAUSED", "CSAS_B_2": "RUNNING"}
    assert stream_rows(engine, "a") == [] and len(stream_rows(engine, "b")) == 2

    assert cli(env, "exec", "--wait", "RESUME CSAS_A_1").returncode == 0
    assert cli(env, "wait", "CSAS_A_1", "--caught-up").returncode == 0
    assert stream_rows(engine, "a") == stream_rows(engine, "b")
    assert sigterm(one) == 0 and sigterm(two) == 0
    assert {q["state"] for q in engine.queries()} == {"UNASSIGNED"}  # nothing runs them now


def test_restart_after_sigterm_and_kill_9_mid_batch(sqlite_engine, env, processes):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
        CREATE STREAM copy AS SELECT * FROM purchases;
        CREATE TABLE counts AS SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM purchases GROUP BY user;
        CREATE TABLE paused_counts AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user;
    """)
    users = ["ann", "bob", "cat"]
    records = [(i, users[i % 3], float(i)) for i in range(1, 31)]
    insert(engine, "purchases", records[:10])
    runtime = processes()
    for query_id in ("CSAS_COPY_1", "CTAS_COUNTS_2", "CTAS_PAUSED_COUNTS_3"):
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
        engine.wait_caught_up(query_id, timeout=60)
    assert cli(env, "exec", "--wait", "PAUSE CTAS_PAUSED_COUNTS_3").returncode == 0
    paused_checkpoint = engine.query("CTAS_PAUSED_COUNTS_3").checkpoint
    paused_batch = last_committed_batch(paused_checkpoint)
    paused_table = table(engine, "paused_counts")

    # 1. SIGTERM: a clean stop; the paused query stays paused across the restart.
    insert(engine, "purchases", records[10:20])
    assert sigterm(runtime) == 0
    assert engine.state("CTAS_PAUSED_COUNTS_3") == "PAUSED"
    runtime = processes(lease_ttl=KILLED_LEASE_TTL)  # killed below
    engine.wait_caught_up("CSAS_COPY_1", timeout=120)
    engine.wait_caught_up("CTAS_COUNTS_2", timeout=60)
    assert engine.state("CTAS_PAUSED_COUNTS_3") == "PAUSED"

    # 2. kill -9 of the whole driver (Python and JVM) while a micro-batch is in flight.
    checkpoint = engine.query("CSAS_COPY_1").checkpoint
    start = last_committed_batch(checkpoint)
    many = [(i, users[i % 3], float(i)) for i in range(31, 231)]
    insert(engine, "purchases", records[20:] + many)
    fed: list[tuple] = []

    def in_flight() -> int | None:
        """The batch planned but not committed now; if the runtime committed everything
        between two looks (a fast batch on a busy machine), it gets more input to plan."""
        batch = last_committed_batch(checkpoint) + 1
        if os.path.exists(f"{checkpoint}/offsets/{batch}") and not os.path.exists(f"{checkpoint}/commits/{batch}"):
            return batch
        if CaughtUp("CSAS_COPY_1").check(engine).done:
            more = [(i, users[i % 3], float(i)) for i in range(1000 + len(fed), 1200 + len(fed))]
            fed.extend(more)
            insert(engine, "purchases", more)
        return None
    batch = wait_until(in_flight, timeout=120, what="a planned but uncommitted batch")
    assert batch > start
    os.killpg(runtime.pid, signal.SIGKILL)
    runtime.wait()
    assert not os.path.exists(f"{checkpoint}/commits/{batch}")  # really mid-batch

    processes()  # takes the queries once the dead runtime's leases expire
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=120)
    everything = records + many + fed
    engine.wait_caught_up("CSAS_COPY_1", timeout=120)
    engine.wait_caught_up("CTAS_COUNTS_2", timeout=60)
    copied = collections.Counter(r[0] for r in stream_rows(engine, "copy"))
    assert set(copied) == {r[0] for r in everything}
    assert max(copied.values()) == 1  # exactly once: no duplicate, no missing row
    expected = {u: (sum(1 for r in everything if r[1] == u), sum(r[2] for r in everything if r[1] == u))
                for u in users}
    assert table(engine, "counts") == expected

    # the paused query processed nothing through both restarts
    assert engine.state("CTAS_PAUSED_COUNTS_3") == "PAUSED"
    assert last_committed_batch(paused_checkpoint) == paused_batch
    assert table(engine, "paused_counts") == paused_table
    assert cli(env, "exec", "--wait", "RESUME CTAS_PAUSED_COUNTS_3").returncode == 0
    engine.wait_caught_up("CTAS_PAUSED_COUNTS_3", timeout=60)
    assert table(engine, "paused_counts") == {u: (n,) for u, (n, _) in expected.items()}


def test_two_runtime_processes_of_one_pipeline_run_each_query_once(sqlite_engine, env, processes):
    """Two `streamql runtime` processes serve the same pipeline on one catalog and home at
    once: each query runs in exactly one of them (its lease), every record's output is
    there exactly once."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE)")
    procs = [processes(), processes()]
    # both serve the pipeline before it has queries: each query then goes to whichever
    # runtime takes its lease first, the two racing for every one of them
    wait_until(lambda: len(engine.runtimes("default")) == 2, 120, "both runtimes to heartbeat")
    runtime_of = {r["pid"]: r["id"] for r in engine.runtimes("default")}
    assert set(runtime_of) == {p.pid for p in procs}
    engine.execute("""
        CREATE STREAM copy AS SELECT * FROM purchases;
        CREATE STREAM doubled AS SELECT id, user, cost * 2 AS cost FROM purchases WHERE cost > 10;
        CREATE TABLE counts AS SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM purchases GROUP BY user;
    """)
    ids = ["CSAS_COPY_1", "CSAS_DOUBLED_2", "CTAS_COUNTS_3"]
    held: dict[str, set] = collections.defaultdict(set)  # query -> every (holder, epoch, Spark run) seen

    def sample() -> None:
        leases = engine.catalog.leases.holders()
        for query_id in ids:
            lease, run_id = leases.get(query_id), engine.query(query_id).run_id
            if lease is not None and run_id is not None:  # started
                held[query_id].add((lease["runtime_id"], lease["epoch"], run_id))

    def all_running() -> bool:
        sample()
        return all(engine.state(q) == "RUNNING" for q in ids)
    wait_until(all_running, 120, "every query running")

    users = ["ann", "bob", "cat"]
    records = [(i, users[i % 3], float(i)) for i in range(1, 31)]
    for chunk in (records[:10], records[10:20], records[20:]):  # while both serve the pipeline
        insert(engine, "purchases", chunk)
        for query_id in ids:
            wait_until(lambda: sample() or CaughtUp(query_id).check(engine).done, 60,
                       f"{query_id} to catch up")
    # several passes of each runtime over every query since the last input: neither took
    # or started a query the other holds
    for runtime_id in runtime_of.values():
        reconcile_passes(engine, runtime_id, passes=3, also=sample)
    assert len(engine.runtimes("default")) == 2  # both still serve it

    holders = {}
    for query_id in ids:
        (holder, epoch, run_id), = held[query_id]  # one holder, one run, all along
        assert holder in runtime_of.values() and epoch == 1, held[query_id]
        holders[query_id] = holder
    logs = {runtime_of[p.pid]: open(p.log).read() for p in procs}
    for runtime_id, log in logs.items():
        started = {q for q in ids if re.search(rf"\b{q} STARTING\b", log)}
        assert started == {q for q, h in holders.items() if h == runtime_id}, (runtime_id, started)
        assert "lost the lease" not in log

    copied = collections.Counter(r[0] for r in stream_rows(engine, "copy"))
    assert set(copied) == {r[0] for r in records} and max(copied.values()) == 1  # exactly once
    assert stream_rows(engine, "copy") == sorted(records)
    assert stream_rows(engine, "doubled") == sorted((i, u, c * 2) for i, u, c in records if c > 10)
    assert table(engine, "counts") == {
        u: (sum(1 for r in records if r[1] == u), sum(r[2] for r in records if r[1] == u)) for u in users}


def test_kill_9_during_an_in_place_upgrade_then_restart(sqlite_engine, env, processes):
    """kill -9 of the runtime while a CREATE OR REPLACE in place is being swapped: the new
    version started and in its readiness window, its first batch planned. A new runtime
    runs the query on one version, and every record's output is in the sink exactly once."""
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);
        CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;
    """)
    users = ["ann", "bob", "cat"]
    before = [(i, users[i % 3], float(i if i % 4 else -i)) for i in range(1, 21)]
    after = [(i, users[i % 3], float(i if i % 4 else -i)) for i in range(21, 221)]
    insert(engine, "purchases", before)
    # the readiness window outlasts the test: version 2 leaves it only by committing a batch
    runtime = processes("default", "--readiness-window", "600", lease_ttl=KILLED_LEASE_TTL)
    engine.wait_for_state("CSAS_VALID_1", "RUNNING", timeout=120)
    engine.wait_caught_up("CSAS_VALID_1", timeout=60)
    checkpoint = engine.query("CSAS_VALID_1").checkpoint
    swapped_at = last_committed_batch(checkpoint)
    outcomes = lambda: {v["version"]: v["outcome"] for v in engine.catalog.versions("CSAS_VALID_1")}

    (result,) = engine.execute("CREATE OR REPLACE STREAM valid AS SELECT * FROM purchases")
    assert (result.action, result.version) == ("replaced", 2)
    # version 1 stopped, the checkpoint snapshot taken, version 2 started: the swap is under
    # way (UPGRADING, then the readiness window) and, with no new input, stays so
    wait_until(lambda: engine.query("CSAS_VALID_1").running_version == 2, 120, "version 2 to start")
    assert outcomes() == {1: "REPLACED", 2: None}

    # input for version 2's first batch, as one file (one batch); kill -9 once it is planned
    src = engine.catalog.source("PURCHASES")
    topics.append(src.path, src.format, src.columns,
                  [dict(zip([c.name for c in src.columns], r, strict=True)) for r in after])
    wait_until(lambda: os.path.exists(f"{checkpoint}/offsets/{swapped_at + 1}"), 60,
               "version 2 to plan its first batch")
    # read the catalog after the kill, not while the runtime is frozen: a stopped process can
    # hold SQLite's locks (a write, or every WAL read mark), a dead one holds none
    os.killpg(runtime.pid, signal.SIGKILL)
    runtime.wait()
    assert outcomes() == {1: "REPLACED", 2: None}  # killed in its readiness window

    processes()  # takes the query once the dead runtime's lease expires
    engine.wait_for_version("CSAS_VALID_1", 2, ready=True, timeout=120)
    engine.wait_for_state("CSAS_VALID_1", "RUNNING", timeout=60)
    engine.wait_caught_up("CSAS_VALID_1", timeout=120)
    query = engine.query("CSAS_VALID_1")
    assert (query.version, query.running_version) == (2, 2)
    assert outcomes() == {1: "REPLACED", 2: "ACTIVE"}
    # version 1 filtered what came before the swap, version 2 let everything after it through
    expected = [r for r in before if r[2] > 0] + after
    written = collections.Counter(r[0] for r in stream_rows(engine, "valid"))
    assert set(written) == {r[0] for r in expected} and max(written.values()) == 1  # exactly once
    assert stream_rows(engine, "valid") == sorted(expected)
    assert last_committed_batch(checkpoint) > swapped_at


# args -> expected exit code (no runtime runs in these)
EXIT_CODES = [
    (["exec", "FROB it"], 2),
    (["exec", "PAUSE NOPE_1"], 2),
    (["exec"], 2),
    (["exec", "-f", "/nonexistent.sql"], 2),
    (["wait", "NOPE_1", "--state", "RUNNING"], 2),
    (["wait", "CSAS_V_1", "--state", "RUNNING", "--timeout", "0.5"], 3),  # timed out
    (["wait", "CSAS_V_1", "--caught-up", "--timeout", "0.5"], 3),
    (["exec", "--wait", "--timeout", "0.5", "PAUSE CSAS_V_1"], 3),
    (["exec", "SHOW QUERIES"], 0),
    (["queries"], 0),
    (["wait"], 2),
]


@pytest.mark.parametrize("args, code", EXIT_CODES)
def test_exit_codes(sqlite_engine, env, args, code):
    sqlite_engine.execute("CREATE STREAM s (id INT); INSERT INTO s VALUES (1); "
                          "CREATE STREAM v AS SELECT * FROM s")
    result = cli(env, *args)
    assert result.returncode == code, result.stderr
    if code:
        assert result.stderr.strip()


def test_exec_file_json_and_errors_with_position(env, tmp_path):
    script = tmp_path / "pipeline.sql"
    script.write_text("CREATE STREAM s (id INT, v DOUBLE);\nINSERT INTO s VALUES (1, 2.5);\nSELECT * FROM s;\n")
    out = cli(env, "exec", "-f", str(script), "--json")
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert results[2]["columns"] == ["id", "v"] and results[2]["rows"] == [[1, 2.5]]
    bad = cli(env, "exec", "SHOW STREAMS;\nSELECT nope FROM s")
    assert bad.returncode == 2
    assert "line 2, column 8: unknown column 'nope'" in bad.stderr
