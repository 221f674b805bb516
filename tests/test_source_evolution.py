"""Issue 18, part 1: a query gains or loses a stream in place (Spark's source evolution).

Every query names its streams from its first version (``StreamingPlan.source_names``), so a
later version may read another set: a stream added through a UNION ALL branch is read from
its first file while the others carry on from their positions, and the aggregation's state
carries on; a stream dropped is no longer read. Queries created before streams were named
(their plan has no names) keep REPLACING_REQUIRED, with a finding that says why.
"""

import os
import re

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StateError, ValidationError
from airflow_provider_streamql.storage.checkpoints import committed_source_offsets

from .support import insert, stream_rows, table, wait_until

SOURCES = """
CREATE STREAM web (user STRING, amount INT) WITH (value_format='JSON');
CREATE STREAM shop (user STRING, amount INT) WITH (value_format='JSON');
"""
ONE = "CREATE TABLE spend AS SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM web GROUP BY user"
BOTH = (
    "CREATE OR REPLACE TABLE spend AS SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM "
    "(SELECT user, amount FROM web UNION ALL SELECT user, amount FROM shop) GROUP BY user"
)
SHOP = (
    "CREATE OR REPLACE TABLE spend AS SELECT user, COUNT(*) AS n, SUM(amount) AS total FROM "
    "(SELECT user, amount FROM shop) GROUP BY user"
)
QUERY = "CTAS_SPEND_1"


def upgrade(engine, sql):
    results = engine.execute(sql)
    engine.wait_for_results(results, timeout=90)
    return results[-1]


def codes(result) -> list[str]:
    return [f["code"] for f in result.report["findings"]]


@pytest.mark.parametrize("select, fragment", [
    ("SELECT user FROM (SELECT user FROM web UNION ALL SELECT id FROM users)", "TABLE USERS is read in a subquery or a UNION ALL branch"),
    ("SELECT user FROM (SELECT user FROM web UNION ALL SELECT user, amount FROM shop)", "the branches of a UNION ALL select 1 and 2 columns"),
    ("SELECT user FROM (SELECT user FROM web UNION ALL SELECT user FROM nowhere)", "unknown stream or table 'nowhere'"),
    ("SELECT user FROM (SELECT user FROM web UNION SELECT user FROM shop)", "UNION without ALL drops duplicates"),
    ("SELECT user FROM (SELECT user FROM web INTERSECT SELECT user FROM shop)", "INTERSECT is not supported on streams"),
    ("SELECT user FROM (SELECT user FROM web EXCEPT SELECT user FROM shop)", "EXCEPT is not supported on streams"),
    ("SELECT user FROM (SELECT user FROM web UNION ALL SELECT user FROM shop ORDER BY user)", "ORDER BY and LIMIT"),
    # the same at the top level (ksqlDB users write it so): the same reasons
    ("SELECT user FROM web UNION ALL SELECT user, amount FROM shop", "the branches of a UNION ALL select 1 and 2 columns"),
    ("SELECT user FROM web UNION SELECT user FROM shop", "UNION without ALL drops duplicates"),
    ("SELECT user FROM web EXCEPT SELECT user FROM shop", "EXCEPT is not supported on streams"),
    ("SELECT user FROM web UNION ALL SELECT id FROM users", "TABLE USERS is read in a subquery or a UNION ALL branch"),
])
def test_a_merge_that_cannot_run_is_refused_and_changes_nothing(tmp_path, select, fragment):
    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path))
    engine.execute(SOURCES + "CREATE TABLE users (id STRING PRIMARY KEY, name STRING) WITH (value_format='JSON');")
    with pytest.raises(ValidationError, match=re.escape(fragment)):
        engine.execute(f"CREATE STREAM merged AS {select}")
    assert engine.catalog.queries() == [] and engine.catalog.sources().get("MERGED") is None


@pytest.mark.spark
def test_an_aggregation_gains_a_stream_in_place_and_its_state_carries_on(engine, runtimes):
    engine.execute(SOURCES + ONE)
    runtimes.start(engine)
    insert(engine, "web", [("ann", 5), ("bob", 1)])
    insert(engine, "shop", [("ann", 100)])  # written before shop is read: read when it is added
    engine.wait_caught_up(QUERY, timeout=90)
    assert table(engine, "spend") == {"ann": (1, 5), "bob": (1, 1)}
    checkpoint = engine.query(QUERY).checkpoint
    assert set(committed_source_offsets(checkpoint)) == {"web"}  # known by name from the first run

    result = upgrade(engine, BOTH)
    assert result.report["verdict"] == "IN_PLACE" and result.version == 2
    assert codes(result) == ["SOURCE_ADDED", "BRANCH_CHANGED"]
    assert "stream SHOP is added: Spark reads it from its first file" in result.report["findings"][0]["message"]
    insert(engine, "web", [("ann", 7)])
    insert(engine, "shop", [("cy", 3)])
    engine.wait_caught_up(QUERY, timeout=90)
    # web's first records are not read again; all of shop is read once; the counts carry on
    assert table(engine, "spend") == {"ann": (3, 112), "bob": (1, 1), "cy": (1, 3)}
    assert set(committed_source_offsets(checkpoint)) == {"web", "shop"}
    assert engine.query(QUERY).running_version == 2

    result = upgrade(engine, SHOP)
    assert codes(result) == ["SOURCE_REMOVED"] and result.report["verdict"] == "IN_PLACE"
    insert(engine, "web", [("ann", 1000)])  # no longer read
    insert(engine, "shop", [("bob", 2)])
    engine.wait_caught_up(QUERY, timeout=90)
    assert table(engine, "spend") == {"ann": (3, 112), "bob": (2, 3), "cy": (1, 3)}
    explained = dict(engine.execute(f"EXPLAIN {QUERY}")[0].rows)
    assert explained["source_names"].startswith("SHOP as 'shop' (source evolution")


