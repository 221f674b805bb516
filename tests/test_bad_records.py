"""Poison pills on real runtimes: a query holds at a record it cannot read (PAUSE), fails on
it (FAIL) or sends it to its dead-letter stream (LOG_AND_CONTINUE); the operator fixes the
definition or skips the record, and nothing is lost or processed twice."""
from __future__ import annotations

import json
import os
import signal

import pytest

from airflow_provider_streamql.errors import StateError, ValidationError
from airflow_provider_streamql.runtime.badrecords import BAD_COUNT
from airflow_provider_streamql.runtime.file_dead_letters import bad_count
from airflow_provider_streamql.storage.checkpoints import last_committed_batch

from .support import reconcile_passes, spark_streams, stream_rows, wait_until

PAYMENTS = "CREATE STREAM payments (id INT KEY, user STRING, amount INT);"


def produce(engine, stream: str, lines: list[str], name: str) -> str:
    """Write one file of raw lines into a stream's topic, as a producer would: to a hidden
    name, then renamed into place. Returns its path."""
    path = engine.catalog.source(stream.upper()).path
    os.makedirs(path, exist_ok=True)
    final = os.path.join(path, name)
    with open(os.path.join(path, f".{name}.tmp"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(os.path.join(path, f".{name}.tmp"), final)
    return os.path.realpath(final)


def good(i: int, amount: int = 10) -> str:
    return json.dumps({"id": i, "user": f"u{i % 7}", "amount": amount})


def ids(engine, stream: str) -> list[int]:
    return sorted(row[0] for row in stream_rows(engine, stream))


def start(engine, runtimes, query_id: str, **kw):
    runtime = runtimes.start(engine, **kw)
    engine.wait_for_state(query_id, "RUNNING", timeout=120)
    return runtime


MALFORMED = '{"id": 1451, "user": "u3", "amount": 10'


def test_pause_at_a_malformed_record_then_skip_it(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='PAUSE') AS SELECT * FROM payments;")
    start(engine, runtimes, "CSAS_COPY_1")
    # 1000 records in ten files of 100; the fifth file's 51st line is malformed
    goods = [good(i) for i in range(1, 1000)]
    files = [goods[n * 100:(n + 1) * 100] for n in range(4)] + [goods[400:450] + [MALFORMED] + goods[450:499]]
    files += [goods[499 + n * 100:599 + n * 100] for n in range(5)]
    assert sum(map(len, files)) == 1000
    for n in range(4):  # four batches commit
        produce(engine, "payments", files[n], f"part-{n}.json")
        engine.wait_caught_up("CSAS_COPY_1", timeout=60)
    bad_file = produce(engine, "payments", files[4], "part-4.json")
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=90)

    # the batch holding the bad record committed nothing; the earlier batches are all there
    assert ids(engine, "copy") == list(range(1, 401))
    query = engine.query("CSAS_COPY_1")
    assert (query.desired_state, query.error.split(":")[0]) == ("PAUSED", "BAD_RECORD")
    (record,) = engine.bad_records("CSAS_COPY_1")
    assert (record.status, record.file, record.line, record.raw) == ("PENDING", bad_file, 51, MALFORMED)
    assert record.source == "PAYMENTS" and record.error.startswith("malformed JSON")
    described = dict(map(tuple, engine.execute("DESCRIBE CSAS_COPY_1 EXTENDED")[0].rows))
    assert f"PENDING (batch {record.batch_id}) at {bad_file}:51" in described["bad record"]
    assert engine.catalog.commands.all()[-1]["issuer"].endswith("(BAD_RECORD)")

    with pytest.raises(StateError, match="no bad records are holding CSAS_OTHER_2"):
        engine.execute("CREATE STREAM other AS SELECT * FROM payments; RESUME CSAS_OTHER_2 SKIP BAD RECORDS")
    result = engine.execute("RESUME CSAS_COPY_1 SKIP BAD RECORDS", issuer="user:ops")[0]
    assert "1 bad record(s) skipped (sent to CSAS_COPY_1_DLQ)" in result.message
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=60)
    for n in range(5, 10):
        produce(engine, "payments", files[n], f"part-{n}.json")
    engine.wait_caught_up("CSAS_COPY_1", timeout=90)
    # every good record exactly once, the 49 after the bad one in its batch included
    assert ids(engine, "copy") == list(range(1, 1000))
    assert len(stream_rows(engine, "copy")) == 999
    (dead,) = engine.execute("SELECT raw, file, line, status, handled_by FROM CSAS_COPY_1_DLQ")[0].rows
    assert dead == [MALFORMED, bad_file, 51, "SKIPPED", "user:ops"]
    assert [(r.status, r.handled_by) for r in engine.bad_records("CSAS_COPY_1")] == [("SKIPPED", "user:ops")]

    # skipping is per record: a second bad record holds the query again
    produce(engine, "payments", [good(2000), '{"id": 2001, "amount": "a lot"}'], "part-10.json")
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=90)
    statuses = [(r.status, r.line) for r in engine.bad_records("CSAS_COPY_1")]
    assert statuses == [("SKIPPED", 51), ("PENDING", 2)]
    assert "does not fit column 'amount' of type INT" in engine.bad_records("CSAS_COPY_1", "PENDING")[0].error
    assert 2000 not in ids(engine, "copy")  # its batch waits with the bad record


