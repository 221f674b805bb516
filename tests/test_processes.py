"""Runtimes as separate processes, driven by the `streamql` CLI from yet another process:
PAUSE across processes, SIGTERM and kill -9 restarts, exit codes."""
from __future__ import annotations

import collections
import json
import os
import signal

import pytest

from airflow_provider_streamql.storage.checkpoints import last_committed_batch

from .support import cli, insert, sigterm, stream_rows, table, wait_until

#: Lease TTL of a runtime a test kills with kill -9: its successor takes its queries once
#: their leases expire, this long after its last renewal. Short, to keep such tests quick;
#: long enough that a reconcile pass of these small pipelines renews every lease in time
#: (see conftest.LEASE_TTL for runtimes that are not killed).
KILLED_LEASE_TTL = 10.0


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
    in_flight = lambda: os.path.exists(f"{checkpoint}/offsets/{start + 1}") and \
        not os.path.exists(f"{checkpoint}/commits/{start + 1}")
    wait_until(in_flight, timeout=60, what="a planned but uncommitted batch")
    os.killpg(runtime.pid, signal.SIGKILL)
    runtime.wait()
    assert not os.path.exists(f"{checkpoint}/commits/{start + 1}")  # really mid-batch

    processes()  # takes the queries once the dead runtime's leases expire
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=120)
    everything = records + many
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


# args -> expected exit code (no runtime runs in these)
EXIT_CODES = [
    (["exec", "FROB it"], 2),
    (["exec", "PAUSE NOPE_1"], 2),
    (["exec"], 2),
    (["exec", "-f", "/nonexistent.sql"], 2),
    (["wait", "NOPE_1", "--state", "RUNNING"], 2),
    (["wait", "CSAS_V_1", "--state", "RUNNING", "--timeout", "0.5"], 1),
    (["wait", "CSAS_V_1", "--caught-up", "--timeout", "0.5"], 1),
    (["exec", "--wait", "--timeout", "0.5", "PAUSE CSAS_V_1"], 1),
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
