"""Validating a source change: ``CREATE OR REPLACE STREAM|TABLE s (...)`` of a declared source
through Engine.validate, ``streamql validate`` and ``plan``; one line per change kind. The
verdict is the one the apply path acts on: an IN_PLACE change applies, any other is refused
with the same findings."""
import json

import pytest

from airflow_provider_streamql.cli import main
from airflow_provider_streamql.errors import StreamQLError, ValidationError

SETUP = """
CREATE STREAM purchases (id INT KEY, user STRING, cost INT, ts TIMESTAMP) WITH (value_format='JSON', timestamp='ts');
CREATE STREAM big AS SELECT id, user FROM purchases WHERE cost > 10;
CREATE TABLE users (uid STRING PRIMARY KEY, name STRING);
CREATE STREAM lonely (a INT, b STRING);
"""
P = "id INT KEY, user STRING, cost INT, ts TIMESTAMP"

# statement -> (verdict, finding codes, a fragment of the findings)
CHANGES = [
    (f"CREATE OR REPLACE STREAM purchases ({P})", "IN_PLACE", ["SOURCE_UNCHANGED"], "PURCHASES is declared as it is"),
    (f"CREATE OR REPLACE STREAM purchases ({P}, note STRING)", "IN_PLACE", ["SOURCE_COLUMN_APPENDED"],
     "note STRING appended: earlier records read it as NULL; queries reading PURCHASES keep reading the columns "
     "they were planned with (CSAS_BIG_1)"),
    ("CREATE OR REPLACE STREAM lonely (a INT, b STRING, c DOUBLE, d DATE)", "IN_PLACE", ["SOURCE_COLUMN_APPENDED"],
     "c DOUBLE, d DATE appended: earlier records read it as NULL; no query reads LONELY"),
    ("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost BIGINT, ts TIMESTAMP)", "IN_PLACE",
     ["SOURCE_COLUMN_WIDENED", "SOURCE_READER_UPGRADED"], "PURCHASES.cost INT -> BIGINT: every record reads the same"),
    ("CREATE OR REPLACE STREAM lonely (a DOUBLE, b STRING)", "IN_PLACE", ["SOURCE_COLUMN_WIDENED"], "LONELY.a INT -> DOUBLE"),
    ("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, ts TIMESTAMP)", "REJECTED",
     ["SOURCE_COLUMN_REMOVED"], "column cost INT removed: records already in PURCHASES hold it (queries reading "
     "PURCHASES: CSAS_BIG_1)"),
    ("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost STRING, ts TIMESTAMP)", "REJECTED",
     ["SOURCE_COLUMN_TYPE_CHANGED"], "column cost INT -> STRING is not a widening"),
    ("CREATE OR REPLACE STREAM lonely (a SMALLINT, b STRING)", "REJECTED", ["SOURCE_COLUMN_TYPE_CHANGED"],
     "column a INT -> SMALLINT is not a widening"),
    ("CREATE OR REPLACE STREAM purchases (id INT, user STRING, cost INT, ts TIMESTAMP)", "REJECTED",
     ["SOURCE_KEY_CHANGED"], "column id is no longer a key column"),
    ("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING KEY, cost INT, ts TIMESTAMP)", "REJECTED",
     ["SOURCE_KEY_CHANGED"], "column user becomes a key column"),
    ("CREATE OR REPLACE TABLE users (uid STRING PRIMARY KEY, name STRING, org STRING PRIMARY KEY)", "REJECTED",
     ["SOURCE_KEY_CHANGED"], "key column org added"),
    ("CREATE OR REPLACE STREAM lonely (b STRING, a INT)", "REJECTED", ["SOURCE_COLUMNS_REORDERED"],
     "columns may only be appended at the end"),
    ("CREATE OR REPLACE STREAM lonely (a INT, c INT, b STRING)", "REJECTED", ["SOURCE_COLUMNS_REORDERED"],
     "(a, c, b) are not (a, b) followed by new ones"),
    ("CREATE OR REPLACE STREAM lonely (a INT, c STRING)", "REJECTED", ["SOURCE_COLUMN_REMOVED", "SOURCE_COLUMN_APPENDED"],
     "column b STRING removed"),  # a rename is a removal
    ("CREATE OR REPLACE STREAM lonely (a INT, b STRING) WITH (value_format='CSV')", "REJECTED",
     ["SOURCE_PROPERTIES_CHANGED"], "value_format=None -> 'CSV'"),
    ("CREATE OR REPLACE STREAM lonely (a BIGINT, b INT)", "REJECTED", ["SOURCE_COLUMN_WIDENED", "SOURCE_COLUMN_TYPE_CHANGED"],
     "column b STRING -> INT is not a widening"),
]


def codes(report) -> list[str]:
    return sorted(f.code for f in report.findings)


