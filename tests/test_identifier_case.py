"""Identifier case, end to end (issue 28): an unquoted name is resolved once to the one
spelling the catalog records, every writer writes it and every reader reads it, so a name
typed in another case never turns a value into NULL; a quoted name is case-sensitive, as in
ksqlDB; catalogs whose outputs were written under another spelling migrate to it."""
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import CatalogError, ValidationError


def _legacy(engine: Engine, query_id: str, spark_sql: str) -> None:
    """Record ``spark_sql`` as the plan of ``query_id`` in every version, as streamql wrote
    plans before every output was aliased under its one spelling."""
    db = create_engine(engine.catalog.url)
    with db.begin() as conn:
        for table, key in (("queries", "id"), ("query_versions", "query_id")):
            for (plan,) in conn.execute(text(f"SELECT plan FROM {table} WHERE {key} = :q"), {"q": query_id}).all():
                old = {**json.loads(plan), "spark_sql": spark_sql}
                conn.execute(text(f"UPDATE {table} SET plan = :p, select_sql = :s WHERE {key} = :q"),
                             {"p": json.dumps(old), "s": spark_sql, "q": query_id})
        conn.execute(text("UPDATE streamql_schema_version SET version = 10"))
    db.dispose()


def test_a_catalog_whose_output_was_written_in_another_case_reads_it_after_migrating(catalog_url, home):
    engine = Engine(catalog_url, home=home)
    engine.execute("CREATE STREAM U (ID INT KEY, NAME STRING); CREATE STREAM UO AS SELECT id, name FROM U;"
                   "INSERT INTO UO SELECT ID, NAME FROM U")
    sink = engine.catalog.source("UO")
    os.makedirs(sink.path, exist_ok=True)  # a runtime makes it as it starts the query
    with open(f"{sink.path}/CSAS_UO_1-v0001-b000000000000.json", "w") as f:
        f.write('{"id":7,"name":"bob"}\n')  # what the old plan wrote
    assert engine.execute("SELECT * FROM UO")[0].rows == [[None, None]]  # the defect, before migrating
    _legacy(engine, "CSAS_UO_1", "SELECT id, name FROM sq_csas_uo_1_u AS U")
    _legacy(engine, "INSERTQUERY_2", "SELECT ID, NAME FROM sq_insertquery_2_u AS U")
    engine.close()

    migrated = Engine(catalog_url, home=home)
    assert [c.name for c in migrated.catalog.source("UO").columns] == ["id", "name"]
    assert migrated.execute("SELECT * FROM UO")[0].rows == [[7, "bob"]]
    assert migrated.query("INSERTQUERY_2").plan.spark_sql == \
        "SELECT ID AS `id`, NAME AS `name` FROM sq_insertquery_2_u AS U"  # the second writer writes it so now
    assert [c["name"] for v in migrated.catalog.versions("CSAS_UO_1") for c in json.loads(v["sink_columns"])] == \
        ["id", "name"]  # a rollback restores the same spelling
    # a new version keeps the spelling the output holds, whatever the statement types
    [result] = migrated.execute("TERMINATE INSERTQUERY_2; CREATE OR REPLACE STREAM UO AS SELECT ID, NAME FROM U")[1:]
    assert [c.name for c in migrated.catalog.source("UO").columns] == ["id", "name"]
    assert "AS `id`" in migrated.query(result.query_id).plan.spark_sql
    migrated.close()


def test_a_catalog_holding_a_type_streamql_no_longer_reads_is_refused_by_name(catalog_url, home):
    engine = Engine(catalog_url, home=home)
    engine.execute("CREATE STREAM X (A STRING, B DECIMAL(10, 2))")
    engine.close()
    db = create_engine(catalog_url)
    with db.begin() as conn:  # what the column-type injection stored before types were typed values
        payload = [{"name": "A", "type": "STRING", "key": False},
                   {"name": "B", "type": "DECIMAL(10, 2)); SELECT 1; --", "key": False}]
        conn.execute(text("UPDATE sources SET columns = :c WHERE name = 'X'"), {"c": json.dumps(payload)})
        conn.execute(text("UPDATE streamql_schema_version SET version = 10"))
    db.dispose()
    with pytest.raises(CatalogError, match=r"column 'B' of X with a type streamql does not read"):
        Engine(catalog_url, home=home)


@pytest.mark.parametrize("sql, error", [
    # a quoted name is case-sensitive (ksqlDB): it names the column spelled so, or none
    ("CREATE STREAM O AS SELECT `id` FROM U", "`id` names no column: a quoted name is case-sensitive"),
    ("CREATE STREAM O AS SELECT `Name` AS n FROM U", "the column is spelled NAME"),
    ("CREATE STREAM O AS SELECT ID FROM U WHERE `name` = 'x'", "`name` names no column"),
    ("SELECT `id` FROM U", "`id` names no column"),
    ("CREATE STREAM O AS SELECT `ID`, `NAME` FROM U", None),
    ("CREATE STREAM O AS SELECT id, name AS `Who` FROM U", None),
    ("CREATE STREAM O AS SELECT * FROM (SELECT id FROM U)", None),
])
def test_quoted_names_are_case_sensitive_as_in_ksqldb(engine, sql, error):
    engine.execute("CREATE STREAM U (ID INT KEY, NAME STRING)")
    if error is None:
        engine.execute(sql)
        return
    with pytest.raises(ValidationError, match=error):
        engine.execute(sql)


