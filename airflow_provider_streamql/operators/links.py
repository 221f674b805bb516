"""Extra links on streamql tasks: the query's page in the streamql UI and its runtime's
Spark UI. The worker computes them when the task finishes, from what the task pushed to
XCom (``query_id``, ``spark_ui_url``)."""

from __future__ import annotations

from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

#: where the streamql UI plugin serves a query's page, under the Airflow API server
QUERY_PAGE = "/streamql/queries/{query_id}"
#: the XCom keys the links read
LINK_KEYS = ("query_id", "spark_ui_url")


def _xcom(ti_key, key: str):
    from airflow.sdk.execution_time.xcom import XCom

    return XCom.get_value(ti_key=ti_key, key=key)


def plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value.startswith("airflow_provider_streamql") for ep in entry_points(group="airflow.plugins"))


class StreamQLQueryLink(BaseOperatorLink):
    """The task's query on the "Streaming queries" page (when the UI plugin is installed)."""

    name = "StreamQL query"

    def get_link(self, operator, *, ti_key) -> str:
        query_id = _xcom(ti_key, "query_id")
        if not query_id or query_id == "ALL" or not plugin_installed():
            return ""
        from airflow.sdk import conf

        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
        return base + QUERY_PAGE.format(query_id=quote(str(query_id)))


class SparkUILink(BaseOperatorLink):
    """The Spark UI of the runtime that runs the task's query."""

    name = "Spark UI"

    def get_link(self, operator, *, ti_key) -> str:
        return _xcom(ti_key, "spark_ui_url") or ""
