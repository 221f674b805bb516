"""streamql: ksqlDB-style persistent queries on Spark Structured Streaming, driven from Airflow.

The core (language, catalog, planner, runtime, :class:`Engine`, CLI) never imports Airflow.
"""

__version__ = "0.1.0"
