"""Windowed aggregations over out-of-order event time; the expected rows are worked out by
hand from the input, with Spark's rules: a window closes when the watermark (the greatest
event time seen, minus the grace period) reaches its end; a record for a closed window is
late and dropped. The cases that test late records and closed windows state GRACE PERIOD 0
SECONDS (the default is ksqlDB's 24 hours)."""
import os

import pytest

from airflow_provider_streamql.conditions import ProgressSince
from airflow_provider_streamql.errors import ValidationError
from airflow_provider_streamql.language import streaming

from .support import changelog, hhmmss, wait_until

CLICKS = "CREATE STREAM clicks (user STRING, n INT, ts TIMESTAMP) WITH (timestamp='ts');"
# Three groups, each processed in its own micro-batch: the watermark moves between them.
GROUPS = [
    [("a", 1, "00:00:10"), ("a", 2, "00:00:50"), ("b", 5, "00:01:10")],
    [("a", 3, "00:00:30"), ("b", 1, "00:01:20")],  # a@00:00:30 is out of order
    [("c", 7, "00:02:30")],
]

# name -> (query, expected table {(user, WINDOWSTART, WINDOWEND): (count, sum)}, late rows)
CASES = {
    "tumbling_final": (
        "WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 0 SECONDS) GROUP BY user EMIT FINAL",
        # a@00:00:30 arrives after the watermark reached 00:01:10: [00:00, 00:01) is closed.
        # c's window is still open at the end, so it is not emitted.
        {("a", "00:00:00", "00:01:00"): (2, 3), ("b", "00:01:00", "00:02:00"): (2, 6)}, 1),
    "tumbling_grace_final": (
        "WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 60 SECONDS) GROUP BY user EMIT FINAL",
        # watermark = max - 60 s: a@00:00:30 is in time; only [00:00, 00:01) has closed
        # (watermark 00:01:30 after the third group).
        {("a", "00:00:00", "00:01:00"): (3, 6)}, 0),
    "tumbling_changes": (
        "WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 0 SECONDS) GROUP BY user EMIT CHANGES",
        {("a", "00:00:00", "00:01:00"): (2, 3), ("b", "00:01:00", "00:02:00"): (2, 6),
         ("c", "00:02:00", "00:03:00"): (1, 7)}, 1),
    "hopping_changes": (
        "WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 30 SECONDS, GRACE PERIOD 0 SECONDS) GROUP BY user "
        "EMIT CHANGES",
        # each record falls in two windows; a@00:00:30's [00:00, 00:01) is closed (late),
        # its [00:00:30, 00:01:30) is still open.
        {("a", "2023-12-31 23:59:30", "00:00:30"): (1, 1), ("a", "00:00:00", "00:01:00"): (2, 3),
         ("a", "00:00:30", "00:01:30"): (2, 5), ("b", "00:00:30", "00:01:30"): (2, 6),
         ("b", "00:01:00", "00:02:00"): (2, 6), ("c", "00:02:00", "00:03:00"): (1, 7),
         ("c", "00:02:30", "00:03:30"): (1, 7)}, 1),
    "hopping_grace_final": (
        "WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 30 SECONDS, GRACE PERIOD 60 SECONDS) "
        "GROUP BY user EMIT FINAL",
        # watermark = max - 60 s: nothing is late; after the third group it is 00:01:30, which
        # closes every window ending by then (b's [00:01, 00:02) and c's stay open).
        {("a", "2023-12-31 23:59:30", "00:00:30"): (1, 1), ("a", "00:00:00", "00:01:00"): (3, 6),
         ("a", "00:00:30", "00:01:30"): (2, 5), ("b", "00:00:30", "00:01:30"): (2, 6)}, 0),
    "session_grace_final": (
        "WINDOW SESSION (30 SECONDS, GRACE PERIOD 60 SECONDS) GROUP BY user EMIT FINAL",
        # a@00:00:30 is in time and bridges a's two sessions into [00:00:10, 00:01:20);
        # at watermark 00:01:30 that session has closed, b's [00:01:10, 00:01:50) has not.
        {("a", "00:00:10", "00:01:20"): (3, 6)}, 0),
    "session_final": (
        "WINDOW SESSION (30 SECONDS, GRACE PERIOD 0 SECONDS) GROUP BY user EMIT FINAL",
        # sessions: a [00:00:10, 00:00:40) and [00:00:50, 00:01:20); b@00:01:20 extends b's
        # session to [00:01:10, 00:01:50); a@00:00:30 is late. c's session is still open.
        {("a", "00:00:10", "00:00:40"): (1, 1), ("a", "00:00:50", "00:01:20"): (1, 2),
         ("b", "00:01:10", "00:01:50"): (2, 6)}, 1),
}


