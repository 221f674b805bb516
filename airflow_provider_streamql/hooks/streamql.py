"""StreamQLHook: an Airflow connection of type ``streamql`` -> the engine facade."""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError

from ..engine import Engine


class StreamQLHook(BaseHook):
    """Open the streamql catalog a connection describes and return :class:`Engine`.

    A ``streamql`` connection holds, in its extra fields:

    - ``catalog``: SQLAlchemy URL of the catalog database (PostgreSQL in production, e.g.
      ``postgresql+psycopg://streamql@db:5432/streamql``); its password goes in the
      connection's Password field, never in the URL. Empty: SQLite under ``home``.
    - ``home``: directory of file topics and checkpoints, reachable by every runtime
      (default ``$STREAMQL_HOME``).
    - ``pipeline``: the pipeline operators act on when they name none (default ``default``).
    - ``spark_conn_id``: the Spark connection runtimes are submitted through.
    - ``kafka_bootstrap_servers``: the Kafka cluster of the pipeline's Kafka topics
      (``host:9092,...``): given to runtimes this connection submits and to the engine
      (INSERT VALUES, PRINT and pull queries on topics), and the namespace of those topics in
      lineage (``kafka://host:9092``).
    - ``kafka_properties``: Kafka client properties for those runtimes and the engine, secrets included
      (``sasl.jaas.config=...`` lines, as Kafka's ``client.properties``; in a JSON extra also
      an object of settings). A password field in the form; they reach a runtime through its
      environment or a file, never its command line (see SubmitRuntimeOperator).

    :param streamql_conn_id: the connection to use.
    """

    conn_name_attr = "streamql_conn_id"
    default_conn_name = "streamql_default"
    conn_type = "streamql"
    hook_name = "StreamQL"

    #: extra fields shown in the connection form (see get_provider_info)
    EXTRA_FIELDS = ("catalog", "home", "pipeline", "spark_conn_id", "kafka_bootstrap_servers", "kafka_properties")

    def __init__(self, streamql_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streamql_conn_id = streamql_conn_id

    def get_conn(self) -> Engine:
        return self.get_engine()

    def get_engine(self, *, issuer: str | None = None, pipeline: str | None = None) -> Engine:
        """The engine for this connection; ``issuer`` is recorded in the command log."""
        try:
            conn = self.get_connection(self.streamql_conn_id)
        except AirflowNotFoundException:
            raise AirflowNotFoundException(
                f"Airflow connection {self.streamql_conn_id!r} does not exist; create a "
                f"connection of type 'streamql' (for the embedded default: "
                f"AIRFLOW_CONN_{self.streamql_conn_id.upper()}="
                f'\'{{"conn_type": "streamql", "extra": {{"home": "/path/to/.streamql"}}}}\')'
            ) from None
        return self.engine_for(conn, issuer=issuer, pipeline=pipeline)

    @classmethod
    def engine_for(cls, conn: Connection, *, issuer: str | None = None, pipeline: str | None = None) -> Engine:
        """The engine a ``streamql`` connection describes (also used by triggers, which
        fetch the connection themselves)."""
        settings = cls.settings(conn)
        # the connection's Kafka settings: INSERT VALUES, PRINT and pull queries on topics
        return Engine(
            settings["catalog"],
            home=settings["home"],
            pipeline=pipeline or settings["pipeline"],
            issuer=issuer,
            kafka_bootstrap_servers=settings["kafka_bootstrap_servers"],
            kafka_properties=settings["kafka_properties"],
        )

    @classmethod
    def settings(cls, conn: Connection) -> dict[str, Any]:
        """Catalog URL (with the connection's password), home, pipeline and Spark connection
        of ``conn``; raises naming what is wrong with it."""
        if conn.conn_type != cls.conn_type:
            raise AirflowException(
                f"connection {conn.conn_id!r} has type {conn.conn_type!r}; "
                f"streamql needs a connection of type 'streamql'"
            )
        extra = conn.extra_dejson
        # the form stores fields under their own names; older forms used extra__<type>__<name>
        field = lambda name: extra.get(name) or extra.get(f"extra__{cls.conn_type}__{name}") or None
        home = field("home") or os.environ.get("STREAMQL_HOME")
        if not home:
            raise AirflowException(
                f"connection {conn.conn_id!r} names no home directory (extra "
                f"field 'home', where topics and checkpoints live) and "
                f"$STREAMQL_HOME is not set"
            )
        catalog = field("catalog")
        if catalog:
            try:
                url = make_url(catalog)
            except (ArgumentError, ValueError):  # ValueError: a port that is not a number
                # shown masked: a malformed URL may still hold a password
                raise AirflowException(
                    f"connection {conn.conn_id!r}: catalog {Engine.safe_url(catalog)!r} is "
                    f"not a database URL (e.g. postgresql+psycopg://user@host/db)"
                ) from None
            if conn.password and url.password is None:
                url = url.set(password=conn.password)
            if conn.login and url.username is None:
                url = url.set(username=conn.login)
            catalog = url.render_as_string(hide_password=False)
        properties = field("kafka_properties")
        if isinstance(properties, dict):
            properties = Engine.render_kafka_properties(properties)
        elif properties is not None and not isinstance(properties, str):
            raise AirflowException(
                f"connection {conn.conn_id!r}: kafka_properties must be Kafka client properties "
                f"(text of key=value lines) or an object of settings, not {type(properties).__name__}"
            )
        return {
            "catalog": catalog,
            "home": home,
            "pipeline": field("pipeline"),
            "spark_conn_id": field("spark_conn_id"),
            "kafka_bootstrap_servers": field("kafka_bootstrap_servers"),
            "kafka_properties": properties,
        }