def test_fix_the_source_and_resume(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM big WITH (on_error='PAUSE') AS "
                              "SELECT id, user FROM payments WHERE amount >= 10;")
    start(engine, runtimes, "CSAS_BIG_1")
    produce(engine, "payments", [good(1, 20)], "a.json")
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    produce(engine, "payments", [json.dumps({"id": 2, "user": "b", "amount": 12.5}), good(3, 30)], "b.json")
    engine.wait_for_state("CSAS_BIG_1", "PAUSED", timeout=90)
    (record,) = engine.bad_records("CSAS_BIG_1")
    assert record.line == 1 and record.error == "value 12.5 does not fit column 'amount' of type INT"

    with pytest.raises(ValidationError, match="may only append columns .* and widen"):
        engine.execute("CREATE OR REPLACE STREAM payments (id INT KEY, user STRING, amount STRING)")
    fixed = engine.execute("CREATE OR REPLACE STREAM payments (id INT KEY, user STRING, amount DOUBLE)")[0]
    assert "amount widened to DOUBLE; new versions of CSAS_BIG_1 (v2)" in fixed.message
    query = engine.query("CSAS_BIG_1")
    assert (query.version, query.desired_state) == (2, "PAUSED")  # replacing does not resume it
    report = json.loads(engine.catalog.versions("CSAS_BIG_1")[1]["report"])
    assert [f["code"] for f in report["findings"]] == ["UNCHANGED", "SOURCE_COLUMN_WIDENED"]

    engine.execute("RESUME CSAS_BIG_1")  # the batch is retried with the new definition
    engine.wait_for_state("CSAS_BIG_1", "RUNNING", timeout=60)
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    assert stream_rows(engine, "big") == [(1, "u1"), (2, "b"), (3, "u3")]
    wait_until(lambda: engine.bad_records("CSAS_BIG_1")[0].status == "RESOLVED", 30, "the record resolved")
    assert [(v["version"], v["outcome"]) for v in engine.catalog.versions("CSAS_BIG_1")] == [
        (1, "REPLACED"), (2, "ACTIVE")]


