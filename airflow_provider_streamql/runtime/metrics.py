"""A runtime's queries in Prometheus' text format, served at ``/metrics``.

Two views in one scrape: what Spark reported for each query's last micro-batch in this
process (rates and batch duration, kept by the progress listener), and what the catalog
knows of every query of the pipeline (state, input and state totals, late and bad records,
input files not yet read). Spark's own metrics system (``spark.sql.streaming.metricsEnabled``
with its Prometheus servlet on the Spark UI) serves the JVM's view beside it; see
docs/observability.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..catalog import Catalog
from ..catalog.model import OBSERVED_STATES
from ..views.rows import query_rows

log = logging.getLogger(__name__)

#: name -> (type, help, what it reads): per query, from the catalog row (``row``), Spark's
#: last progress in this process (``spark``, None until a batch ran here) and the input
#: files not yet read (``lag``)
SERIES: dict[str, tuple[str, str, Callable[[dict, dict | None, int | None], Any]]] = {
    "streamql_query_input_rows_per_second": (
        "gauge",
        "Rows per second arriving at the query's sources, over its last micro-batch.",
        lambda row, spark, lag: spark and spark.get("inputRowsPerSecond"),
    ),
    "streamql_query_processed_rows_per_second": (
        "gauge",
        "Rows per second the query processed in its last micro-batch.",
        lambda row, spark, lag: spark and spark.get("processedRowsPerSecond"),
    ),
    "streamql_query_batch_duration_seconds": (
        "gauge",
        "How long the query's last micro-batch took, start to commit.",
        lambda row, spark, lag: spark and spark.get("batchDuration", 0) / 1000.0,
    ),
    "streamql_query_last_batch": (
        "gauge",
        "The id of the query's last committed micro-batch.",
        lambda row, spark, lag: row["last_batch"],
    ),
    "streamql_query_state_rows": (
        "gauge",
        "Rows in the query's state stores.",
        lambda row, spark, lag: row["state_rows"],
    ),
    "streamql_query_state_bytes": (
        "gauge",
        "Memory the query's state stores use.",
        lambda row, spark, lag: row["state_bytes"],
    ),
    "streamql_query_late_rows_total": (
        "counter",
        "Records dropped as later than the watermark, since the query started.",
        lambda row, spark, lag: row["late_rows"],
    ),
    "streamql_query_bad_records": (
        "gauge",
        "Records the query could not read (held, skipped, logged, failed).",
        lambda row, spark, lag: row["bad_records"],
    ),
    "streamql_query_expectation_violations": (
        "gauge",
        "Rows violating the query's expectation in its last micro-batch (WITH (expect=...)).",
        lambda row, spark, lag: row["violations"],
    ),
    "streamql_query_lag_files": (
        "gauge",
        "Input files of the query's file topics it has not read yet.",
        lambda row, spark, lag: lag,
    ),
    "streamql_query_lag_records": (
        "gauge",
        "Input records the query has not read yet, where its sources tell (file topics' JSON and CSV lines).",
        lambda row, spark, lag: row["lag_records"],
    ),
}


def exposition(catalog: Catalog, pipeline: str, latest: dict[str, dict], runtime_id: str) -> str:
    """The pipeline's queries as Prometheus text; ``latest``: query id -> Spark's last
    progress report of it in this process."""
    queries = catalog.queries(pipeline)
    rows = query_rows(catalog, queries)
    lines = [
        "# HELP streamql_runtime_up 1 while this runtime serves its pipeline.",
        "# TYPE streamql_runtime_up gauge",
        f"streamql_runtime_up{_labels(pipeline=pipeline, runtime=runtime_id)} 1",
        "# HELP streamql_query_state 1 for the state the query is in (RUNNING, PAUSED, ERROR, ...).",
        "# TYPE streamql_query_state gauge",
    ]
    for row in rows:
        for state in OBSERVED_STATES:
            labels = _labels(query=row["query_id"], pipeline=pipeline, state=state)
            lines.append(f"streamql_query_state{labels} {int(row['state'] == state)}")
    lags = {row["query_id"]: row["lag_files"] for row in rows}
    for name, (kind, help_text, read) in SERIES.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for row in rows:
            value = read(row, latest.get(row["query_id"]), lags[row["query_id"]])
            if value is not None:
                lines.append(f"{name}{_labels(query=row['query_id'], pipeline=pipeline)} {_number(value)}")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    """A sample value at full precision (whole numbers as integers)."""
    return str(value) if isinstance(value, int) else repr(float(value))


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricsServer:
    """``GET /metrics`` on ``host:port`` (port 0: any free one, see :attr:`port`), served on
    a thread of its own, without authentication, as Prometheus exporters are: it shows query
    IDs, states and counts, no SQL, paths or data."""

    def __init__(self, render: Callable[[], str], *, port: int, host: str = "0.0.0.0"):
        render_text = render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                try:
                    body = render_text().encode()
                except Exception as e:  # the catalog unreachable: say so, keep serving
                    log.exception("metrics scrape failed")
                    self.send_error(503, f"metrics unavailable: {type(e).__name__}")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # scrapes every few seconds: not logged
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="streamql-metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def series_names() -> Iterator[str]:
    """Every series a scrape may hold (for docs and tests)."""
    yield from ("streamql_runtime_up", "streamql_query_state", *SERIES)
