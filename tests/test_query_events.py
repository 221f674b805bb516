"""Query events (views/events.py) and their Airflow faces: the ``streamql`` asset URI
scheme, operators' outlets, and QueryEventTrigger delivering each event once. A real SQLite
catalog whose observed state is written as a runtime writes it (no JVM here; the whole path
with Spark and a real Airflow is tests/test_asset_events.py)."""
from __future__ import annotations

import asyncio
import json

import pytest

from airflow_provider_streamql.catalog import BadRecord
from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import ValidationError
from airflow_provider_streamql.views.events import EventFeed, current_events

PIPELINE = """
CREATE STREAM purchases (id INT KEY, product STRING, cost DOUBLE) WITH (value_format='JSON');
CREATE STREAM valid_purchases WITH (on_error='PAUSE') AS SELECT * FROM purchases WHERE cost > 0;
"""
Q = "CSAS_VALID_PURCHASES_1"


@pytest.fixture
def engine(tmp_path):
    engine = Engine(f"sqlite:///{tmp_path}/catalog.db", home=str(tmp_path), issuer="test")
    engine.execute(PIPELINE)
    yield engine
    engine.close()


def lease(engine) -> int:
    return engine.catalog.leases.acquire(Q, "rt-1", ttl=60)


def hold(engine, batch: int) -> None:
    """What a runtime does at a bad record under policy PAUSE."""
    record = BadRecord(Q, f"r{batch}", batch, "PURCHASES", "/x/part.json", 1, "{oops", "malformed JSON", "PENDING")
    assert engine.catalog.bad_records.hold(Q, [record], "BAD_RECORD: malformed JSON", runtime_id="rt-1",
                                              epoch=lease(engine))


def test_a_hold_is_one_event_until_the_query_is_held_again(engine):
    feed = EventFeed("repair", Q, ["held"])
    assert feed.poll(engine) == []
    hold(engine, 3)
    [event] = feed.poll(engine)
    assert (event.kind, event.query_id, event.details["bad_records"], event.details["batch_id"]) == ("held", Q, 1, 3)
    assert "held at 1 bad record(s) of PURCHASES: malformed JSON" in event.message
    assert feed.poll(engine) == [event]  # not acknowledged: handed on again
    feed.acknowledge(engine, event)
    assert feed.poll(engine) == []
    assert EventFeed("other consumer", Q, ["held"]).poll(engine) == [event]  # cursors are per consumer

    engine.execute(f"RESUME {Q} SKIP BAD RECORDS")
    assert feed.poll(engine) == []
    hold(engine, 5)
    [again] = feed.poll(engine)
    assert again.key != event.key and again.details["batch_id"] == 5


def test_an_error_is_one_event_until_the_query_runs_again(engine):
    feed = EventFeed("alerts", Q, ["error", "held"])
    epoch = lease(engine)
    engine.catalog.observed.set(Q, "ERROR", "boom", runtime_id="rt-1", epoch=epoch)
    [first] = feed.poll(engine)
    assert (first.kind, first.message, first.state) == ("error", "boom", "ERROR")
    feed.acknowledge(engine, first)
    for _retry in range(2):  # the runtime's retries, failing alike: the same event
        engine.catalog.observed.set(Q, "STARTING", runtime_id="rt-1", epoch=epoch)
        engine.catalog.observed.set(Q, "ERROR", "boom", runtime_id="rt-1", epoch=epoch)
        assert feed.poll(engine) == []
    engine.catalog.observed.set(Q, "ERROR", "another failure", runtime_id="rt-1", epoch=epoch)
    [other] = feed.poll(engine)
    feed.acknowledge(engine, other)
    engine.catalog.observed.set(Q, "RUNNING", runtime_id="rt-1", epoch=epoch)
    assert feed.poll(engine) == []  # running again re-arms it
    engine.catalog.observed.set(Q, "ERROR", "boom", runtime_id="rt-1", epoch=epoch)
    [again] = feed.poll(engine)
    assert again.key == first.key


