"""The docker-compose stack, checked without a Docker engine: the file against the compose
specification, every service, volume and file it references, the pipeline it deploys and
the connections it gives Airflow."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from .conftest import REPO

COMPOSE = os.path.join(REPO, "docker-compose.yaml")


@pytest.fixture(scope="module")
def compose():
    with open(COMPOSE) as f:
        return yaml.safe_load(f)


def test_the_file_follows_the_compose_specification():
    checker = os.path.join(os.path.dirname(sys.executable), "check-jsonschema")
    result = subprocess.run([checker, "--builtin-schema", "vendor.compose-spec", COMPOSE],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_reference_resolves(compose):
    services, volumes = compose["services"], compose.get("volumes", {})
    assert {"airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
            "postgres", "spark-master", "spark-worker", "kafka", "runtime"} <= set(services)
    for name, service in services.items():
        depends = service.get("depends_on", [])
        assert set(depends) <= set(services), f"{name} depends on a service that does not exist"
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith((".", "/")):
                assert os.path.exists(os.path.join(REPO, source)), f"{name} mounts missing {source}"
            else:
                assert source in volumes, f"{name} mounts undeclared volume {source}"
        assert "image" in service and ":" in service["image"], f"{name} pins no image tag"


def test_the_stack_deploys_a_valid_pipeline_with_usable_connections(compose, tmp_path):
    from airflow.models.connection import Connection

    from airflow_provider_streamql.engine import Engine
    from airflow_provider_streamql.hooks.streamql import StreamQLHook
    env = compose["services"]["airflow-scheduler"]["environment"]
    deploy_file = env["STREAMQL_DEPLOY_FILE"].replace("/opt/streamql", REPO)
    plan = Engine(f"sqlite:///{tmp_path}/c.db", home=str(tmp_path)).plan(open(deploy_file).read())
    assert [(i.action, i.name) for i in plan.items] == [
        ("create", "PURCHASES"), ("create", "VALID_PURCHASES"), ("create", "PURCHASE_STATS")]
    streamql = Connection(conn_id="streamql_default", **json.loads(env["AIRFLOW_CONN_STREAMQL_DEFAULT"]))
    settings = StreamQLHook.settings(streamql)
    assert settings["catalog"] == "postgresql+psycopg://streamql:streamql@postgres:5432/streamql"
    assert (settings["home"], settings["pipeline"], settings["spark_conn_id"]) == (
        "/data/streamql", "ksqlmart", "spark_cluster")
    spark = json.loads(env["AIRFLOW_CONN_SPARK_CLUSTER"])
    assert (spark["host"], spark["port"]) == ("spark://spark-master", 7077)
    runtime = compose["services"]["runtime"]["command"]
    assert "/opt/streamql/airflow_provider_streamql/runtime/main.py" in runtime
    assert os.path.exists(os.path.join(REPO, "airflow_provider_streamql", "runtime", "main.py"))
    assert "--pipeline ksqlmart" in runtime and "spark.streamql.kafka.bootstrap.servers=kafka:9092" in runtime
