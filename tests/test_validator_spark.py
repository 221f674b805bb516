"""Every validator verdict checked against Spark itself: each old query of the pair table
builds a real checkpoint, then the new version runs on a copy of it (the dry run).
IN_PLACE must run and read exactly the new input; whatever Spark refuses must not have been
IN_PLACE."""
import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.runtime.dryrun import run_to_end

from .test_validator import PAIRS, SOURCES

FIRST = """
INSERT INTO purchases VALUES (1, 'ann', 5.0, 'eu', '2024-01-01 00:00:00');
INSERT INTO purchases VALUES (2, 'bob', -1.0, 'us', '2024-01-01 00:00:10');
INSERT INTO refunds VALUES (1, 'ann', 5.0, 'eu', '2024-01-01 00:00:20');
INSERT INTO users VALUES ('ann', 'Ann');
"""
LATER = """
INSERT INTO purchases VALUES (3, 'ann', 7.0, 'eu', '2024-01-01 00:01:00');
INSERT INTO purchases VALUES (4, 'cat', 2.0, 'us', '2024-01-01 00:01:10');
INSERT INTO refunds VALUES (3, 'ann', 7.0, 'eu', '2024-01-01 00:01:20');
"""
NEW_FILES = {"PURCHASES": 2, "REFUNDS": 1}  # INSERT VALUES writes one file per record
ALL_FILES = {"PURCHASES": 4, "REFUNDS": 2}  # a stream a version adds is read from its first file


@pytest.mark.parametrize("old, new, verdict, codes", PAIRS)
def test_verdicts_agree_with_spark(spark, tmp_path, old, new, verdict, codes):
    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path))
    engine.execute(SOURCES + old + ";" + FIRST)
    live = engine.catalog.queries()[0]
    built = run_to_end(spark, live, {n: engine.catalog.source(n) for n in live.sources})
    assert built.error is None and built.input_rows > 0, built
    engine.execute(LATER)
    report = engine.dry_run(new.replace("CREATE ", "CREATE OR REPLACE ", 1), spark)
    assert "SPARK_REFUSED" not in {f.code for f in report.findings}, report.render()
    assert report.verdict == verdict, report.render()
    if verdict == "IN_PLACE":
        # it ran on the copied checkpoint and consumed exactly the files added since
        assert report.spark["ran"], report.render()
        def read(sql):
            return [s for s in ("PURCHASES", "REFUNDS") if s in sql.upper().replace("(", " ").replace(")", " ").split()]
        expected = sum(NEW_FILES[s] if s in read(old) else ALL_FILES[s] for s in read(new))
        assert report.spark["new_input_files"] == expected, report.render()


def test_the_recorded_state_schema_overrules_the_statement_text(spark, tmp_path):
    """The validator reads the key schema Spark recorded in the checkpoint: a checkpoint
    whose aggregation state is keyed by another type (here: restored from a query grouping
    by a STRING) is REJECTED before anything runs, even for a change the text allows, and
    Spark itself refuses it."""
    import shutil

    engine = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path))
    engine.execute(SOURCES + FIRST + """
        CREATE TABLE by_user AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user;
        CREATE TABLE by_id AS SELECT id, COUNT(*) AS n FROM purchases GROUP BY id;""")
    by_user, by_id = engine.catalog.queries()
    for q in (by_user, by_id):
        assert run_to_end(spark, q, {n: engine.catalog.source(n) for n in q.sources}).error is None
    described = engine.execute(f"EXPLAIN {by_id.id}")[0].rows
    assert ["state_store[0]", "operator 0 stateStoreSave, store default: 4 partitions, batches 0-0; "
            "key (id INT); value (count BIGINT)"] in described
    new = "CREATE OR REPLACE TABLE by_id AS SELECT id, COUNT(*) AS n FROM purchases WHERE id > 0 GROUP BY id"
    assert engine.validate(new).verdict == "IN_PLACE"

    shutil.rmtree(by_id.checkpoint)
    shutil.copytree(by_user.checkpoint, by_id.checkpoint)
    engine.execute(LATER)
    report = engine.dry_run(new, spark)
    assert report.verdict == "REJECTED", report.render()
    finding = next(f for f in report.findings if f.code == "STATE_SCHEMA_INCOMPATIBLE")
    assert "keyed by (user STRING) and the new version groups by (INT)" in finding.message
    assert "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in (report.spark["error"] or ""), report.render()
