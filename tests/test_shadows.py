"""Shadow upgrades (docs/upgrades.md, "Shadow upgrades"): version N+1 runs beside N on a copy
of N's checkpoint into an output of its own; DIFF compares the two over the input both read;
PROMOTE replaces N in place with every input record in the output exactly once; DISCARD
stops the shadow."""
import pytest

from airflow_provider_streamql.errors import NotFoundError, ParseError, StateError, ValidationError

from .support import insert, stream_rows, table

PIPELINE = """
CREATE STREAM src (id INT, v INT);
CREATE STREAM big AS SELECT id, v FROM src WHERE v >= 10;
CREATE TABLE totals AS SELECT id % 2 AS k, COUNT(*) AS n, SUM(v) AS s FROM src GROUP BY id % 2;
"""
BIG, TOTALS = "CSAS_BIG_1", "CTAS_TOTALS_2"
FIRST = [(1, 10), (2, 20), (3, 5)]
LATER = [(4, 12), (5, 50), (6, 1)]
LAST = [(7, 11), (8, 30)]


def caught_up(engine, *ids):
    for query_id in ids:
        engine.wait_caught_up(query_id, timeout=60)


def states(engine):
    return {r["query_id"]: (r["state"], r["version"]) for r in engine.queries()}


def started(engine, runtimes):
    engine.execute(PIPELINE)
    runtimes.start(engine)
    insert(engine, "src", FIRST)
    caught_up(engine, BIG, TOTALS)
    return engine


def test_a_shadow_runs_beside_the_live_version_and_promote_keeps_every_record_once(sqlite_engine, runtimes):
    engine = started(sqlite_engine, runtimes)
    result = engine.execute("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v >= 15")[0]
    assert result.action == "shadowed" and result.version == 2, result.message
    shadow = result.query_id
    assert shadow == "CSAS_BIG_SHADOW_3"
    engine.wait_for_state(shadow, "RUNNING", timeout=60)
    insert(engine, "src", LATER)
    caught_up(engine, BIG, shadow)
    assert states(engine)[BIG] == ("RUNNING", 1) and states(engine)[shadow] == ("RUNNING", 1)
    # the live version keeps serving; the shadow's output holds only what it read after the copy
    assert stream_rows(engine, "big") == [(1, 10), (2, 20), (4, 12), (5, 50)]
    assert stream_rows(engine, "big_shadow") == [(5, 50)]

    diff = engine.execute(f"DIFF {BIG}")[0]
    assert diff.columns == ["written_by", "id", "v"]
    assert diff.rows == [[BIG, 4, 12]], diff.message  # kept by v >= 10, not by v >= 15
    assert diff.details == {"inputs": 3, "only_live": 1, "only_shadow": 0, "behind": {BIG: 0, shadow: 0}}
    explained = dict(engine.execute(f"EXPLAIN {BIG}")[0].rows)
    assert explained["shadow"] == shadow

    promoted = engine.execute(f"PROMOTE {BIG}")[0]
    assert "Promoted: Replaced CSAS_BIG_1 in place: version 2" in promoted.message
    engine.wait_for_version(BIG, 2, timeout=60)
    engine.wait_for_state(shadow, "TERMINATED", timeout=60)
    insert(engine, "src", LAST)
    caught_up(engine, BIG)
    # before the promote under version 1, after it under version 2: each record once
    assert stream_rows(engine, "big") == [(1, 10), (2, 20), (4, 12), (5, 50), (8, 30)]
    versions = dict(engine.execute(f"EXPLAIN {BIG}")[0].rows)
    assert "WHERE v >= 15" in versions["sql"] and "shadow" not in versions["sql"].lower()
    engine.execute("DROP STREAM big_shadow DELETE TOPIC")
    assert "BIG_SHADOW" not in {r[0] for r in engine.execute("SHOW STREAMS")[0].rows}