def test_log_and_continue_sends_bad_records_to_the_dead_letter_stream(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='LOG_AND_CONTINUE') AS SELECT * FROM payments;")
    start(engine, runtimes, "CSAS_COPY_1")
    # one Spark query reads the files: the dead letters are found after their batch, not by
    # a companion query reading everything again
    assert [q.name for q in spark_streams(runtimes.spark, "CSAS_COPY_1")] == ["CSAS_COPY_1"]
    path = produce(engine, "payments", [good(1), "not json at all", good(2),
                                        json.dumps({"user": "nobody", "amount": 5}),
                                        json.dumps({"id": 3, "user": "x", "amount": "12.5"}), good(4)], "a.json")
    engine.wait_caught_up("CSAS_COPY_1", timeout=60)
    # a stream record without its KEY is a valid record, as in ksqlDB (only a table needs its key)
    rows = [tuple(r) for r in engine.execute("SELECT * FROM copy")[0].rows]
    assert sorted(rows, key=lambda r: (r[0] is not None, r[0] or 0)) == [
        (None, "nobody", 5), (1, "u1", 10), (2, "u2", 10), (4, "u4", 10)]
    assert engine.state("CSAS_COPY_1") == "RUNNING"
    wait_until(lambda: len(engine.bad_records("CSAS_COPY_1")) == 2, 60, "two logged bad records")
    logged = {r.line: (r.status, r.error) for r in engine.bad_records("CSAS_COPY_1")}
    assert logged == {2: ("LOGGED", "malformed JSON: Expecting value (column 1)"),
                      5: ("LOGGED", "value '12.5' does not fit column 'amount' of type INT")}
    dead = engine.execute("SELECT line, file, raw FROM CSAS_COPY_1_DLQ")[0].rows
    assert sorted(dead) == [[2, path, "not json at all"],
                            [5, path, '{"id": 3, "user": "x", "amount": "12.5"}']]
    shown = engine.execute("SHOW QUERIES EXTENDED")[0]
    assert shown.rows[0][shown.columns.index("bad_records")] == 2
    # resumed, it goes on from the last batch whose dead letters were sent: the next bad
    # record is logged, none of the first two again
    engine.execute("PAUSE CSAS_COPY_1")
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=60)
    engine.execute("RESUME CSAS_COPY_1")
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=60)
    later = produce(engine, "payments", [good(5), "still not json"], "b.json")
    wait_until(lambda: len(engine.bad_records("CSAS_COPY_1")) == 3, 60, "the third logged bad record")
    dead = engine.execute("SELECT line, file, raw FROM CSAS_COPY_1_DLQ")[0].rows
    assert sorted(dead) == sorted([[2, path, "not json at all"], [2, later, "still not json"],
                                   [5, path, '{"id": 3, "user": "x", "amount": "12.5"}']])


@pytest.mark.parametrize("commit_lost", [False, True])
def test_dead_letters_of_a_batch_committed_just_before_a_crash_are_sent_at_the_restart(sqlite_engine, processes,
                                                                                        runtimes, commit_lost):
    """LOG_AND_CONTINUE sends a batch's dead letters after it commits: a runtime killed in
    between (here: one that runs no pass after its first, interval 600 s) leaves them unsent,
    and the runtime that takes the query over sends them, once. Also when the crash came
    before Spark wrote the batch's commit (``commit_lost``): the batch runs again, its sink
    skips the output already written, and it counts no bad record."""
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='LOG_AND_CONTINUE') AS SELECT * FROM payments;")
    killed = processes("default", "--interval", "600", lease_ttl=3)
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=120)
    path = produce(engine, "payments", [good(1), "not json at all", good(2)], "a.json")
    checkpoint = engine.query("CSAS_COPY_1").checkpoint
    wait_until(lambda: last_committed_batch(checkpoint) >= 0, 60, "the batch with the bad record committed")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    assert engine.bad_records("CSAS_COPY_1") == []  # committed, its dead letters not sent
    if commit_lost:
        os.remove(os.path.join(checkpoint, "commits", str(last_committed_batch(checkpoint))))
    runtimes.start(engine)  # takes the query once the killed runtime's lease expired
    wait_until(lambda: len(engine.bad_records("CSAS_COPY_1")) == 1, 90, "the bad record logged after the restart")
    later = produce(engine, "payments", [good(3), "still not json"], "b.json")
    wait_until(lambda: len(engine.bad_records("CSAS_COPY_1")) == 2, 60, "the next bad record logged")
    reconcile_passes(engine, runtimes.started[-1][0].id, passes=3)  # nothing sent twice since
    dead = engine.execute("SELECT line, file, raw FROM CSAS_COPY_1_DLQ")[0].rows
    assert sorted(dead) == [[2, path, "not json at all"], [2, later, "still not json"]]
    assert ids(engine, "copy") == [1, 2, 3]


