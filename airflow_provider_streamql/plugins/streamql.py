"""The Airflow plugin: the Streaming queries page in the Airflow navigation, served by a
FastAPI app the API server mounts at /streamql.

Airflow registers a provider's plugin from its provider info (``plugins``) only when it
discovers providers eagerly (``[core] lazy_discover_providers = False``), and from the
``airflow.plugins`` entry point always. The entry point loads :data:`entry_point_plugin`,
which is the plugin only while discovery is lazy (Airflow's default): registered once
either way, never reported as registered twice.
"""

from __future__ import annotations

from airflow import settings
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


#: what the ``airflow.plugins`` entry point loads: the plugin, unless Airflow registers it
#: from the provider info (eager provider discovery); None is skipped by Airflow
entry_point_plugin = StreamQLPlugin if settings.LAZY_LOAD_PROVIDERS else None