@pytest.mark.spark
def test_a_stream_gains_a_union_branch_and_each_record_is_written_once(sqlite_engine, runtimes):
    """Its dead letters (LOG_AND_CONTINUE) follow too: the added stream's bad record is logged."""
    engine = sqlite_engine
    engine.execute(
        SOURCES + "CREATE STREAM big WITH (on_error='LOG_AND_CONTINUE') AS "
        "SELECT user, amount FROM web WHERE amount > 10"
    )
    runtimes.start(engine)
    insert(engine, "web", [("ann", 50), ("bob", 1)])
    insert(engine, "shop", [("cy", 20)])
    engine.wait_caught_up("CSAS_BIG_1", timeout=90)
    result = upgrade(  # as ksqlDB users write it: a top-level UNION ALL, each branch filtered
        engine,
        "CREATE OR REPLACE STREAM big AS SELECT user, amount FROM web WHERE amount > 10 "
        "UNION ALL SELECT user, amount FROM shop WHERE amount > 10",
    )
    assert codes(result) == ["SOURCE_ADDED", "BRANCH_CHANGED", "FILTER_CHANGED"]  # the filter is in each branch now
    insert(engine, "web", [("dan", 30)])
    insert(engine, "shop", [("eve", 5), ("fay", 40)])
    shop = engine.catalog.source("SHOP").path
    with open(os.path.join(shop, ".bad.tmp"), "w") as f:
        f.write("not json at all\n")
    os.rename(os.path.join(shop, ".bad.tmp"), os.path.join(shop, "bad.json"))
    engine.wait_caught_up("CSAS_BIG_1", timeout=90)
    assert sorted(stream_rows(engine, "big")) == [("ann", 50), ("cy", 20), ("dan", 30), ("fay", 40)]
    wait_until(lambda: len(engine.bad_records("CSAS_BIG_1")) == 1, 60, "the added stream's bad record logged")
    assert [r.raw for r in engine.bad_records("CSAS_BIG_1")] == ["not json at all"]


@pytest.mark.spark
def test_a_query_from_before_names_keeps_replacing_required_and_still_runs(sqlite_engine, runtimes, monkeypatch):
    """A query whose plan has no source names (as an earlier release planned it) runs with
    source evolution off, beside a named one, and a new stream needs a new checkpoint."""
    from airflow_provider_streamql.language import compiler

    engine = sqlite_engine
    with monkeypatch.context() as patched:
        patched.setattr(compiler, "source_names", lambda streams: {})
        engine.execute(SOURCES + ONE)
    engine.execute("CREATE STREAM copy AS SELECT * FROM shop")
    unnamed = engine.query(QUERY)
    assert unnamed.plan.source_names == {} and engine.query("CSAS_COPY_2").plan.source_names == {"SHOP": "shop"}
    runtimes.start(engine)
    insert(engine, "web", [("ann", 5)])
    insert(engine, "shop", [("bob", 1)])
    engine.wait_caught_up(QUERY, timeout=90)
    engine.wait_caught_up("CSAS_COPY_2", timeout=90)
    assert table(engine, "spend") == {"ann": (1, 5)}
    assert stream_rows(engine, "copy") == [("bob", 1)]
    assert set(committed_source_offsets(unnamed.checkpoint)) == {"0"}  # by position
    with pytest.raises(StateError) as refused:
        engine.execute(BOTH)
    assert "SOURCES_CHANGED" in str(refused.value) and "were not named from its first run" in str(refused.value)
    assert engine.query(QUERY).version == 1 and os.path.isdir(unnamed.checkpoint)


@pytest.mark.spark
def test_starts_of_both_kinds_each_see_their_setting(spark):
    """The runtime starts queries on several threads: while a block of one kind runs, the
    session's source evolution setting is that kind's, and a start of the other kind gets
    its turn even while more of the first keep coming."""
    import threading
    import time

    from airflow_provider_streamql.runtime.evolution import SOURCE_EVOLUTION, source_evolution

    seen, done = [], []

    def start(on: bool, n: int):
        for _ in range(n):
            with source_evolution(spark, on):
                seen.append((on, spark.conf.get(SOURCE_EVOLUTION)))
                time.sleep(0.01)
        done.append(on)

    threads = [threading.Thread(target=start, args=(True, 40)) for _ in range(3)]
    threads.append(threading.Thread(target=start, args=(False, 5)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(seen) == 125 and all(value == ("true" if on else "false") for on, value in seen)
    assert done.index(False) < 3, "the other kind waited for every start of the first"
