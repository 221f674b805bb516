"""Rate limits on a live query (docs/language.md, "Rate limits"): ``WITH (max_files_per_batch
= n)`` / ``max_records_per_batch`` on CREATE and ``ALTER QUERY <id> SET|UNSET ...``, applied
in place as a new version (the validator's ``RATE_LIMIT_CHANGED``), shown in DESCRIBE, SHOW
QUERIES EXTENDED and the UI's details; each batch reads at most that many files or records."""
import re

import pytest

from airflow_provider_streamql.errors import NotFoundError, ParseError, StateError, ValidationError

from .support import insert, stream_rows, wait_until

PIPELINE = """
CREATE STREAM src (id INT, v INT);
CREATE STREAM out WITH (max_files_per_batch = 1) AS SELECT id, v FROM src;
"""
OUT = "CSAS_OUT_1"


def batches_after(engine, query_id: str, batch: int) -> list[int]:
    """The input rows of each batch with input the query committed after ``batch``."""
    return [h["input_rows"] for h in engine.progress_history(query_id) if h["batch_id"] > batch and h["input_rows"]]


def last_batch(engine, query_id: str) -> int:
    return max((h["batch_id"] for h in engine.progress_history(query_id)), default=-1)


def test_alter_query_changes_the_files_per_batch_in_place_keeping_every_row_once(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    runtime = runtimes.start(engine)
    engine.wait_for_state(OUT, "RUNNING", timeout=60)
    engine.execute(f"PAUSE {OUT}")
    engine.wait_for_state(OUT, "PAUSED", timeout=60)
    first = [(n, n * 10) for n in range(1, 5)]
    insert(engine, "src", first)  # four files, waiting for the query
    engine.execute(f"RESUME {OUT}")
    engine.wait_caught_up(OUT, timeout=90)
    assert batches_after(engine, OUT, -1) == [1, 1, 1, 1]  # one file (one record) per batch

    altered = engine.execute(f"ALTER QUERY {OUT} SET max_files_per_batch = 3")[0]
    assert altered.action == "replaced" and altered.version == 2, altered.message
    assert altered.report["verdict"] == "IN_PLACE" and altered.report["kinds"] == ["scaling"]
    assert [f["code"] for f in altered.report["findings"]] == ["RATE_LIMIT_CHANGED"]
    engine.wait_for_version(OUT, 2, timeout=90)

    # the new limit is the catalog's: a runtime started anew reads it
    runtimes.stop(runtime)
    seen = last_batch(engine, OUT)
    later = [(n, n * 10) for n in range(5, 11)]
    insert(engine, "src", later)  # six files while no runtime runs it
    runtimes.start(engine)
    engine.wait_caught_up(OUT, timeout=90)
    assert batches_after(engine, OUT, seen) == [3, 3]
    assert stream_rows(engine, "out") == sorted(first + later)  # none lost, none twice


def test_a_rate_limit_is_shown_kept_by_a_replacement_and_lifted_by_unset(sqlite_engine):
    from airflow_provider_streamql.plugins.overview import query_details

    engine = sqlite_engine
    engine.execute(PIPELINE)
    assert dict(engine.execute(f"DESCRIBE {OUT}")[0].rows)["rate_limit"] == "max_files_per_batch = 1"
    engine.execute(f"ALTER QUERY {OUT} SET max_files_per_batch = 5")
    replaced = engine.execute("CREATE OR REPLACE STREAM out AS SELECT id, v FROM src WHERE v > 0")[0]
    assert replaced.version == 3 and "RATE_LIMIT_CHANGED" not in str(replaced.report)
    assert dict(engine.execute(f"DESCRIBE {OUT}")[0].rows)["rate_limit"] == "max_files_per_batch = 5"
    assert "max_files_per_batch | 5" in engine.execute("SHOW QUERIES EXTENDED")[0].message
    assert query_details(engine, OUT)["rate_limit"] == "max_files_per_batch = 5"
    assert engine.execute(f"ALTER QUERY {OUT} SET max_files_per_batch = 5")[0].action == "unchanged"
    lifted = engine.execute(f"ALTER QUERY {OUT} UNSET max_files_per_batch")[0]
    assert "max_files_per_batch 5 -> no limit" in lifted.message and lifted.version == 4
    assert dict(engine.execute(f"DESCRIBE {OUT}")[0].rows)["rate_limit"].startswith("(none")
    logged = [c["statement"] for c in engine.catalog.commands.all()]
    assert f"ALTER QUERY {OUT} UNSET max_files_per_batch" in logged


@pytest.mark.parametrize("statement, error, words", [
    (f"ALTER QUERY {OUT} SET max_files_per_batch = 0", ParseError, "would stop the query reading: PAUSE it instead"),
    (f"ALTER QUERY {OUT} SET max_files_per_batch = -2", ParseError, "a whole number from 1 to 2147483647, not -2"),
    (f"ALTER QUERY {OUT} SET max_files_per_batch = 1.5", ParseError, "whole number of files above 0, not 1.5"),
    (f"ALTER QUERY {OUT} SET max_files_per_batch = 'two'", ParseError, "not 'two'"),
    (f"ALTER QUERY {OUT} SET max_files_per_batch = 99999999999", ParseError, "from 1 to 2147483647"),
    (f"ALTER QUERY {OUT} SET max_rows = 2", ParseError, "expected a query setting"),
    (f"ALTER QUERY {OUT} SET max_files_per_batch = DEFAULT", ParseError, f"ALTER QUERY {OUT} UNSET max_files_per_batch"),
    ("ALTER QUERY CSAS_NONE_9 SET max_files_per_batch = 2", NotFoundError, "no query 'CSAS_NONE_9'"),
    (f"ALTER QUERY {OUT} SET max_records_per_batch = 2", ValidationError,
     "limits what a query reads of Kafka topics, and this one streams SRC (file topic): use max_files_per_batch"),
    (f"ALTER QUERY {OUT} SET max_files_per_batch = 2; ALTER QUERY {OUT} SET max_records_per_batch = 2",
     ValidationError, "use max_files_per_batch"),
    (f"TERMINATE {OUT}; ALTER QUERY {OUT} SET max_files_per_batch = 2", StateError, "is terminated"),
    ("CREATE STREAM more WITH (max_files_per_batch = 0) AS SELECT id FROM src", ValidationError,
     "max_files_per_batch = 0 would stop the query reading"),
    ("CREATE STREAM more WITH (max_records_per_batch = 10) AS SELECT id FROM src", ValidationError,
     "use max_files_per_batch"),
])
def test_bad_rate_limits_are_refused_and_change_nothing(sqlite_engine, statement, error, words):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    before = [(r["query_id"], r["version"], r["desired"]) for r in engine.queries()], engine.query(OUT).settings
    with pytest.raises(error, match=re.escape(words)):
        engine.execute(statement)
    assert ([(r["query_id"], r["version"], r["desired"]) for r in engine.queries()], engine.query(OUT).settings) == before


def test_max_records_per_batch_bounds_each_batch_of_a_kafka_query(kafka_spark, kafka_topics, sqlite_engine, runtimes):
    """Spark's maxOffsetsPerTrigger on a one-partition topic: a backlog of 10 records is read
    2 at a time, and after ALTER QUERY ... = 5 a new backlog 5 at a time, every record once."""
    engine = sqlite_engine
    topic = kafka_topics.new("orders", partitions=1)
    kafka_topics.produce(topic, [(str(n), {"id": n}) for n in range(10)])
    engine.execute(f"CREATE STREAM orders (id INT) WITH (kafka_topic='{topic}'); SET 'auto.offset.reset' = 'earliest';"
                   "CREATE STREAM seen WITH (max_records_per_batch = 2) AS SELECT id FROM orders")
    query = "CSAS_SEEN_1"
    refused = f"ALTER QUERY {query} SET max_files_per_batch = 2"
    with pytest.raises(ValidationError, match=re.escape("this one streams ORDERS (Kafka topic): use max_records_per_batch")):
        engine.execute(refused)
    runtimes.start(engine)
    wait_until(lambda: len(stream_rows(engine, "seen")) == 10, 120, "the first 10 records")
    assert batches_after(engine, query, -1) == [2] * 5

    engine.execute(f"ALTER QUERY {query} SET max_records_per_batch = 5")
    engine.wait_for_version(query, 2, timeout=90)
    engine.execute(f"PAUSE {query}")
    engine.wait_for_state(query, "PAUSED", timeout=60)
    seen = last_batch(engine, query)
    kafka_topics.produce(topic, [(str(n), {"id": n}) for n in range(10, 20)])
    engine.execute(f"RESUME {query}")
    wait_until(lambda: len(stream_rows(engine, "seen")) == 20, 120, "all 20 records")
    assert batches_after(engine, query, seen) == [5, 5]
    assert stream_rows(engine, "seen") == [(n,) for n in range(20)]