def test_a_query_switched_from_log_and_continue_in_place_still_sends_its_last_batches(sqlite_engine, runtimes):
    """CREATE OR REPLACE ... WITH (on_error='FAIL') of a LOG_AND_CONTINUE query swaps it in
    place; the bad record of a batch committed since the runtime's last pass (interval 600 s:
    only a statement wakes it) is sent all the same, and the query no longer records what it sent."""
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='LOG_AND_CONTINUE') AS SELECT * FROM payments;")
    start(engine, runtimes, "CSAS_COPY_1", interval=600)
    checkpoint = engine.query("CSAS_COPY_1").checkpoint
    path = produce(engine, "payments", [good(1), "not json at all", good(2)], "a.json")
    wait_until(lambda: last_committed_batch(checkpoint) >= 0, 60, "the batch with the bad record committed")
    assert engine.bad_records("CSAS_COPY_1") == []  # no pass since
    sent = os.path.join(checkpoint, "dead_letters_sent")
    assert os.path.exists(sent)  # what LOG_AND_CONTINUE sent is recorded
    engine.execute("CREATE OR REPLACE STREAM copy WITH (on_error='FAIL') AS SELECT * FROM payments")
    wait_until(lambda: engine.bad_records("CSAS_COPY_1"), 60, "the bad record logged at the swap's pass")
    dead = engine.execute("SELECT line, file, raw, status FROM CSAS_COPY_1_DLQ")[0].rows
    assert dead == [[2, path, "not json at all", "LOGGED"]]
    wait_until(lambda: not os.path.exists(sent), 30, "the record removed: under FAIL none is sent")


#: a batch's observed metrics as its progress JSON holds them -> the bad records counted
BAD_COUNTS = [
    (None, None),  # no observed metrics: not counted, so not known
    ({}, None),
    ({"other": {"n": 4}}, None),  # another metric only
    ({f"{BAD_COUNT}PAYMENTS": {"records": 0}}, 0),
    ({f"{BAD_COUNT}PAYMENTS": {"records": 2}}, 2),
    ({f"{BAD_COUNT}PAYMENTS": [3]}, 3),  # as pyspark's Row turns it into JSON
    ({f"{BAD_COUNT}A": {"records": 1}, f"{BAD_COUNT}B": {"records": 2}, "other": {"n": 9}}, 3),  # two sources
]


@pytest.mark.parametrize("metrics, count", BAD_COUNTS)
def test_the_bad_records_a_batch_left_out_are_read_from_its_progress(metrics, count):
    assert bad_count(metrics) == count


def test_only_a_table_record_needs_its_key(spark, tmp_path):
    """A stream record with a null or missing KEY is valid; a table record without its
    PRIMARY KEY is a bad record (a table's row is its key's latest value)."""
    from airflow_provider_streamql.catalog import SourceInfo
    from airflow_provider_streamql.language.statements import Column
    from airflow_provider_streamql.runtime.badrecords import scan_files

    data = tmp_path / "a.json"
    data.write_text('{"id": 1, "v": "a"}\n{"v": "no key"}\n{"id": null, "v": "null key"}\n')
    columns = [Column.of("id", "INT", key=True), Column.of("v", "STRING")]
    found = {}
    for kind in ("STREAM", "TABLE"):
        src = SourceInfo("S", kind, columns, {}, "JSON", str(tmp_path))
        found[kind] = [(r.line, r.error) for r in
                       scan_files(spark, src, [str(data)], query_id="Q", batch_id=0, status="PENDING")]
    assert found["STREAM"] == []
    assert sorted(found["TABLE"]) == [(2, "missing required column 'id' (the table's PRIMARY KEY)"),
                                      (3, "missing required column 'id' (the table's PRIMARY KEY)")]


def test_fail_puts_the_query_in_error_naming_the_record(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='FAIL') AS SELECT * FROM payments;")
    start(engine, runtimes, "CSAS_COPY_1")
    produce(engine, "payments", [good(1), '{"id": 2, "user": "b", "amount": "three"}'], "a.json")
    engine.wait_for_state("CSAS_COPY_1", "ERROR", timeout=90)
    assert "STREAMQL_BAD_RECORD CSAS_COPY_1 cannot read a record of PAYMENTS" in engine.query("CSAS_COPY_1").error
    wait_until(lambda: engine.bad_records("CSAS_COPY_1", "FAILED"), 30, "the failed record")
    assert engine.bad_records("CSAS_COPY_1")[0].line == 2
    assert ids(engine, "copy") == []  # the batch committed nothing


#: two queries reading one topic, with the error policy each is given ({policy}: a WITH clause)
SIBLINGS = PAYMENTS + ("CREATE STREAM a{policy} AS SELECT * FROM payments;"
                       "CREATE STREAM b{policy} AS SELECT id, user FROM payments WHERE amount > 0;")
SIBLING_IDS = {"CSAS_A_1": "a", "CSAS_B_2": "b"}


