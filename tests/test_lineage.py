"""Lineage: each query's inputs, output and column lineage from the catalog
(views/lineage.py), and the OpenLineage events Airflow's OpenLineage provider emits for
the DAGs that create and upgrade the ksqlMart pipeline, read back from its file transport."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.views.lineage import query_lineage

from .conftest import REPO

SOURCES = """
CREATE STREAM purchases (id INT KEY, user STRING, product STRING, cost DOUBLE, quantity INT) WITH (value_format='JSON');
CREATE STREAM refunds (id INT KEY, user STRING, product STRING, cost DOUBLE, quantity INT) WITH (value_format='JSON');
CREATE TABLE users (id STRING PRIMARY KEY, name STRING) WITH (value_format='JSON');
CREATE STREAM orders (id INT KEY, amount DOUBLE) WITH (kafka_topic='orders', value_format='JSON');
"""

# (SELECT of a new stream or table, an output column, its inputs as STREAM.column:how)
COLUMNS = [
    ("SELECT * FROM purchases WHERE cost > 0", "product", {"PURCHASES.product:IDENTITY"}),
    ("SELECT id, cost * quantity AS total FROM purchases", "total", {"PURCHASES.cost:TRANSFORMATION", "PURCHASES.quantity:TRANSFORMATION"}),
    ("SELECT id, UCASE(product) FROM purchases", "KSQL_COL_0", {"PURCHASES.product:TRANSFORMATION"}),
    ("TABLE:SELECT product, SUM(cost * quantity) AS revenue FROM purchases GROUP BY product", "revenue", {"PURCHASES.cost:AGGREGATION", "PURCHASES.quantity:AGGREGATION"}),
    ("TABLE:SELECT product, COUNT(*) AS n FROM purchases GROUP BY product", "n", set()),
    ("TABLE:SELECT product, COUNT(*) AS n FROM purchases GROUP BY product", "product", {"PURCHASES.product:IDENTITY"}),
    ("SELECT p.id, u.name AS name FROM purchases p JOIN users u ON p.user = u.id", "name", {"USERS.name:IDENTITY"}),
    ("SELECT p.id, u.name AS name FROM purchases p JOIN users u ON p.user = u.id", "P_ID", {"PURCHASES.id:IDENTITY"}),
    ("SELECT * FROM (SELECT id, product FROM purchases UNION ALL SELECT id, user AS product FROM refunds)", "product", {"PURCHASES.product:IDENTITY", "REFUNDS.user:IDENTITY"}),
    ("SELECT id, amount * 2 AS doubled FROM orders", "doubled", {"orders.amount:TRANSFORMATION"}),
]


@pytest.fixture
def sources(tmp_path):
    engine = Engine(home=str(tmp_path), issuer="test")
    engine.execute(SOURCES)
    yield engine
    engine.close()


@pytest.mark.parametrize("select,column,inputs", COLUMNS)
def test_each_output_column_names_the_input_columns_it_is_made_from(sources, select, column, inputs):
    kind, _, select = select.rpartition(":")
    result = sources.execute(f"CREATE {kind or 'STREAM'} out AS {select};")[-1]
    lineage = query_lineage(sources.catalog, result.query_id, kafka_bootstrap="broker:9092")
    found = {f"{c.name.rsplit('/', 1)[-1]}.{c.column}:{c.transformation}" for c in lineage.columns[column]}
    assert found == inputs
    assert [name for name, _type in lineage.output.fields] == [c.name for c in sources.catalog.source("OUT").columns]


@pytest.mark.parametrize("bootstrap,namespace", [("broker:9092,other:9092", "kafka://broker:9092"), (None, "kafka")])
def test_datasets_are_named_as_openlineage_names_them(sources, tmp_path, bootstrap, namespace):
    result = sources.execute("CREATE STREAM big AS SELECT * FROM orders WHERE amount > 10;")[-1]
    lineage = query_lineage(sources.catalog, result.query_id, kafka_bootstrap=bootstrap)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [(namespace, "orders")]
    assert (lineage.output.namespace, lineage.output.name) == ("file", str(tmp_path / "topics" / "BIG"))
    assert lineage.inputs[0].fields == (("id", "INT"), ("amount", "DOUBLE"))


def test_a_version_keeps_the_statement_and_columns_it_had(sources):
    sources.execute("CREATE STREAM v AS SELECT id, cost FROM purchases;")
    sources.execute("CREATE OR REPLACE STREAM v AS SELECT id, cost, product FROM purchases;")
    first = query_lineage(sources.catalog, "CSAS_V_1", version=1)
    second = query_lineage(sources.catalog, "CSAS_V_1")
    assert (first.version, first.verdict, list(first.columns)) == (1, None, ["id", "cost"])
    assert (second.version, second.verdict, list(second.columns)) == (2, "IN_PLACE", ["id", "cost", "product"])
    assert "product" in second.sql and "product" not in first.sql


# -- the OpenLineage provider's events, from DAGs run with dag.test() ---------------------

RUN = """
import json, sys
from airflow.dag_processing.dagbag import BundleDagBag
bag = BundleDagBag(dag_folder=sys.argv[1], bundle_path=sys.argv[1])
for dag_id in sys.argv[2:]:
    run = bag.get_dag(dag_id).test()
    print("RESULT", json.dumps({"dag_id": dag_id, "state": str(run.state)}))