def test_a_table_shadow_diffs_by_key_and_discard_leaves_the_live_version(sqlite_engine, runtimes):
    engine = started(sqlite_engine, runtimes)
    new = "CREATE OR REPLACE TABLE totals WITH (shadow=true) AS SELECT id % 2 AS k, COUNT(*) AS n, SUM(v) AS s " \
          "FROM src WHERE v < 40 GROUP BY id % 2"
    shadow = engine.execute(new)[0].query_id
    engine.wait_for_state(shadow, "RUNNING", timeout=60)
    insert(engine, "src", LATER)
    caught_up(engine, TOTALS, shadow)
    assert table(engine, "totals") == {1: (3, 65), 0: (3, 33)}
    # the shadow's state came from the live checkpoint (k=0 counts FIRST's record too); it
    # filtered out id 5, so k=1 did not change and it wrote no row for it
    assert table(engine, "totals_shadow") == {0: (3, 33)}
    diff = engine.execute(f"DIFF {shadow}")[0]
    assert diff.rows == [[TOTALS, 1, 3, 65]], diff.message

    engine.execute(f"DISCARD {TOTALS}")
    engine.wait_for_state(shadow, "TERMINATED", timeout=60)
    assert states(engine)[TOTALS] == ("RUNNING", 1)
    with pytest.raises(StateError, match="has no shadow"):
        engine.execute(f"PROMOTE {TOTALS}")


@pytest.mark.parametrize("statement, error, words", [
    ("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id FROM src", ValidationError,
     "needs an IN_PLACE change; this one is REJECTED: COLUMN_REMOVED"),
    ("CREATE STREAM other WITH (shadow=true) AS SELECT id, v FROM src", ValidationError,
     "goes with CREATE OR REPLACE of a query's output"),
    ("CREATE OR REPLACE STREAM big WITH (shadow='maybe') AS SELECT id, v FROM src", ValidationError,
     "shadow must be true or false, not 'maybe'"),
    ("PROMOTE CSAS_BIG_1", StateError, "query CSAS_BIG_1 has no shadow"),
    ("DISCARD CSAS_NONE_9", NotFoundError, "no query 'CSAS_NONE_9'"),
    ("DIFF CTAS_TOTALS_2", StateError, "query CTAS_TOTALS_2 has no shadow"),
    ("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 1; "
     "CREATE OR REPLACE STREAM big_shadow WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 2", ValidationError,
     "BIG_SHADOW is the output of CSAS_BIG_SHADOW_3, a shadow: PROMOTE or DISCARD it"),
    ("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 1; "
     "CREATE OR REPLACE STREAM big_shadow AS SELECT id, v FROM src WHERE v > 2", ValidationError,
     "a shadow of CSAS_BIG_1: PROMOTE or DISCARD it, then replace CSAS_BIG_1"),
    ("PAUSE CSAS_BIG_1; CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 1",
     ValidationError, "CSAS_BIG_1 is PAUSED: a shadow runs beside a RUNNING query"),
    ("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 1; "
     "CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 2", ValidationError,
     "already has a shadow, CSAS_BIG_SHADOW_3"),
])
def test_bad_shadow_statements_change_nothing(sqlite_engine, statement, error, words):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    before = states(engine)
    with pytest.raises(error, match=words):
        engine.execute(statement)
    assert states(engine) == before


def test_the_streaming_queries_page_marks_a_shadow(sqlite_engine):
    """The page's listing (plugins/overview.py) says which query a shadow shadows, so the two
    are told apart in the UI."""
    from airflow_provider_streamql.plugins.overview import query_list

    engine = sqlite_engine
    engine.execute(PIPELINE)
    shadow = engine.execute("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v > 1")[0]
    marks = {r["query_id"]: r["shadow_of"] for r in query_list(engine)}
    assert marks == {BIG: None, TOTALS: None, shadow.query_id: BIG}


