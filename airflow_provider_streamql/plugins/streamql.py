"""The Airflow plugin (entry point ``airflow.plugins``): the Streaming queries page in the
Airflow navigation, served by a FastAPI app the API server mounts at /streamql."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from .app import app


class StreamQLPlugin(AirflowPlugin):
    """Adds "Streaming queries" to the Airflow UI: every query with its state, throughput,
    lag and last error, Pause and Resume buttons, and each query's versions."""

    name = "streamql"
    fastapi_apps = [{"app": app, "url_prefix": "/streamql", "name": "StreamQL"}]
    # with url_route the UI shows the page inside Airflow (an iframe); the href is relative
    # so that an Airflow served under a sub-path works too
    external_views = [
        {
            "name": "Streaming queries",
            "href": "streamql/",
            "url_route": "streamql",
            "destination": "nav",
            "nav_top_level": True,
        }
    ]