@pytest.mark.parametrize("sql, verdict, expected, fragment", CHANGES)
def test_validate_a_source_change(sqlite_engine, sql, verdict, expected, fragment):
    engine = sqlite_engine
    engine.execute(SETUP)
    before = (engine.catalog.commands.all(), [s.columns for s in map(engine.catalog.source, ("PURCHASES", "LONELY"))])
    report = engine.validate(sql)
    assert (report.verdict, codes(report)) == (verdict, sorted(expected))
    assert report.source == sql.split()[4].upper() and report.query_id is None
    assert fragment in " ".join(f.message for f in report.findings)
    assert (engine.catalog.commands.all(), [s.columns for s in map(engine.catalog.source, ("PURCHASES", "LONELY"))]) == before
    # the apply path acts on the same verdict
    if verdict == "IN_PLACE":
        assert engine.execute(sql)[0].action in ("replaced", "unchanged")
    else:
        with pytest.raises(ValidationError) as info:
            engine.execute(sql)
        for code in expected:
            if code not in ("SOURCE_COLUMN_WIDENED", "SOURCE_COLUMN_APPENDED"):  # the IN_PLACE ones
                assert code in info.value.message
        assert engine.catalog.commands.all() == before[0]


def test_a_reader_that_cannot_take_a_widening_rejects_it(sqlite_engine):
    """A query that keys its output on the widened column cannot change its key in place."""
    engine = sqlite_engine
    engine.execute(SETUP + "CREATE TABLE per_cost AS SELECT cost, COUNT(*) AS n FROM purchases GROUP BY cost;")
    report = engine.validate("CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost BIGINT, ts TIMESTAMP)")
    assert report.verdict == "REJECTED"
    blocks = [f for f in report.findings if f.code == "SOURCE_READER_BLOCKS"]
    assert [f.message.split(":")[1].strip().split()[0] for f in blocks] == ["CTAS_PER_COST_2"]
    assert [v["version"] for v in engine.catalog.versions("CSAS_BIG_1")] == [1]


@pytest.mark.parametrize("sql, error", [
    ("CREATE OR REPLACE STREAM nowhere (a INT)", "nowhere"),
    ("CREATE OR REPLACE STREAM big (id INT)", "it is written by query CSAS_BIG_1"),
    ("CREATE OR REPLACE TABLE purchases (id INT PRIMARY KEY)", "PURCHASES is a STREAM, not a TABLE"),
    ("CREATE OR REPLACE STREAM lonely (a INT, A STRING)", "column 'a' is declared twice"),
])
def test_a_statement_that_is_no_source_change_is_an_error(sqlite_engine, sql, error):
    sqlite_engine.execute(SETUP)
    with pytest.raises(StreamQLError, match=error):
        sqlite_engine.validate(sql)


def test_no_query_id_and_no_dry_run_for_a_source(sqlite_engine):
    sqlite_engine.execute(SETUP)
    with pytest.raises(ValidationError, match="names a query; the statement declares LONELY"):
        sqlite_engine.validate("CREATE OR REPLACE STREAM lonely (a INT, b STRING)", query_id="CSAS_BIG_1")
    with pytest.raises(ValidationError, match="validate LONELY \\(a source\\) without one"):
        sqlite_engine.dry_run("CREATE OR REPLACE STREAM lonely (a INT, b STRING)", spark=None)


def test_streamql_validate_a_source_change(sqlite_engine, capsys):
    engine = sqlite_engine
    engine.execute(SETUP)
    base = ["validate", "--catalog", engine.catalog.url, "--home", engine.home]
    capsys.readouterr()
    assert main([*base, "CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING, cost INT, ts TIMESTAMP, n INT)"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PURCHASES: IN_PLACE") and "SOURCE_COLUMN_APPENDED" in out and "traits" not in out
    assert main([*base, "--json", "CREATE OR REPLACE STREAM purchases (id INT KEY, user STRING)"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["source"], report["query_id"], report["verdict"]) == ("PURCHASES", None, "REJECTED")
    assert [f["code"] for f in report["findings"]] == ["SOURCE_COLUMN_REMOVED", "SOURCE_COLUMN_REMOVED"]
    assert main([*base, "CREATE OR REPLACE STREAM nowhere (a INT)"]) == 2


def test_plan_reports_a_source_change_with_its_findings(sqlite_engine):
    engine = sqlite_engine
    engine.execute(SETUP)
    plan = engine.plan("CREATE STREAM lonely (a INT, b STRING, c INT); CREATE STREAM purchases (id INT KEY, user STRING)")
    appended, removed = plan.items[:2]
    assert (appended.action, appended.name) == ("replace in place", "LONELY")
    assert appended.findings[0].startswith("SOURCE_COLUMN_APPENDED: c INT appended")
    assert (removed.action, removed.name) == ("rejected", "PURCHASES")
    assert [f.split(":")[0] for f in removed.findings] == ["SOURCE_COLUMN_REMOVED", "SOURCE_COLUMN_REMOVED"]