def test_a_new_version_running_is_an_upgraded_event_once(engine):
    feed = EventFeed("audit", Q, ["upgraded"])
    epoch = lease(engine)
    engine.catalog.observed.set(Q, "RUNNING", runtime_id="rt-1", epoch=epoch, running_version=1)
    assert feed.poll(engine) == []  # the first version is not an upgrade
    engine.execute("CREATE OR REPLACE STREAM valid_purchases WITH (on_error='PAUSE') AS "
                   "SELECT * FROM purchases WHERE cost > 1;")
    assert feed.poll(engine) == []  # written, not yet running
    engine.catalog.observed.set(Q, "RUNNING", runtime_id="rt-1", epoch=epoch, running_version=2)
    [event] = feed.poll(engine)
    assert (event.kind, event.key, event.version) == ("upgraded", "v2", 2)
    feed.acknowledge(engine, event)
    assert feed.poll(engine) == []
    # version 3 runs, fails and is rolled back to 2: a rollback is not an upgrade
    engine.execute("CREATE OR REPLACE STREAM valid_purchases WITH (on_error='PAUSE') AS "
                   "SELECT * FROM purchases WHERE cost > 2;")
    engine.catalog.observed.set(Q, "RUNNING", runtime_id="rt-1", epoch=epoch, running_version=3)
    [third] = feed.poll(engine)
    feed.acknowledge(engine, third)
    engine.catalog.roll_back(Q, good=2, failed=3, error="broke")
    engine.catalog.observed.set(Q, "RUNNING", runtime_id="rt-1", epoch=epoch, running_version=2)
    assert (engine.query(Q).version, feed.poll(engine)) == (2, [])


def test_a_query_not_there_yet_has_no_events(engine):
    assert EventFeed("early", "CSAS_LATER_9", ["held", "error"]).poll(engine) == []
    assert current_events(engine, Q).events == {}


@pytest.mark.parametrize("events, fragment", [
    (["held", "exploded"], "unknown query event(s) ['exploded']"),
    ("held", "events must be a non-empty list"),
    ([], "events must be a non-empty list"),
])
def test_unknown_events_are_refused_when_the_dag_is_parsed(events, fragment):
    from airflow_provider_streamql.triggers.events import QueryEventTrigger
    with pytest.raises(ValidationError) as e:
        QueryEventTrigger(query_id=Q, events=events)
    assert fragment in str(e.value)


@pytest.mark.parametrize("query_id, fragment", [
    ("CSAS_X_1; DROP", "is not a plain SQL name"),
    ("../etc", "is not a plain SQL name"),
    (7, "must be a string"),
])
def test_a_hostile_query_id_is_refused_by_the_trigger(query_id, fragment):
    from airflow_provider_streamql.triggers.events import QueryEventTrigger
    with pytest.raises(Exception) as e:
        QueryEventTrigger(query_id=query_id, events=["held"])
    assert fragment in str(e.value)


def test_the_trigger_fires_once_per_event_and_survives_a_restart(engine, monkeypatch):
    from airflow_provider_streamql.triggers.events import QueryEventTrigger
    monkeypatch.setenv("AIRFLOW_CONN_STREAMQL_DEFAULT", json.dumps(
        {"conn_type": "streamql", "extra": {"catalog": str(engine.catalog.url), "home": engine.home}}))
    trigger = QueryEventTrigger(query_id=Q.lower(), events=["held"], poll_interval=0.05)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_streamql.triggers.events.QueryEventTrigger"
    assert kwargs["query_id"] == Q and kwargs["consumer"].startswith(f"airflow-watcher:{Q}:")
    hold(engine, 2)

    async def first_events(n: int, first: float, then: float) -> list:
        """Up to ``n`` events: the first within ``first`` seconds (a loaded machine polls
        late), each next within ``then``."""
        run, found = QueryEventTrigger(**kwargs).run(), []
        try:
            while len(found) < n:
                found.append((await asyncio.wait_for(anext(run), then if found else first)).payload)
        except TimeoutError:
            pass
        finally:
            await run.aclose()
        return found

    [payload] = asyncio.run(first_events(2, 30.0, 1.0))  # one event, then nothing more
    assert (payload["event"], payload["query_id"], payload["state"]) == ("held", Q, "PAUSED")
    assert asyncio.run(first_events(1, 2.0, 2.0)) == []  # a new trigger, as after a restart: delivered already


def test_an_event_airflow_did_not_save_is_handed_out_again(engine, monkeypatch):
    """The triggerer's acknowledged stream: an event is recorded as delivered only once
    Airflow saved its asset event (a clean outcome), else the next poll hands it out again."""
    from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome

    from airflow_provider_streamql.triggers.events import QueryEventTrigger
    monkeypatch.setenv("AIRFLOW_CONN_STREAMQL_DEFAULT", json.dumps(
        {"conn_type": "streamql", "extra": {"catalog": str(engine.catalog.url), "home": engine.home}}))
    trigger = QueryEventTrigger(query_id=Q, events=["held"], poll_interval=0.05)
    assert trigger.shared_stream_key() == ("streamql-query-events", trigger.consumer)
    producer = QueryEventTrigger.create_shared_stream_producer(trigger.serialize()[1])
    hold(engine, 2)

    async def go():
        stream = producer.open_stream()
        _payload, event = await anext(stream)
        await producer.advance([AdvanceItem(event, AdvanceOutcome(acked=0, failed=1))])  # not saved
        _payload, again = await asyncio.wait_for(anext(stream), 2)
        await producer.advance([AdvanceItem(again, AdvanceOutcome(acked=1, failed=0))])
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(stream), 0.5)
        await producer.aclose()
        return event, again

    event, again = asyncio.run(go())
    assert again.key == event.key
    assert engine.catalog.event_cursors.of(trigger.consumer, Q) == {"held": event.key}