def test_promote_when_ready_fails_with_the_figures_while_the_shadow_is_behind_then_waits_and_promotes(
        sqlite_engine, runtimes):
    """Materialize's deploy_await: PROMOTE ... WHEN READY promotes only once the shadow has read
    every input file the live version read and its lag stayed within the bound; before that it
    fails with the figures and changes nothing."""
    engine = started(sqlite_engine, runtimes)
    shadow = engine.execute("CREATE OR REPLACE STREAM big WITH (shadow=true) AS SELECT id, v FROM src WHERE v >= 15")[0]
    shadow = shadow.query_id
    engine.wait_for_state(shadow, "RUNNING", timeout=60)
    engine.execute(f"PAUSE {shadow}")
    engine.wait_for_state(shadow, "PAUSED", timeout=60)
    insert(engine, "src", LATER)
    caught_up(engine, BIG)  # the live version read them; the paused shadow did not

    with pytest.raises(StateError) as refused:
        engine.execute(f"PROMOTE {BIG} WHEN READY WITHIN 4 SECONDS")
    said = str(refused.value)
    assert "the shadow is not ready within" in said and "nothing was promoted" in said, said
    assert f"{shadow} has read 3 of the 6 input file(s) {BIG} has read (3 behind), lag 3 file(s)" in said, said
    assert f"{shadow} is PAUSED" in said
    assert engine.query(BIG).version == 1 and engine.query(shadow).desired_state == "PAUSED"

    engine.execute(f"RESUME {shadow}")
    promoted = engine.execute(f"PROMOTE {BIG} WHEN READY WITHIN 2 MINUTES LAG <= 0")[0]
    assert promoted.message.startswith("Ready after "), promoted.message
    assert "Promoted: Replaced CSAS_BIG_1 in place: version 2" in promoted.message
    ready = promoted.details["readiness"]
    assert (ready["behind"], ready["lag"], ready["live_files"]) == (0, 0, 6), ready
    engine.wait_for_version(BIG, 2, timeout=60)
    engine.wait_for_state(shadow, "TERMINATED", timeout=60)
    insert(engine, "src", LAST)
    caught_up(engine, BIG)
    assert stream_rows(engine, "big") == [(1, 10), (2, 20), (4, 12), (5, 50), (8, 30)]  # each record once
    logged = [c["statement"] for c in engine.catalog.commands.all()]
    assert f"PROMOTE {BIG} WHEN READY WITHIN 2 MINUTES LAG <= 0" in logged


@pytest.mark.parametrize("statement, error, words", [
    ("PROMOTE CSAS_BIG_1 WHEN READY", StateError, "query CSAS_BIG_1 has no shadow"),
    ("PROMOTE CSAS_NONE_9 WHEN READY", NotFoundError, "no query 'CSAS_NONE_9'"),
    ("PROMOTE CSAS_BIG_1 WHEN READY WITHIN 0 SECONDS", ParseError, "WITHIN must be positive"),
    ("PROMOTE CSAS_BIG_1 WHEN READY WITHIN 2 SECONDS", ParseError, "a shadow must stay ready for 3 seconds"),
    ("PROMOTE CSAS_BIG_1 WHEN READY WITHIN 2 DAYS", ParseError, "at most 86400 seconds"),
    ("PROMOTE CSAS_BIG_1 WHEN READY LAG <= -1", ParseError, "LAG <= n takes a whole number of input files"),
    ("PROMOTE CSAS_BIG_1 WHEN READY LAG <= 1.5", ParseError, "LAG <= n takes a whole number of input files"),
    ("PROMOTE CSAS_BIG_1 WHEN READY LAG < 2", ParseError, "expected '<='"),
    ("DISCARD CSAS_BIG_1 WHEN READY", ParseError, "unexpected text after the statement"),
])
def test_bad_readiness_gates_change_nothing(sqlite_engine, statement, error, words):
    engine = sqlite_engine
    engine.execute(PIPELINE)
    before = states(engine)
    with pytest.raises(error, match=words):
        engine.execute(statement)
    assert states(engine) == before