def test_by_default_every_query_reading_a_bad_record_goes_on(sqlite_engine, runtimes):
    """As in ksqlDB (ksql.fail.on.deserialization.error=false): a bad record goes to each
    reading query's dead-letter stream, and each query goes on."""
    engine = sqlite_engine
    engine.execute(SIBLINGS.format(policy=""))
    runtimes.start(engine)  # the runtime's default policy too
    for query_id in SIBLING_IDS:
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    path = produce(engine, "payments", [good(1), MALFORMED, good(2)], "a.json")
    produce(engine, "payments", [good(3)], "b.json")
    for query_id, output in SIBLING_IDS.items():
        engine.wait_caught_up(query_id, timeout=90)
        assert ids(engine, output) == [1, 2, 3]
        wait_until(lambda: engine.bad_records(query_id), 60, f"the record logged for {query_id}")
        assert engine.state(query_id) == "RUNNING"
        dead = engine.execute(f"SELECT raw, file, line, status FROM {query_id}_DLQ")[0].rows
        assert dead == [[MALFORMED, path, 2, "LOGGED"]]


def test_under_fail_each_query_stopped_by_a_bad_record_skips_it(sqlite_engine, runtimes):
    """FAIL stops every query reading the record, each retried in vain; RESUME ... SKIP BAD
    RECORDS moves each past it (to its dead-letter stream) and each output has exactly the
    good rows. A query no bad record holds is refused a skip, with the reason."""
    engine = sqlite_engine
    engine.execute(SIBLINGS.format(policy=" WITH (on_error='FAIL')"))
    start(engine, runtimes, "CSAS_B_2")
    produce(engine, "payments", [good(1)], "a.json")
    for query_id in SIBLING_IDS:
        engine.wait_caught_up(query_id, timeout=90)
    bad_file = produce(engine, "payments", [good(2), MALFORMED, good(3)], "b.json")
    for query_id in SIBLING_IDS:
        engine.wait_for_state(query_id, "ERROR", timeout=90)
        wait_until(lambda: engine.bad_records(query_id, "FAILED"), 30, f"the record {query_id} failed on")
    assert [ids(engine, output) for output in SIBLING_IDS.values()] == [[1], [1]]  # the batch committed nothing

    for query_id, output in SIBLING_IDS.items():
        result = engine.execute(f"RESUME {query_id} SKIP BAD RECORDS", issuer="user:ops")[0]
        assert f"1 bad record(s) skipped (sent to {query_id}_DLQ)" in result.message
        engine.wait_caught_up(query_id, timeout=90)
        assert engine.state(query_id) == "RUNNING"
        assert ids(engine, output) == [1, 2, 3]
        dead = engine.execute(f"SELECT raw, file, line, status, handled_by FROM {query_id}_DLQ")[0].rows
        assert dead == [[MALFORMED, bad_file, 2, "SKIPPED", "user:ops"]]
        with pytest.raises(StateError, match=f"no bad records are holding {query_id} .*under on_error='FAIL'"):
            engine.execute(f"RESUME {query_id} SKIP BAD RECORDS")
    produce(engine, "payments", [good(4)], "c.json")
    for query_id, output in SIBLING_IDS.items():
        engine.wait_caught_up(query_id, timeout=90)
        assert ids(engine, output) == [1, 2, 3, 4]


def test_a_policy_change_moves_a_failing_query_on_in_place(sqlite_engine, runtimes):
    """CREATE OR REPLACE ... WITH (on_error='LOG_AND_CONTINUE') of a query in ERROR on a bad
    record: a named upgrade, swapped in place (offsets kept: nothing read twice), the record
    logged to the dead-letter stream."""
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM copy WITH (on_error='FAIL') AS SELECT * FROM payments;")
    start(engine, runtimes, "CSAS_COPY_1")
    produce(engine, "payments", [good(1)], "a.json")
    engine.wait_caught_up("CSAS_COPY_1", timeout=90)
    path = produce(engine, "payments", [good(2), MALFORMED, good(3)], "b.json")
    engine.wait_for_state("CSAS_COPY_1", "ERROR", timeout=90)
    result = engine.execute("CREATE OR REPLACE STREAM copy WITH (on_error='LOG_AND_CONTINUE') AS "
                            "SELECT * FROM payments")[0]
    assert result.message == ("Replaced CSAS_COPY_1 in place: version 2 (transparent); "
                              "error policy FAIL -> LOG_AND_CONTINUE")
    assert [f["code"] for f in result.report["findings"]] == ["ERROR_POLICY_CHANGED"]
    engine.wait_for_version("CSAS_COPY_1", 2, timeout=90)
    engine.wait_caught_up("CSAS_COPY_1", timeout=90)
    assert len(stream_rows(engine, "copy")) == 3 and ids(engine, "copy") == [1, 2, 3]
    wait_until(lambda: engine.bad_records("CSAS_COPY_1", "LOGGED"), 60, "the record logged")
    dead = engine.execute("SELECT raw, file, line, status FROM CSAS_COPY_1_DLQ")[0].rows
    assert dead == [[MALFORMED, path, 2, "LOGGED"]]