"""


@pytest.fixture(scope="module")
def openlineage(tmp_path_factory):
    """Run the create, upgrade and submit DAGs of tests/lineage_dags in a fresh Airflow
    (its own process: the OpenLineage listener is configured when Airflow starts) with the
    file transport; return the events and the submit task's Spark conf."""
    root = tmp_path_factory.mktemp("openlineage")
    events = root / "events.jsonl"
    home = root / "streamql"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{root}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(REPO, "tests", "lineage_dags"),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "streamql-tests",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events), "append": True}),
        # dag.test() runs tasks in this process; the listener's default fork cannot reach
        # its in-process supervisor for the connection, a thread can
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        "AIRFLOW_CONN_STREAMQL_DEFAULT": json.dumps(
            {"conn_type": "streamql", "extra": {"home": str(home), "kafka_bootstrap_servers": "broker:9092"}}),
        "AIRFLOW_CONN_SPARK_LINEAGE": json.dumps({"conn_type": "spark", "host": "local[1]"}),
    }
    env.pop("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST")  # the test session's bundles
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True,
                   timeout=300, cwd=root)
    out = subprocess.run([sys.executable, "-c", RUN, env["AIRFLOW__CORE__DAGS_FOLDER"], "lineage_create",
                          "lineage_upgrade", "lineage_shadow", "lineage_submit"],
                         env=env, capture_output=True, text=True, timeout=600, cwd=root)
    runs = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert [r["state"] for r in runs] == ["success"] * 4, out.stdout[-3000:] + out.stderr[-3000:]
    return {"events": [json.loads(line) for line in events.read_text().splitlines()], "home": home,
            "log": out.stdout + out.stderr}


def events_of(openlineage, job: str, kind: str) -> list[dict]:
    return [e for e in openlineage["events"] if e["job"]["name"] == job and e["eventType"] == kind]


def datasets(event, side: str) -> dict[str, dict]:
    return {d["name"].rsplit("/", 1)[-1]: d for d in event[side]}


def test_the_create_task_reports_the_pipeline_s_inputs_outputs_schema_and_column_lineage(openlineage):
    [complete] = events_of(openlineage, "lineage_create.create", "COMPLETE")
    inputs, outputs = datasets(complete, "inputs"), datasets(complete, "outputs")
    assert sorted(inputs) == ["PURCHASES", "VALID_PURCHASES"]
    assert sorted(outputs) == ["PURCHASE_STATS", "VALID_PURCHASES"]
    assert outputs["PURCHASE_STATS"]["namespace"] == "file"
    assert outputs["PURCHASE_STATS"]["name"] == str(openlineage["home"] / "topics" / "PURCHASE_STATS")
    schema = [(f["name"], f["type"]) for f in inputs["PURCHASES"]["facets"]["schema"]["fields"]]
    assert schema == [("id", "INT"), ("user", "STRING"), ("product", "STRING"), ("cost", "DOUBLE"), ("quantity", "INT")]
    stats = outputs["PURCHASE_STATS"]["facets"]
    assert [f["name"] for f in stats["schema"]["fields"]] == ["product", "purchases", "revenue"]
    revenue = stats["columnLineage"]["fields"]["revenue"]["inputFields"]
    assert {(f["name"].rsplit("/", 1)[-1], f["field"], f["transformations"][0]["subtype"]) for f in revenue} == {
        ("VALID_PURCHASES", "cost", "AGGREGATION"), ("VALID_PURCHASES", "quantity", "AGGREGATION")}
    valid = outputs["VALID_PURCHASES"]["facets"]["columnLineage"]["fields"]
    assert {c: [(f["field"], f["transformations"][0]["subtype"]) for f in v["inputFields"]] for c, v in valid.items()} == {
        c: [(c, "IDENTITY")] for c in ("id", "user", "product", "cost", "quantity")}
    assert "GROUP BY product" in complete["job"]["facets"]["sql"]["query"]
    facet = complete["run"]["facets"]["streamql"]
    assert facet["processingType"] == "STREAMING"
    assert [(q["queryId"], q["version"]) for q in facet["queries"]] == [
        ("CSAS_VALID_PURCHASES_1", 1), ("CTAS_PURCHASE_STATS_2", 1)]