@pytest.mark.parametrize("declared, statement, columns", [
    # (declared columns, query, the output columns the catalog records: one spelling each)
    ("ID INT KEY, NAME STRING", "SELECT id, name FROM S", ["ID", "NAME"]),
    ("id INT KEY, name STRING", "SELECT ID, Name FROM S", ["id", "name"]),
    ("ID INT KEY, NAME STRING", "SELECT id AS id, name AS Who FROM S", ["id", "Who"]),
    ("ID INT KEY, NAME STRING", "SELECT * FROM S", ["ID", "NAME"]),
    ("Id INT KEY, Name STRING", "SELECT s.id, S.NAME FROM S s", ["Id", "Name"]),
    ("ID INT KEY, NAME STRING", "SELECT id, UCASE(name) FROM S", ["ID", "KSQL_COL_0"]),
])
def test_every_output_column_has_one_spelling_and_the_plan_writes_it(engine, declared, statement, columns):
    engine.execute(f"CREATE STREAM S ({declared}); CREATE STREAM O AS {statement}")
    assert [c.name for c in engine.catalog.source("O").columns] == columns
    query = engine.query(engine.catalog.source("O").writer_query)
    written = [p.strip().split(" AS ")[-1].strip("`").rsplit(".", 1)[-1].strip("`")
               for p in query.plan.spark_sql.split(" FROM ")[0][len("SELECT "):].split(", ")]
    assert written == columns  # Spark names each output as the plan spells it


# -- through a real runtime ---------------------------------------------------------------
#: (name, declared sources, the query writing O_<name>, a downstream query reading it, the
#: records inserted, the rows of the output and of the downstream query). Every case runs in
#: one runtime; each output and downstream query must read back what was inserted.
SPELLINGS = [
    ("upper_read_lower", "CREATE STREAM U_{n} (ID INT KEY, NAME STRING)",
     "CREATE STREAM O_{n} AS SELECT id, name FROM U_{n}", "CREATE STREAM D_{n} AS SELECT ID, NAME FROM O_{n}",
     ["INSERT INTO U_{n} VALUES (7, 'bob')"], [[7, "bob"]]),
    ("lower_read_mixed", "CREATE STREAM lowers_{n} (id INT, name STRING)",
     "CREATE STREAM O_{n} AS SELECT ID, Name FROM lowers_{n}", "CREATE STREAM D_{n} AS SELECT Id, NAME FROM O_{n}",
     ["INSERT INTO lowers_{n} VALUES (8, 'ann')"], [[8, "ann"]]),
    ("aliased", "CREATE STREAM U_{n} (ID INT KEY, NAME STRING)",
     "CREATE STREAM O_{n} AS SELECT id AS Ident, name AS who FROM U_{n}",
     "CREATE STREAM D_{n} AS SELECT IDENT, WHO FROM O_{n}", ["INSERT INTO U_{n} VALUES (9, 'cy')"], [[9, "cy"]]),
    ("star", "CREATE STREAM U_{n} (ID INT KEY, NAME STRING)", "CREATE STREAM O_{n} AS SELECT * FROM U_{n}",
     "CREATE STREAM D_{n} AS SELECT id, name FROM O_{n}", ["INSERT INTO U_{n} VALUES (10, 'di')"], [[10, "di"]]),
    ("join_qualified", "CREATE STREAM A_{n} (ID INT KEY, V STRING); CREATE TABLE T_{n} (id INT PRIMARY KEY, label STRING)",
     "CREATE STREAM O_{n} AS SELECT t.id AS ID, v, T.LABEL FROM A_{n} a JOIN T_{n} t ON a.id = t.ID",
     "CREATE STREAM D_{n} AS SELECT id, V, Label FROM O_{n}",
     ["INSERT INTO T_{n} VALUES (11, 'x')", "INSERT INTO A_{n} VALUES (11, 'ev')"], [[11, "ev", "x"]]),
    ("table_aggregate", "CREATE STREAM U_{n} (ID INT KEY, NAME STRING)",
     "CREATE TABLE O_{n} AS SELECT name, COUNT(*) AS N FROM U_{n} GROUP BY NAME",
     "CREATE TABLE D_{n} AS SELECT NAME, n FROM O_{n}", ["INSERT INTO U_{n} VALUES (12, 'ed')"], [["ed", 1]]),
    ("parquet_output", "CREATE STREAM U_{n} (ID INT KEY, NAME STRING)",
     "CREATE STREAM O_{n} WITH (value_format='PARQUET') AS SELECT id, Name FROM U_{n}",
     "CREATE STREAM D_{n} AS SELECT ID, name FROM O_{n}", ["INSERT INTO U_{n} VALUES (13, 'fa')"], [[13, "fa"]]),
    ("insert_into_declared", "CREATE STREAM U_{n} (ID INT KEY, NAME STRING); CREATE STREAM O_{n} (id INT, name STRING)",
     "INSERT INTO O_{n} SELECT ID, NAME FROM U_{n}", "CREATE STREAM D_{n} AS SELECT ID, Name FROM O_{n}",
     ["INSERT INTO U_{n} VALUES (14, 'gu')"], [[14, "gu"]]),
]


