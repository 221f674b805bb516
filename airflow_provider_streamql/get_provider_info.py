"""What Airflow's providers manager reads about this package (entry point
``apache_airflow_provider``). Plain data: importing it imports nothing of Airflow."""

from __future__ import annotations

from typing import Any

from . import __version__

TEXT = {"type": ["string", "null"]}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-streamql",
        "name": "StreamQL",
        "description": "ksqlDB-style persistent queries on Spark Structured Streaming: create, "
        "validate, upgrade in place, pause and resume them from Airflow.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "StreamQL",
                "external-doc-url": "https://github.com/streamql/airflow-provider-streamql",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "StreamQL",
                "python-modules": [
                    "airflow_provider_streamql.operators.queries",
                    "airflow_provider_streamql.operators.deploys",
                    "airflow_provider_streamql.operators.runtime",
                    "airflow_provider_streamql.operators.snapshots",
                    "airflow_provider_streamql.operators.shadows",
                    "airflow_provider_streamql.operators.rates",
                ],
            }
        ],
        "sensors": [{"integration-name": "StreamQL", "python-modules": ["airflow_provider_streamql.sensors.queries"]}],
        "hooks": [{"integration-name": "StreamQL", "python-modules": ["airflow_provider_streamql.hooks.streamql"]}],
        "triggers": [
            {
                "integration-name": "StreamQL",
                "python-modules": [
                    "airflow_provider_streamql.triggers.streamql",
                    "airflow_provider_streamql.triggers.events",
                ],
            }
        ],
        "asset-uris": [
            {
                "schemes": ["streamql"],
                "handler": "airflow_provider_streamql.assets.streamql.sanitize_uri",
                "factory": "airflow_provider_streamql.assets.streamql.create_asset",
                "to_openlineage_converter": "airflow_provider_streamql.assets.streamql.convert_asset_to_openlineage",
            }
        ],
        "plugins": [{"name": "streamql", "plugin-class": "airflow_provider_streamql.plugins.streamql.StreamQLPlugin"}],
        "config": {
            "streamql": {
                "description": "Defaults for the streamql operators' waits (each operator may override them).",
                "options": {
                    "wait_timeout": {
                        "description": "Seconds an operator waits for its change to take effect (a query "
                        "running, a version ready, a query paused) before the task fails.",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "1800",
                        "default": "600",
                    },
                    "poll_interval": {
                        "description": "Seconds between looks at the catalog while an operator waits, in "
                        "the worker or deferred to the triggerer.",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "5",
                        "default": "2",
                    },
                },
            }
        },
        "extra-links": [
            "airflow_provider_streamql.operators.links.StreamQLQueryLink",
            "airflow_provider_streamql.operators.links.SparkUILink",
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_provider_streamql.hooks.streamql.StreamQLHook",
                "hook-name": "StreamQL",
                "connection-type": "streamql",
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port", "extra"],
                    "relabeling": {"login": "Catalog user", "password": "Catalog password"},
                    # Airflow's connection form shows placeholders on its standard fields only
                    "placeholders": {
                        "login": "streamql",
                        "password": "the catalog user's password",
                        "description": "the catalog and home of the pipelines these DAGs manage",
                    },
                },
                "conn-fields": {
                    "catalog": {
                        "label": "Catalog URL",
                        "schema": TEXT,
                        "description": "SQLAlchemy URL of the streamql catalog, e.g. "
                        "postgresql+psycopg://streamql@db:5432/streamql; the password goes in the "
                        "Password field. Empty: SQLite under the home directory.",
                    },
                    "home": {
                        "label": "Home directory",
                        "schema": TEXT,
                        "description": "Where file topics and checkpoints live; every runtime must reach it.",
                    },
                    "pipeline": {
                        "label": "Default pipeline",
                        "schema": TEXT,
                        "description": "Pipeline that operators act on when they name none.",
                    },
                    "spark_conn_id": {
                        "label": "Spark connection",
                        "schema": TEXT,
                        "description": "Spark connection SubmitRuntimeOperator submits runtimes through.",
                    },
                    "kafka_bootstrap_servers": {
                        "label": "Kafka bootstrap servers",
                        "schema": TEXT,
                        "description": "host:9092,... of the pipeline's Kafka topics: given to the runtimes "
                        "SubmitRuntimeOperator starts, and their namespace in OpenLineage (kafka://host:9092).",
                    },
                    "kafka_properties": {
                        "label": "Kafka client properties",
                        "schema": {"type": ["string", "null"], "format": "password"},
                        "description": "Kafka client settings for those runtimes, secrets included, as "
                        "key=value lines (sasl.jaas.config=..., ssl.truststore.password=...): passed to a "
                        "runtime in its environment or a file, never on its command line.",
                    },
                },
            }
        ],
    }