def create_window_queries(engine, names):
    engine.execute(CLICKS + "".join(
        f"CREATE TABLE {name} AS SELECT user, COUNT(*) AS clicks, SUM(n) AS total, WINDOWSTART, "
        f"WINDOWEND FROM clicks {CASES[name][0]};" for name in names))
    return [q["query_id"] for q in engine.queries()]


def feed(engine, query_ids, groups):
    for group in groups:
        engine.execute(";".join(f"INSERT INTO clicks VALUES ('{u}', {n}, '2024-01-01 {t}')"
                                for u, n, t in group))
        for query_id in query_ids:
            engine.wait_caught_up(query_id, timeout=60)


def windows(rows):
    return {(r["user"], hhmmss(r["WINDOWSTART"]), hhmmss(r["WINDOWEND"])): (r["clicks"], r["total"])
            for r in rows}


def final_table(engine, name):
    rows = engine.execute(f"SELECT * FROM {name}")[0]
    return windows([dict(zip(rows.columns, r, strict=True)) for r in rows.rows])


def test_windows_over_out_of_order_input(sqlite_engine, runtimes):
    engine = sqlite_engine
    ids = create_window_queries(engine, list(CASES))
    runtimes.start(engine)
    for query_id in ids:
        engine.wait_for_state(query_id, "RUNNING", timeout=60)
    feed(engine, ids, GROUPS)
    for (name, (_, expected, late)), query_id in zip(CASES.items(), ids, strict=True):
        # a final result may come one (no-data) batch after the watermark moved
        wait_until(lambda: final_table(engine, name) == expected, timeout=30,
                   what=f"{name} to hold {expected}, has {final_table(engine, name)}")
        progress = wait_until(lambda: engine.progress(query_id), what="progress")
        assert progress.late_rows == late, name
        assert progress.state_operators, name


def test_emit_final_emits_each_window_once_and_changes_emit_updates(sqlite_engine, runtimes):
    engine = sqlite_engine
    ids = create_window_queries(engine, ["tumbling_final", "tumbling_changes"])
    runtimes.start(engine)
    feed(engine, ids, GROUPS[:2])
    # after two groups: [00:00, 00:01) has closed, [00:01, 00:02) has not
    wait_until(lambda: len(changelog(engine, "tumbling_final")) == 1, what="the first final window")
    feed(engine, ids, GROUPS[2:])
    wait_until(lambda: len(changelog(engine, "tumbling_final")) == 2, what="the second final window")
    emitted = [windows([r]) for r in changelog(engine, "tumbling_final")]
    assert emitted == [{("a", "00:00:00", "00:01:00"): (2, 3)}, {("b", "00:01:00", "00:02:00"): (2, 6)}]
    updates = [w for r in changelog(engine, "tumbling_changes") for w in windows([r]).items()
               if w[0][0] == "b"]
    assert updates == [(("b", "00:01:00", "00:02:00"), (1, 5)), (("b", "00:01:00", "00:02:00"), (2, 6))]


