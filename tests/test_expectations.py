"""Row-level expectations on a real runtime (Databricks Lakeflow's expect, expect_or_drop,
expect_or_fail): each on_violation mode on the same few rows, the counts DESCRIBE shows, the
dead letters DROP writes, FAIL and PAUSE as the bad-record policies, and an expectation
changed in place on the same checkpoint."""
from __future__ import annotations

import json

from .support import stream_rows, wait_until
from .test_bad_records import produce

PAYMENTS = "CREATE STREAM payments (id INT KEY, amount INT);"
#: one query per mode, each expecting a positive amount
MODES = {
    "LOG": "CSAS_LOGGED_1",
    "DROP": "CSAS_DROPPED_2",
    "FAIL": "CSAS_FAILED_3",
    "PAUSE": "CSAS_PAUSED_4",
}
ROWS = [json.dumps({"id": i, "amount": amount}) for i, amount in ((1, 5), (2, -3), (3, None), (4, 7))]


def described(engine, query_id: str) -> dict:
    return dict(map(tuple, engine.execute(f"DESCRIBE {query_id} EXTENDED")[0].rows))


def ids(engine, stream: str) -> list[int]:
    return sorted(row[0] for row in stream_rows(engine, stream))


def test_each_violation_mode_on_a_real_runtime(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(
        PAYMENTS
        + "".join(
            f"CREATE STREAM {q.split('_')[1]} WITH (expect='Amount > 0', on_violation='{mode}') "
            f"AS SELECT * FROM payments;"
            for mode, q in MODES.items()
        )
    )
    runtimes.start(engine)
    for q in MODES.values():
        engine.wait_for_state(q, "RUNNING", timeout=120)
    produce(engine, "payments", ROWS, "part-0.json")
    engine.wait_caught_up("CSAS_LOGGED_1", timeout=60)
    engine.wait_caught_up("CSAS_DROPPED_2", timeout=60)
    engine.wait_for_state("CSAS_PAUSED_4", "PAUSED", timeout=60)

    # LOG keeps the violating row (-3) and counts it; NULL passes, as in Lakeflow
    assert ids(engine, "logged") == [1, 2, 3, 4]
    assert described(engine, "CSAS_LOGGED_1")["expectation"] == (
        "amount > 0 (on_violation LOG): 1 violating rows in the last batch, total 1"
    )
    # DROP leaves it out and sends it to the dead-letter stream, the expectation named
    assert ids(engine, "dropped") == [1, 3, 4]
    (letter,) = stream_rows(engine, "CSAS_DROPPED_2_DLQ")
    assert json.loads(letter[4]) == {"id": 2, "amount": -3} and letter[5] == "violates expectation amount > 0"
    # FAIL fails the batch before its output commits, naming the expectation and the row
    wait_until(lambda: engine.bad_records("CSAS_FAILED_3"), timeout=60)
    failed = engine.query("CSAS_FAILED_3")
    assert ids(engine, "failed") == []
    assert "expectation amount > 0 is violated by 1 row(s)" in (failed.error or "")
    assert [r.status for r in engine.bad_records("CSAS_FAILED_3")] == ["FAILED"]
    # PAUSE holds the query at the batch; RESUME ... SKIP BAD RECORDS goes on without the row
    assert ids(engine, "paused") == []
    (held,) = engine.bad_records("CSAS_PAUSED_4")
    assert (held.status, held.error) == ("PENDING", "violates expectation amount > 0")
    engine.execute("RESUME CSAS_PAUSED_4 SKIP BAD RECORDS")
    engine.wait_for_state("CSAS_PAUSED_4", "RUNNING", timeout=60)
    engine.wait_caught_up("CSAS_PAUSED_4", timeout=60)
    assert ids(engine, "paused") == [1, 3, 4]

    # a changed expectation is an in-place upgrade: same checkpoint, the new one counts
    checkpoint = engine.query("CSAS_LOGGED_1").checkpoint
    result = engine.execute(
        "CREATE OR REPLACE STREAM logged WITH (expect='amount IS NOT NULL') AS SELECT * FROM payments;"
    )[0]
    assert "in place" in result.message
    engine.wait_for_version("CSAS_LOGGED_1", 2, timeout=60)
    engine.wait_for_state("CSAS_LOGGED_1", "RUNNING", timeout=60)
    produce(engine, "payments", [json.dumps({"id": 5, "amount": None}), json.dumps({"id": 6, "amount": -1})],
            "part-1.json")
    engine.wait_caught_up("CSAS_LOGGED_1", timeout=60)
    assert engine.query("CSAS_LOGGED_1").checkpoint == checkpoint
    assert ids(engine, "logged") == [1, 2, 3, 4, 5, 6]
    assert described(engine, "CSAS_LOGGED_1")["expectation"] == (
        "NOT amount IS NULL (on_violation LOG): 1 violating rows in the last batch, total 2"
    )