def test_a_catalog_it_cannot_reach_is_retried_not_a_crash(caplog):
    from airflow_provider_streamql.triggers.events import QueryEventTrigger
    producer = QueryEventTrigger.create_shared_stream_producer(
        QueryEventTrigger(query_id=Q, events=["held"], streamql_conn_id="no_such_connection", poll_interval=0.05)
        .serialize()[1])

    async def go():
        with pytest.raises(TimeoutError):  # still polling, with a back-off: never raises
            await asyncio.wait_for(anext(producer.open_stream()), 0.5)

    asyncio.run(go())
    assert "no_such_connection" in caplog.text and "retry in" in caplog.text


# -- the streamql asset URI scheme ---------------------------------------------------------

@pytest.mark.parametrize("uri, normalized", [
    ("streamql://streamql_default/valid_purchases", "streamql://streamql_default/VALID_PURCHASES"),
    ("STREAMQL://conn/Orders/", "streamql://conn/ORDERS"),
    ("streamql://conn/a/b", "streamql://<connection id>/<stream or table>"),
    ("streamql:///orders", "streamql://<connection id>/<stream or table>"),
    ("streamql://conn/", "streamql://<connection id>/<stream or table>"),
    ("streamql://conn/1orders", "is not a plain SQL name"),
    ("streamql://conn/orders?x=1", "streamql://<connection id>/<stream or table>"),
])
def test_asset_uris(uri, normalized):
    from airflow.sdk import Asset
    if normalized.startswith("streamql://") and "<" not in normalized:
        assert Asset(uri=uri).uri == normalized
    else:
        with pytest.raises(ValueError) as e:
            Asset(uri=uri)
        assert normalized in str(e.value)


@pytest.mark.parametrize("sql, kwargs, outlets", [
    (PIPELINE, {}, ["streamql://streamql_default/VALID_PURCHASES"]),
    ("INSERT INTO totals SELECT * FROM more; CREATE TABLE t AS SELECT product, COUNT(*) AS n FROM purchases GROUP BY product",
     {"streamql_conn_id": "shop"}, ["streamql://shop/T", "streamql://shop/TOTALS"]),
    ("pipeline.sql", {}, []),  # a file: known when the task renders it
    ("{{ params.new_sql }}", {}, []),
    ("CREATE STREAM broken AS SELEC", {}, []),  # the task reports the parse error
    (PIPELINE, {"outlets": []}, []),  # given outlets win
])
def test_operators_declare_the_streams_they_write_as_outlets(sql, kwargs, outlets):
    from airflow_provider_streamql.operators.queries import CreateQueryOperator
    task = CreateQueryOperator(task_id="create", sql=sql, **kwargs)
    assert sorted(a.uri for a in task.outlets) == outlets


def test_a_shadow_upgrade_declares_no_outlet():
    from airflow_provider_streamql.operators.queries import ReplaceQueryOperator
    sql = "CREATE OR REPLACE STREAM v AS SELECT * FROM p"
    assert [a.uri for a in ReplaceQueryOperator(task_id="r", sql=sql).outlets] == ["streamql://streamql_default/V"]
    assert ReplaceQueryOperator(task_id="s", sql=sql, mode="shadow").outlets == []


def test_an_asset_converts_to_the_dataset_lineage_names(engine, monkeypatch):
    from airflow.sdk import Asset

    from airflow_provider_streamql.assets.streamql import convert_asset_to_openlineage
    monkeypatch.setenv("AIRFLOW_CONN_STREAMQL_DEFAULT", json.dumps(
        {"conn_type": "streamql", "extra": {"catalog": str(engine.catalog.url), "home": engine.home}}))
    found = convert_asset_to_openlineage(Asset(uri="streamql://streamql_default/valid_purchases"), None)
    assert (found.namespace, found.name) == ("file", engine.catalog.source("VALID_PURCHASES").path)
    missing = convert_asset_to_openlineage(Asset(uri="streamql://nowhere/valid_purchases"), None)
    assert (missing.namespace, missing.name) == ("streamql://nowhere", "VALID_PURCHASES")