def test_aggregates_having_and_several_grouping_expressions(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(CLICKS + """
        CREATE TABLE stats AS SELECT user, UPPER(user) AS shout, COUNT(*) AS c, AVG(n) AS mean,
          MIN(n) AS low, MAX(n) AS high FROM clicks GROUP BY user, UPPER(user) HAVING COUNT(*) > 1;
        CREATE TABLE busy AS SELECT user, COUNT(*) AS c, WINDOWSTART FROM clicks
          WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 0 SECONDS) GROUP BY user HAVING SUM(n) >= 3
          EMIT CHANGES;
    """)
    runtimes.start(engine)
    feed(engine, ["CTAS_STATS_1", "CTAS_BUSY_2"], GROUPS)
    rows = engine.execute("SELECT * FROM stats")[0].rows
    # a: 1, 2, 3 (the late a@00:00:30 counts here: no window, no watermark); b: 5, 1; c: once
    assert sorted(rows) == [["a", "A", 3, 2.0, 1, 3], ["b", "B", 2, 3.0, 1, 5]]
    busy = engine.execute("SELECT user, c, WINDOWSTART FROM busy")[0].rows
    # latest row per (user, window): b's window was emitted with 1, then updated to 2
    assert sorted((u, c, hhmmss(w)) for u, c, w in busy) == [
        ("a", 2, "00:00:00"), ("b", 2, "00:01:00"), ("c", 1, "00:02:00")]
    shown = {q["query_id"]: q for q in engine.queries()}
    assert shown["CTAS_BUSY_2"]["state_rows"] > 0 and shown["CTAS_BUSY_2"]["state_bytes"] > 0
    explained = dict(map(tuple, engine.execute("EXPLAIN CTAS_BUSY_2")[0].rows))
    assert "rows" in explained["state[0]"] and explained["output_mode"] == "update"


def test_timestamp_format_reads_text_times(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM events (k STRING, ts TIMESTAMP) WITH (value_format='CSV', timestamp='ts',
          timestamp_format='dd/MM/yyyy HH:mm:ss');
        CREATE TABLE per_minute AS SELECT k, COUNT(*) AS c FROM events
          WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k;
        INSERT INTO events VALUES ('x', '01/01/2024 00:00:05');
        INSERT INTO events VALUES ('x', '01/01/2024 00:00:55');
        INSERT INTO events VALUES ('x', '01/01/2024 00:01:05');
    """)
    runtimes.start(engine)
    engine.wait_caught_up("CTAS_PER_MINUTE_1", timeout=60)
    rows = engine.execute("SELECT k, c, WINDOWSTART FROM per_minute")[0].rows
    assert sorted((k, c, hhmmss(w)) for k, c, w in rows) == [("x", 1, "00:01:00"), ("x", 2, "00:00:00")]


#: ksqlDB's tumbling-window recipe as users paste it: the event time is a VARCHAR column with
#: TIMESTAMP_FORMAT (the column stays text; the window is on the time it holds)
RATINGS = """
CREATE STREAM ratings (title VARCHAR, release_year INT, rating DOUBLE, ts VARCHAR)
  WITH (timestamp='ts', timestamp_format='yyyy-MM-dd HH:mm:ss', partitions=1, value_format='JSON');
"""


def test_a_varchar_event_time_with_timestamp_format_drives_windows(sqlite_engine, runtimes):
    """A record whose text its timestamp_format does not read is a bad record of the query
    (here LOG_AND_CONTINUE: left out and logged), never a NULL window."""
    engine = sqlite_engine
    engine.execute(RATINGS + """
        CREATE TABLE rating_count WITH (on_error='LOG_AND_CONTINUE') AS
          SELECT title, COUNT(*) AS rating_count, WINDOWSTART AS window_start, WINDOWEND AS window_end
          FROM ratings WINDOW TUMBLING (SIZE 6 HOURS) GROUP BY title EMIT CHANGES;
        CREATE STREAM stamped WITH (on_error='LOG_AND_CONTINUE') AS SELECT title, ROWTIME AS rt, ts FROM ratings;
        CREATE STREAM strict WITH (on_error='FAIL') AS SELECT title FROM ratings;
        INSERT INTO ratings VALUES ('Die Hard', 1998, 8.2, '2019-07-09 01:00:00'), ('Die Hard', 1998, 4.5, '2019-07-09 05:00:00'),
          ('Die Hard', 1998, 5.1, '2019-07-09 09:00:00'), ('Tree of Life', 2011, 4.9, '2019-07-09 00:00:00'),
          ('A Walk in the Clouds', 1995, 3.6, '2019-07-09 12:00:00'), ('A Walk in the Clouds', 1995, 6.0, '2019-07-09 15:00:00');
    """)
    with open(os.path.join(engine.catalog.source("RATINGS").path, "producer.json"), "w") as f:
        f.write('{"title": "Tree of Life", "release_year": 2011, "rating": 5.6, "ts": "09/07/2019 08:00"}\n')
    runtimes.start(engine)
    for query_id in ("CTAS_RATING_COUNT_1", "CSAS_STAMPED_2"):
        engine.wait_caught_up(query_id, timeout=90)
    rows = engine.execute("SELECT title, rating_count, window_start, window_end FROM rating_count")[0].rows
    day = "2019-07-09 "
    assert sorted((t, n, hhmmss(s), hhmmss(e)) for t, n, s, e in rows) == [
        ("A Walk in the Clouds", 2, day + "12:00:00", day + "18:00:00"), ("Die Hard", 1, day + "06:00:00", day + "12:00:00"),
        ("Die Hard", 2, day + "00:00:00", day + "06:00:00"), ("Tree of Life", 1, day + "00:00:00", day + "06:00:00")]
    stamped = engine.execute("SELECT title, rt, ts FROM stamped WHERE title = 'Tree of Life'")[0].rows
    assert stamped == [["Tree of Life", 1562630400000, "2019-07-09 00:00:00"]]  # the text is kept as written
    wait_until(lambda: engine.query("CSAS_STRICT_3").error, 60, "policy FAIL stops at the record")
    assert "cannot read a record of RATINGS in" in engine.query("CSAS_STRICT_3").error
    wait_until(lambda: engine.bad_records("CTAS_RATING_COUNT_1"), 60, "the record logged")  # after its batch
    assert [r.raw for r in engine.bad_records("CTAS_RATING_COUNT_1")] == \
        ['{"title": "Tree of Life", "release_year": 2011, "rating": 5.6, "ts": "09/07/2019 08:00"}']


@pytest.mark.parametrize("sql, fragment", [
    ("CREATE STREAM plain (user STRING, n INT); CREATE TABLE t AS SELECT user, COUNT(*) AS c "
     "FROM plain WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user", "WINDOW needs event time"),
    (CLICKS + "CREATE TABLE t AS SELECT user, COUNT(*) AS c FROM clicks WINDOW TUMBLING "
     "(SIZE 0 SECONDS) GROUP BY user", "window SIZE must be positive, got 0 SECONDS"),
    (CLICKS + "CREATE TABLE t AS SELECT user, COUNT(*) AS c FROM clicks WINDOW HOPPING "
     "(SIZE -1 MINUTE, ADVANCE BY 10 SECONDS) GROUP BY user", "window SIZE must be positive"),
    (CLICKS + "CREATE TABLE t AS SELECT user, COUNT(*) AS c FROM clicks GROUP BY user EMIT FINAL",
     "EMIT FINAL needs a windowed aggregation"),
    (CLICKS + "CREATE STREAM s2 AS SELECT user, WINDOWSTART FROM clicks", "WINDOWSTART is defined only"),
    (CLICKS + "CREATE TABLE t AS SELECT user, COUNT(*) AS c FROM clicks WINDOW SESSION (30 SECONDS) "
     "GROUP BY user", "session windows support EMIT FINAL only"),
    (CLICKS + "CREATE STREAM s2 AS SELECT user FROM clicks WINDOW TUMBLING (SIZE 1 MINUTE)",
     "WINDOW needs an aggregation"),
    ("CREATE STREAM s (user STRING, ts STRING) WITH (timestamp='ts')", "must name a TIMESTAMP column"),
    (CLICKS + "CREATE TABLE t AS SELECT UPPER(user) AS u, COUNT(*) AS c FROM clicks GROUP BY user",
     "GROUP BY 'user' must also be in the SELECT list"),
    # ksqlDB's key rules for a table's projection (issue 31)
    (CLICKS + "CREATE TABLE t AS SELECT user, user AS u2, COUNT(*) AS c FROM clicks GROUP BY user",
     "the projection holds the key column 'user' more than once (user and u2)"),
    (CLICKS + "CREATE TABLE t AS SELECT user FROM clicks GROUP BY user", "the projection holds no value columns"),
])
def test_bad_windowed_queries_are_rejected_before_anything_runs(engine, sql, fragment):
    with pytest.raises(Exception) as info:
        engine.execute(sql)
    assert fragment in str(info.value)
    assert engine.queries() == [] and engine.execute("SHOW STREAMS")[0].rows == []


JOINED = """
CREATE STREAM orders (oid INT, user STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE STREAM shipments (oid INT, carrier STRING, ts TIMESTAMP) WITH (timestamp='ts');
CREATE TABLE users (id STRING PRIMARY KEY, name STRING);
"""
COUNTS = "CREATE TABLE t AS SELECT user, COUNT(*) AS n FROM clicks "
TUMBLING = COUNTS + "WINDOW TUMBLING (SIZE 1 MINUTE{}) GROUP BY user"
JOIN = "CREATE STREAM t AS SELECT o.oid AS oid FROM orders o {} JOIN shipments s WITHIN 1 MINUTE{} ON o.oid = s.oid"
WINDOWED_JOIN = ("CREATE TABLE t AS SELECT s.carrier AS carrier, COUNT(*) AS n FROM shipments s LEFT JOIN orders o "
                 "WITHIN (1 MINUTE, 0 SECONDS){} ON s.oid = o.oid WINDOW TUMBLING (SIZE 1 MINUTE{}) "
                 "GROUP BY s.carrier EMIT FINAL")

# the query -> the grace period EXPLAIN (and DESCRIBE of its sink, EXTENDED) shows
GRACE_SHOWN = [
    (TUMBLING.format(", GRACE PERIOD 60 SECONDS"), "60 SECONDS"),
    (TUMBLING.format(", GRACE PERIOD 0 SECONDS"), "0 SECONDS"),
    (TUMBLING.format(", GRACE PERIOD 2 HOURS"), "2 HOURS"),
    (TUMBLING.format(""), "24 HOURS (default)"),
    (COUNTS + "WINDOW SESSION (30 SECONDS) GROUP BY user EMIT FINAL", "24 HOURS (default)"),
    (JOIN.format("", ""), "24 HOURS (default)"),
    (JOIN.format("LEFT", " GRACE PERIOD 1 MINUTE"), "60 SECONDS"),
    (WINDOWED_JOIN.format(" GRACE PERIOD 1 MINUTE", ", GRACE PERIOD 1 MINUTE"), "60 SECONDS"),
    (WINDOWED_JOIN.format(" GRACE PERIOD 1 MINUTE", ""), "SHIPMENTS: 24 HOURS (default), ORDERS: 60 SECONDS"),
    (COUNTS + "GROUP BY user", None),
    ("CREATE STREAM t AS SELECT o.oid AS oid, u.name AS name FROM orders o JOIN users u ON o.user = u.id", None),
]


@pytest.mark.parametrize("sql, shown", GRACE_SHOWN)
def test_explain_and_describe_show_the_grace_period(sqlite_engine, sql, shown):
    engine = sqlite_engine
    [*_, created] = engine.execute(CLICKS + JOINED + sql)
    explained = dict(map(tuple, engine.execute(f"EXPLAIN {created.query_id}")[0].rows))
    assert explained["grace_period"] == shown
    described = engine.execute("DESCRIBE t EXTENDED")[0].message
    line = f"Grace period of {created.query_id}: {shown}"
    assert (line in described) if shown else "Grace period" not in described


def test_a_version_keeps_the_grace_period_it_was_created_with(sqlite_engine, monkeypatch):
    """The plan, watermarks included, is stored with each version: a version created when the
    default was 0 keeps it after the default became 24 hours; a new version gets 24 hours."""
    engine = sqlite_engine
    window = TUMBLING.format("").replace("CREATE TABLE", "CREATE OR REPLACE TABLE")
    with monkeypatch.context() as patched:
        patched.setattr(streaming, "DEFAULT_GRACE_SECONDS", 0.0)
        engine.execute(CLICKS + window)
    assert engine.catalog.query("CTAS_T_1").plan.watermarks == {"CLICKS": ["ts", 0.0]}
    explained = dict(map(tuple, engine.execute("EXPLAIN CTAS_T_1")[0].rows))
    assert explained["grace_period"] == "0 SECONDS (default when created)"
    engine.execute(window + " HAVING COUNT(*) > 0")
    assert engine.catalog.query("CTAS_T_1").version == 2
    assert engine.catalog.query("CTAS_T_1").plan.watermarks == {"CLICKS": ["ts", 24 * 3600.0]}
    explained = dict(map(tuple, engine.execute("EXPLAIN CTAS_T_1")[0].rows))
    assert explained["grace_period"] == "24 HOURS (default)"


@pytest.mark.parametrize("again", [TUMBLING.format(""), TUMBLING.format("").replace("CREATE", "CREATE OR REPLACE"),
                                   "create table T as select USER, count(*) as N from CLICKS "
                                   "window tumbling (size 60 seconds) group by USER"])
def test_redeploying_a_statement_planned_under_the_old_default_changes_nothing(sqlite_engine, monkeypatch, again):
    """A script deployed again (skip unchanged) finds the same statement unchanged, though
    this release plans it with another default grace period: no new version, no error."""
    engine = sqlite_engine
    with monkeypatch.context() as patched:
        patched.setattr(streaming, "DEFAULT_GRACE_SECONDS", 0.0)
        engine.execute(CLICKS + TUMBLING.format(""), skip_unchanged=True)
    [result] = engine.execute(again, skip_unchanged=True)
    assert result.action == "unchanged"
    assert engine.catalog.query("CTAS_T_1").plan.watermarks == {"CLICKS": ["ts", 0.0]}
    [result] = engine.execute(TUMBLING.format(", GRACE PERIOD 0 SECONDS"), skip_unchanged=True)
    assert result.action == "unchanged"  # the same plan
    with pytest.raises(ValidationError, match="a table named T already exists"):  # a real change
        engine.execute(TUMBLING.format(", GRACE PERIOD 1 HOUR"), skip_unchanged=True)


def test_a_record_at_the_epoch_is_late_for_a_join_and_kept_by_a_window(sqlite_engine, runtimes):
    """docs/language.md, "The epoch": Spark's watermark starts at 0 and a stream-stream join
    drops a record not after it, so a record at exactly 1970-01-01T00:00:00 is late for a
    join (counted) and kept by a window, whose lateness is its end's."""
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM s (k STRING, n INT, ts TIMESTAMP) WITH (timestamp='ts');
        CREATE STREAM r (k STRING, m INT, ts TIMESTAMP) WITH (timestamp='ts');
        CREATE TABLE per_minute AS SELECT k, COUNT(*) AS c FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k;
        CREATE STREAM joined AS SELECT s.k AS k, n, m FROM s JOIN r WITHIN 1 MINUTE ON s.k = r.k;
    """)
    ids = [q["query_id"] for q in engine.queries()]
    runtimes.start(engine)
    for values in ["s VALUES ('a', 1, '1970-01-01 00:00:10')", "r VALUES ('a', 1, '1970-01-01 00:00:10')",
                   "s VALUES ('b', 2, '1970-01-01 00:00:00')", "r VALUES ('b', 2, '1970-01-01 00:00:00')"]:
        engine.execute(f"INSERT INTO {values}")
        for query_id in ids:
            engine.wait_caught_up(query_id, timeout=60)
    assert sorted((k, c) for k, c, *_ in engine.execute("SELECT * FROM per_minute")[0].rows) == [("a", 1), ("b", 1)]
    assert engine.execute("SELECT * FROM joined")[0].rows == [["a", 1, 1]]
    # the listener records progress after the commit that catching up waits for
    engine.wait(ProgressSince("CSAS_JOINED_2", rows=4), timeout=60)
    engine.wait(ProgressSince("CTAS_PER_MINUTE_1", rows=2), timeout=60)
    assert engine.progress("CSAS_JOINED_2").late_rows == 2 and engine.progress("CTAS_PER_MINUTE_1").late_rows == 0


def test_rowtime_reads_text_times_with_the_pattern_as_written(sqlite_engine, runtimes):
    """A pattern's quoted literal text may hold pattern letters ('day'): ROWTIME parses the
    text with the pattern exactly as written, as the runtime's event time does, never with
    a translation that turns 'day' into 'dayyyy' (which reads no value: a NULL ROWTIME)."""
    engine = sqlite_engine
    engine.execute("""
        CREATE STREAM said (k STRING, ts VARCHAR) WITH (timestamp='ts', timestamp_format='yyyy-MM-dd ''day'' HH:mm:ss');
        CREATE STREAM said_at AS SELECT k, ROWTIME AS rt FROM said;
        INSERT INTO said VALUES ('a', '2019-07-09 day 01:00:00');
    """)
    runtimes.start(engine)
    engine.wait_caught_up("CSAS_SAID_AT_1", timeout=90)
    assert engine.execute("SELECT k, rt FROM said_at")[0].rows == [["a", 1562634000000]]