def test_each_query_version_is_a_streaming_run_whose_parent_is_the_task(openlineage):
    [task_start] = events_of(openlineage, "lineage_create.create", "START")
    [start] = events_of(openlineage, "streamql.default.CSAS_VALID_PURCHASES_1", "START")[:1]
    assert start["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert start["job"]["namespace"] == "streamql-tests"
    parent = start["run"]["facets"]["parent"]
    assert (parent["job"]["name"], parent["run"]["runId"]) == ("lineage_create.create", task_start["run"]["runId"])
    assert parent["root"]["job"]["name"] == "lineage_create"
    assert [d["name"].rsplit("/", 1)[-1] for d in start["outputs"]] == ["VALID_PURCHASES"]


def test_the_upgrade_task_ends_the_old_version_s_run_and_starts_the_new_one(openlineage):
    [complete] = events_of(openlineage, "lineage_upgrade.upgrade", "COMPLETE")
    [query] = complete["run"]["facets"]["streamql"]["queries"]
    assert (query["queryId"], query["version"], query["verdict"]) == ("CSAS_VALID_PURCHASES_1", 2, "IN_PLACE")
    assert "WHERE cost > 0" in complete["job"]["facets"]["sql"]["query"]
    assert sorted(datasets(complete, "outputs")) == ["VALID_PURCHASES"]
    job = "streamql.default.CSAS_VALID_PURCHASES_1"
    starts, ended = events_of(openlineage, job, "START"), events_of(openlineage, job, "COMPLETE")
    assert [s["run"]["facets"]["streamql"]["queries"][0]["version"] for s in starts[:2]] == [1, 2]
    assert ended[0]["run"]["runId"] == starts[0]["run"]["runId"] != starts[1]["run"]["runId"]
    assert "quantity > 0" in ended[0]["job"]["facets"]["sql"]["query"]


def test_a_shadow_is_a_run_of_its_own_until_promoted(openlineage):
    [shadow_task] = events_of(openlineage, "lineage_shadow.shadow", "COMPLETE")
    [query] = shadow_task["run"]["facets"]["streamql"]["queries"]
    shadow_job = f"streamql.default.{query['queryId']}"
    assert query["queryId"].startswith("CSAS_VALID_PURCHASES_SHADOW_") and query["sink"] == "VALID_PURCHASES_SHADOW"
    [shadow_start], [shadow_end] = events_of(openlineage, shadow_job, "START"), events_of(openlineage, shadow_job, "COMPLETE")
    assert shadow_end["run"]["runId"] == shadow_start["run"]["runId"]
    assert shadow_end["run"]["facets"]["parent"]["job"]["name"] == "lineage_shadow.promote"
    # promoted: version 2's run ends, version 3 (the shadow's definition) starts on the live query
    job = "streamql.default.CSAS_VALID_PURCHASES_1"
    starts, ended = events_of(openlineage, job, "START"), events_of(openlineage, job, "COMPLETE")
    assert [s["run"]["facets"]["streamql"]["queries"][0]["version"] for s in starts] == [1, 2, 3]
    assert [e["run"]["runId"] for e in ended] == [starts[0]["run"]["runId"], starts[1]["run"]["runId"]]
    assert "cost > 1" in starts[2]["job"]["facets"]["sql"]["query"]
    [promote] = events_of(openlineage, "lineage_shadow.promote", "COMPLETE")
    [(promoted)] = promote["run"]["facets"]["streamql"]["queries"]
    assert (promoted["queryId"], promoted["version"]) == ("CSAS_VALID_PURCHASES_1", 3)


def test_a_submitted_runtime_gets_the_task_as_its_openlineage_parent_and_the_kafka_servers(openlineage):
    [start] = events_of(openlineage, "lineage_submit.submit_runtime", "START")
    conf = json.loads(next(line for line in openlineage["log"].splitlines() if line.startswith("CONF "))[5:])
    assert conf["spark.openlineage.parentJobName"] == "lineage_submit.submit_runtime"
    assert conf["spark.openlineage.parentRunId"] == start["run"]["runId"]
    assert conf["spark.openlineage.parentJobNamespace"] == "streamql-tests"
    assert conf["spark.streamql.kafka.bootstrap.servers"] == "broker:9092"
