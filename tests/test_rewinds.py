"""Start and rewind positions (docs/operations.md, "Starting and rewinding to a time"): a
query created or replaced ``WITH (start = ...)`` reads from there, and ``RESTORE ... TO
TIMESTAMP`` rewinds a paused query to its first input at or after a time, with the output
of the rewound range taken out and kept, so each record is in the output once."""
import os
import time

import pytest

from airflow_provider_streamql.errors import NotFoundError, ParseError, StateError, ValidationError
from airflow_provider_streamql.language.starting import timestamp_text
from airflow_provider_streamql.storage.checkpoints import last_committed_batch
from airflow_provider_streamql.storage.layout import snapshot_output
from airflow_provider_streamql.storage.topics import committed_files

from .support import insert, stream_rows, table, wait_until

FIRST = [(1, 10), (2, 20), (3, 5)]
LATER = [(4, 40), (5, 50), (6, 1)]


def after_all(engine, stream: str) -> str:
    """A time after every file ``stream`` holds now and before any file written later: the
    newest file's commit time + 1 ms, once the clock has passed it."""
    newest = max(os.stat(f).st_mtime_ns // 1_000_000 for f in committed_files(engine.catalog.source(stream).path))
    wait_until(lambda: time.time_ns() // 1_000_000 > newest + 1, 5, "the clock to pass it")
    return timestamp_text(newest + 1)


def act(engine, statement, state, *ids):
    engine.execute(statement)
    for q in ids:
        engine.wait_for_state(q, state, timeout=60)


# (session SETs, the statement's start) -> the settings the query records, or a fragment of the error
STARTS = [
    ("", "earliest", {"auto.offset.reset": "earliest"}),
    ("SET 'starting.timestamp' = '2026-11-26T09:00:00Z';", "earliest", {"auto.offset.reset": "earliest"}),
    ("SET 'auto.offset.reset' = 'earliest';", "2026-11-26 10:00:00+01:00",
     {"auto.offset.reset": "earliest", "starting.timestamp": "2026-11-26T09:00:00.000Z"}),
    ("SET 'auto.offset.reset' = 'latest';", "1795683600000",
     {"auto.offset.reset": "latest", "starting.timestamp": "2026-11-26T09:00:00.000Z"}),
    ("", "yesterday", "property start = 'yesterday': must be 'earliest', 'latest' or a time: not a time"),
    ("", "2026-11-26T09:00:00", "a time without a zone is ambiguous"),
    ("", "latest", "auto.offset.reset = 'latest' is not supported for file topics (SRC)"),
    ("SET 'auto.offset.reset' = 'earliest';", "latest", "auto.offset.reset = 'latest' is not supported"),
]


@pytest.mark.parametrize("session, start, expected", STARTS)
def test_a_statements_start_takes_precedence_over_the_session(sqlite_engine, session, start, expected):
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, v INT)")
    script = f"{session} CREATE STREAM copy WITH (start = '{start}') AS SELECT * FROM src"
    if isinstance(expected, dict):
        engine.execute(script)
        settings = engine.query("CSAS_COPY_1").settings
        assert {k: v for k, v in settings.items() if k in ("auto.offset.reset", "starting.timestamp")} == expected
        assert "start" not in engine.catalog.source("COPY").properties  # the query's, not its output's
        return
    with pytest.raises(ValidationError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        engine.execute(script)
    assert engine.catalog.source("COPY") is None  # nothing written


def test_an_in_place_version_keeps_where_its_checkpoint_started(sqlite_engine):
    """start is where a new checkpoint begins: a version on the same checkpoint keeps the
    query's, and a replacing upgrade must say where it starts."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, v INT);"
                   "CREATE STREAM copy WITH (start = '2026-11-26T09:00:00Z') AS SELECT id, v FROM src")
    engine.execute("CREATE OR REPLACE STREAM copy WITH (start = 'earliest') AS SELECT id, v FROM src WHERE v > 1")
    query = engine.query("CSAS_COPY_1")
    assert query.version == 2 and query.settings["starting.timestamp"] == "2026-11-26T09:00:00.000Z"
    with pytest.raises(ValidationError, match="a replacing upgrade starts a new checkpoint: say where"):
        engine.replace("CREATE OR REPLACE STREAM copy AS SELECT id FROM src")
    assert engine.query("CSAS_COPY_1").desired_state == "RUNNING"  # nothing changed


def test_a_query_started_at_a_time_reads_the_files_committed_from_then(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, v INT)")
    insert(engine, "src", FIRST)
    between = after_all(engine, "SRC")
    insert(engine, "src", LATER)
    engine.execute(f"CREATE STREAM late WITH (start = '{between}') AS SELECT id, v FROM src;"
                   "CREATE STREAM every AS SELECT id, v FROM src")
    runtimes.start(engine)
    for q in ("CSAS_LATE_1", "CSAS_EVERY_2"):
        engine.wait_caught_up(q, timeout=60)
    assert stream_rows(engine, "late") == sorted(LATER)
    assert stream_rows(engine, "every") == sorted(FIRST + LATER)
    insert(engine, "src", [(7, 70)])  # later files are read as they come
    engine.wait_caught_up("CSAS_LATE_1", timeout=60)
    assert stream_rows(engine, "late") == sorted(LATER + [(7, 70)])


def test_a_replacing_upgrade_with_start_earliest_reprocesses_every_record(sqlite_engine, runtimes):
    """An aggregation changed (needs a new checkpoint): Engine.replace takes the statement's
    own start; the old query and its output go (DROP ... DELETE TOPIC, today's replacing
    rule), and the new query's output holds every record once."""
    engine = sqlite_engine
    engine.execute("CREATE STREAM src (id INT, v INT);"
                   "CREATE TABLE totals AS SELECT id % 2 AS k, COUNT(*) AS n FROM src GROUP BY id % 2")
    runtimes.start(engine)
    insert(engine, "src", FIRST)
    engine.wait_caught_up("CTAS_TOTALS_1", timeout=60)
    sql = ("CREATE OR REPLACE TABLE totals WITH (start = 'earliest') AS "
           "SELECT id % 2 AS k, COUNT(*) AS n, SUM(v) AS s FROM src GROUP BY id % 2")
    with pytest.raises(StateError, match="REPLACING_REQUIRED"):
        engine.execute(sql)  # not in place
    results = engine.replace(sql)  # no start_from: the statement says where
    assert results[-1].query_id == "CTAS_TOTALS_2"
    assert engine.query("CTAS_TOTALS_2").settings["auto.offset.reset"] == "earliest"
    insert(engine, "src", LATER)
    engine.wait_caught_up("CTAS_TOTALS_2", timeout=60)
    rows = FIRST + LATER
    assert table(engine, "totals") == {
        k: (sum(1 for i, _ in rows if i % 2 == k), sum(v for i, v in rows if i % 2 == k)) for k in (0, 1)
    }


PIPELINE = """
CREATE STREAM src (id INT, v INT);
CREATE STREAM big AS SELECT id, v FROM src WHERE v >= 10;
CREATE TABLE totals AS SELECT id % 2 AS k, COUNT(*) AS n FROM src GROUP BY id % 2;
"""


def big(rows):
    return sorted((i, v) for i, v in rows if v >= 10)


def test_restore_to_a_time_runs_the_later_input_again_with_each_record_once(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    insert(engine, "src", FIRST)
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    between = after_all(engine, "SRC")
    insert(engine, "src", LATER)
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    act(engine, "PAUSE CSAS_BIG_1", "PAUSED", "CSAS_BIG_1")
    checkpoint = engine.query("CSAS_BIG_1").checkpoint

    message = engine.execute(f"RESTORE CSAS_BIG_1 TO TIMESTAMP '{between}'")[0].message
    assert f"Restored CSAS_BIG_1 to {between} (after batch" in message and "kept with snapshot 1" in message
    # the rewound range's output is out until it runs again, and kept aside
    assert stream_rows(engine, "big") == big(FIRST)
    kept = os.listdir(snapshot_output(checkpoint, "s0001"))
    assert kept and all(n.startswith("CSAS_BIG_1-") for n in kept)
    act(engine, "RESUME CSAS_BIG_1", "RUNNING", "CSAS_BIG_1")
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    assert stream_rows(engine, "big") == big(FIRST + LATER)  # each record once

    # a time before the topic's first record: the whole topic again, still once each
    act(engine, "PAUSE CSAS_BIG_1", "PAUSED", "CSAS_BIG_1")
    message = engine.execute("RESTORE CSAS_BIG_1 TO TIMESTAMP '2001-01-01T00:00:00Z'")[0].message
    assert "is before its first input" in message and "(after batch -1)" in message
    assert stream_rows(engine, "big") == [] and last_committed_batch(checkpoint) == -1
    act(engine, "RESUME CSAS_BIG_1", "RUNNING", "CSAS_BIG_1")
    engine.wait_caught_up("CSAS_BIG_1", timeout=60)
    assert stream_rows(engine, "big") == big(FIRST + LATER)


# the statement ({t}: a time between the two inserts) -> its error and words; each changes nothing
REFUSALS = [
    ("RESTORE CSAS_BIG_1 TO TIMESTAMP '{t}'", StateError, r"is RUNNING \(desired RUNNING\): PAUSE it"),
    ("PAUSE ALL", None, None),
    ("RESTORE CSAS_BIG_1 TO TIMESTAMP '9999-01-01T00:00:00Z'", StateError, "is in the future"),
    ("RESTORE CTAS_TOTALS_2 TO TIMESTAMP '{t}'", StateError,
     r"keeps state .* snapshot 1 \(batch \d+\) is the nearest before it: RESTORE CTAS_TOTALS_2 TO SNAPSHOT 1"),
    ("RESTORE CTAS_TOTALS_2 TO TIMESTAMP '2001-01-01T00:00:00Z'", StateError,
     "no snapshot is that old: take SNAPSHOTs on a schedule"),
    ("RESTORE CSAS_BIG_1 TO TIMESTAMP 'yesterday'", ParseError, "TIMESTAMP 'yesterday' is not a time"),
    ("RESTORE CSAS_BIG_1 TO TIMESTAMP 12", ParseError, "expected a time in quotes"),
    ("RESTORE CSAS_NONE_9 TO TIMESTAMP '{t}'", NotFoundError, "no query 'CSAS_NONE_9'"),
]


def test_refused_rewinds_say_why_and_change_nothing(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtimes.start(engine)
    insert(engine, "src", FIRST)
    for q in ("CSAS_BIG_1", "CTAS_TOTALS_2"):
        engine.wait_caught_up(q, timeout=60)
    engine.execute("SNAPSHOT CTAS_TOTALS_2")
    between = after_all(engine, "SRC")
    insert(engine, "src", LATER)
    for q in ("CSAS_BIG_1", "CTAS_TOTALS_2"):
        engine.wait_caught_up(q, timeout=60)

    def now():
        return ([last_committed_batch(engine.query(q).checkpoint) for q in ("CSAS_BIG_1", "CTAS_TOTALS_2")],
                stream_rows(engine, "big"), table(engine, "totals"), engine.execute("SHOW SNAPSHOTS")[0].rows)

    for statement, error, words in REFUSALS:
        if error is None:
            act(engine, statement, "PAUSED", "CSAS_BIG_1", "CTAS_TOTALS_2")
            continue
        before = now()
        with pytest.raises(error, match=words):
            engine.execute(statement.format(t=between))
        assert now() == before, statement

    # a time after every input read (and not in the future): accepted, nothing to rewind
    after = after_all(engine, "SRC")
    before = now()
    message = engine.execute(f"RESTORE CSAS_BIG_1 TO TIMESTAMP '{after}'")[0].message
    assert message.startswith("Nothing to rewind: every batch CSAS_BIG_1 committed read input from before")
    assert now() == before


OLD_MS, NEW_MS = 1_000_000_000_000, 1_700_000_000_000  # records of 2001 and of 2023


def test_restore_to_a_time_on_kafka_uses_the_offsets_for_the_time(kafka_spark, kafka_topics, sqlite_url, home,
                                                                   runtimes):
    """A query over a two-partition topic: the rewind looks up Kafka's offsets for the time
    (records of 2023 only), runs those batches again, and the file output holds each once."""
    from airflow_provider_streamql.engine import Engine

    engine = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_topics.broker.bootstrap)
    try:
        topic = kafka_topics.new("orders", partitions=2)
        engine.execute(f"CREATE STREAM orders (id INT KEY, qty INT) WITH (kafka_topic='{topic}');"
                       "CREATE STREAM copy WITH (start = 'earliest') AS SELECT id, qty FROM orders")
        old = [(str(i), {"qty": i}) for i in range(4)]
        new = [(str(i), {"qty": i}) for i in range(10, 13)]
        kafka_topics.produce(topic, old, timestamp=OLD_MS)
        runtimes.start(engine)
        wait_until(lambda: len(stream_rows(engine, "copy")) == 4, 120, "the records of 2001")
        kafka_topics.produce(topic, new, timestamp=NEW_MS)
        wait_until(lambda: len(stream_rows(engine, "copy")) == 7, 120, "the records of 2023")
        everything = stream_rows(engine, "copy")
        act(engine, "PAUSE CSAS_COPY_1", "PAUSED", "CSAS_COPY_1")
        checkpoint = engine.query("CSAS_COPY_1").checkpoint
        last = last_committed_batch(checkpoint)

        message = engine.execute("RESTORE CSAS_COPY_1 TO TIMESTAMP '2020-01-01T00:00:00Z'")[0].message
        assert "Restored CSAS_COPY_1 to 2020-01-01T00:00:00.000Z (after batch" in message, message
        assert stream_rows(engine, "copy") == sorted((i, i) for i in range(4))  # 2023's output taken out
        act(engine, "RESUME CSAS_COPY_1", "RUNNING", "CSAS_COPY_1")
        wait_until(lambda: last_committed_batch(checkpoint) >= last, 120, "the rewound batches again")
        assert stream_rows(engine, "copy") == everything  # each once
    finally:
        engine.close()