def test_a_paused_query_stays_held_across_a_runtime_restart(sqlite_engine, runtimes):
    """Also: the pipeline's default policy (the runtime's) applies to queries that set none,
    and a CSV record's line counts the header."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM readings (id INT KEY, value DOUBLE) WITH (value_format='CSV');"
                   "CREATE STREAM copy AS SELECT * FROM readings;")
    first = start(engine, runtimes, "CSAS_COPY_1", on_error="PAUSE")
    path = produce(engine, "readings", ["id,value", "1,1.5", "2,two", "3,3.5"], "a.csv")
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=90)
    (record,) = engine.bad_records("CSAS_COPY_1")
    assert (record.file, record.line, record.raw) == (path, 3, "2,two")
    assert record.error == "value 'two' does not fit column 'value' of type DOUBLE"

    runtimes.stop(first)
    start_again = runtimes.start(engine, on_error="PAUSE")
    wait_until(lambda: engine.runtimes("default") and
               engine.runtimes("default")[-1]["id"] == start_again.id, 30, "the new runtime")
    reconcile_passes(engine, start_again.id, 3)  # the new runtime had every chance to start it
    assert engine.state("CSAS_COPY_1") == "PAUSED"
    assert [r.status for r in engine.bad_records("CSAS_COPY_1")] == ["PENDING"]
    assert stream_rows(engine, "copy") == []
    engine.execute("RESUME CSAS_COPY_1 SKIP BAD RECORDS")
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=60)
    engine.wait_caught_up("CSAS_COPY_1", timeout=60)
    assert stream_rows(engine, "copy") == [(1, 1.5), (3, 3.5)]


@pytest.mark.parametrize("record", [
    '{"amount": -5, "id": "seven", "user": "x"}',  # the field the filter rejects comes first
    '{"amount": -5, "id": 7, "user": "x"',  # the record breaks off after it
])
def test_a_bad_record_the_query_filters_out_still_holds_it(sqlite_engine, runtimes, record):
    """Spark's JSON parser, given the query's filter, would drop such a record at its first
    field and never see the rest: a checked read keeps filters out of the parser."""
    engine = sqlite_engine
    engine.execute(PAYMENTS + "CREATE STREAM big WITH (on_error='PAUSE') AS SELECT * FROM payments WHERE amount > 0;")
    start(engine, runtimes, "CSAS_BIG_1")
    bad_file = produce(engine, "payments", [good(1), record, good(2)], "a.json")
    engine.wait_for_state("CSAS_BIG_1", "PAUSED", timeout=90)
    (held,) = engine.bad_records("CSAS_BIG_1")
    assert (held.file, held.line, held.raw) == (bad_file, 2, record)
    assert ids(engine, "big") == []  # the batch committed nothing


def test_a_short_csv_record_holds_a_query_that_reads_fewer_columns(sqlite_engine, runtimes):
    """Spark's CSV parser, pruned to the columns a query reads, would not count the record's
    fields: a checked read tokenizes whole records. (A column the query does not read is not
    converted, so a wrong value there does not hold it, as for JSON.)"""
    record = "2,b"
    engine = sqlite_engine
    engine.execute("CREATE STREAM readings (id INT KEY, note STRING, value DOUBLE) WITH (value_format='CSV');"
                   "CREATE STREAM ids WITH (on_error='PAUSE') AS SELECT id FROM readings;")
    start(engine, runtimes, "CSAS_IDS_1")
    path = produce(engine, "readings", ["id,note,value", "1,a,1.5", record, "3,c,3.5"], "a.csv")
    engine.wait_for_state("CSAS_IDS_1", "PAUSED", timeout=90)
    (held,) = engine.bad_records("CSAS_IDS_1")
    assert (held.file, held.line, held.raw) == (path, 3, record)
    assert stream_rows(engine, "ids") == []