@pytest.fixture(scope="module")
def spelled_world(spark, tmp_path_factory):
    """Every case of :data:`SPELLINGS` created, fed and caught up in one runtime."""
    from .conftest import RuntimeThreads
    path = tmp_path_factory.mktemp("spellings")
    (path / "home").mkdir()
    engine = Engine(f"sqlite:///{path}/catalog.db", home=str(path / "home"), issuer="test")
    runtimes = RuntimeThreads(spark)
    queries = []
    for n, (_name, sources, query, downstream, _inserts, _rows) in enumerate(SPELLINGS):
        results = engine.execute(";".join(s.format(n=n) for s in (sources, query, downstream)))
        queries += [r.query_id for r in results if r.query_id]
    runtimes.start(engine)
    for query_id in queries:
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    for n, case in enumerate(SPELLINGS):
        engine.execute(";".join(s.format(n=n) for s in case[4]))
    for query_id in queries:
        engine.wait_caught_up(query_id, timeout=120)
    yield engine
    runtimes.stop_all()
    engine.close()


@pytest.mark.parametrize("n, case", list(enumerate(SPELLINGS)), ids=[c[0] for c in SPELLINGS])
def test_a_name_typed_in_another_case_never_turns_a_value_into_null(spelled_world, n, case):
    *_, rows = case
    for reader in (f"O_{n}", f"D_{n}"):
        assert spelled_world.execute(f"SELECT * FROM {reader}")[0].rows == rows, reader


# -- a property: whatever the letter case, values arrive -----------------------------------
SPELL = [str.lower, str.upper, str.title, lambda s: s[:1].lower() + s[1:].upper()]
POOL = [("amount", "INT", st.integers(-1000, 1000)), ("label", "STRING", st.text("abcxyz", min_size=1, max_size=5)),
        ("code", "BIGINT", st.integers(0, 2**40)), ("flag", "BOOLEAN", st.booleans())]


@st.composite
def spelled_pipelines(draw):
    """A declared stream, a query over it and a downstream query over that, every name in a
    letter case of its own, and one record: (statements, insert, the expected row)."""
    chosen = draw(st.lists(st.sampled_from(range(len(POOL))), min_size=1, max_size=len(POOL), unique=True))
    declared = [(draw(st.sampled_from(SPELL))(POOL[i][0]), POOL[i][1]) for i in range(len(POOL))]
    projections, outputs = [], []
    for i in chosen:
        reference = draw(st.sampled_from(SPELL))(POOL[i][0])
        alias = draw(st.one_of(st.none(), st.sampled_from(SPELL).map(lambda f, i=i: f(f"out_{POOL[i][0]}"))))
        projections.append(f"{reference} AS {alias}" if alias else reference)
        outputs.append(alias or POOL[i][0])
    downstream = [draw(st.sampled_from(SPELL))(o) for o in outputs]
    values = [draw(POOL[i][2]) for i in range(len(POOL))]
    return declared, projections, downstream, values, [values[i] for i in chosen]


def _literal(value) -> str:
    return ("TRUE" if value else "FALSE") if isinstance(value, bool) else repr(value)


@pytest.fixture(scope="module")
def property_runtime(spark, tmp_path_factory):
    from .conftest import RuntimeThreads
    path = tmp_path_factory.mktemp("spelling-property")
    (path / "home").mkdir()
    engine = Engine(f"sqlite:///{path}/catalog.db", home=str(path / "home"), issuer="test")
    runtimes = RuntimeThreads(spark)
    runtimes.start(engine)
    engine.pipelines_made = 0
    yield engine
    runtimes.stop_all()
    engine.close()


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pipeline=spelled_pipelines())
def test_whatever_the_letter_case_every_output_reads_back_what_was_inserted(property_runtime, pipeline):
    engine = property_runtime
    declared, projections, downstream, values, expected = pipeline
    n = engine.pipelines_made = engine.pipelines_made + 1
    columns = ", ".join(f"{name} {type_}" for name, type_ in declared)
    results = engine.execute(f"CREATE STREAM S_{n} ({columns});"
                             f"CREATE STREAM O_{n} AS SELECT {', '.join(projections)} FROM s_{n};"
                             f"CREATE STREAM D_{n} AS SELECT {', '.join(downstream)} FROM o_{n}")
    queries = [r.query_id for r in results if r.query_id]
    for query_id in queries:
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    engine.execute(f"INSERT INTO S_{n} VALUES ({', '.join(map(_literal, values))})")
    for query_id in queries:
        engine.wait_caught_up(query_id, timeout=120)
    assert engine.execute(f"SELECT * FROM O_{n}")[0].rows == [expected]
    assert engine.execute(f"SELECT * FROM D_{n}")[0].rows == [expected]
