"""A runtime's metrics endpoint, scraped as Prometheus would: per-query series from Spark's
last micro-batch and from the catalog, for a real runtime running real queries."""
import re
import urllib.error
import urllib.request

import pytest

from .support import insert, wait_until

SOURCES = """
CREATE STREAM clicks (user STRING, n INT) WITH (value_format='JSON');
CREATE STREAM big AS SELECT * FROM clicks WHERE n > 1;
CREATE TABLE per_user AS SELECT user, COUNT(*) AS c FROM clicks GROUP BY user;
"""
SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-z_]+ ", line), line
            continue
        match = SAMPLE.match(line)
        assert match, f"not a Prometheus sample: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        samples[(match["name"], labels)] = float(match["value"])
    return samples


def series(samples, name, **labels):
    return {k: v for k, v in samples.items() if k[0] == name and set(labels.items()) <= k[1]}


@pytest.mark.spark
def test_the_runtime_serves_per_query_series(sqlite_engine, runtimes):
    engine = sqlite_engine
    engine.execute(SOURCES)
    runtime = runtimes.start(engine, metrics_port=0)
    port = runtime.metrics.port
    insert(engine, "clicks", [("ann", 1), ("ann", 5), ("bob", 3)])
    for query in ("CSAS_BIG_1", "CTAS_PER_USER_2"):
        engine.wait_caught_up(query, timeout=90)
    wait_until(lambda: all(q in runtime.listener.latest for q in ("CSAS_BIG_1", "CTAS_PER_USER_2")), 60,
               "progress of both queries")
    samples = scrape(port)
    assert series(samples, "streamql_runtime_up") == {
        ("streamql_runtime_up", frozenset({("pipeline", "default"), ("runtime", runtime.id)})): 1.0}
    for query in ("CSAS_BIG_1", "CTAS_PER_USER_2"):
        states = series(samples, "streamql_query_state", query=query)
        assert {dict(k[1])["state"] for k, v in states.items() if v == 1} == {"RUNNING"}
        for name in ("streamql_query_input_rows_per_second", "streamql_query_processed_rows_per_second",
                     "streamql_query_batch_duration_seconds", "streamql_query_last_batch",
                     "streamql_query_bad_records", "streamql_query_lag_files"):
            assert len(series(samples, name, query=query, pipeline="default")) == 1, (name, query)
        assert series(samples, "streamql_query_lag_files", query=query) == {
            ("streamql_query_lag_files", frozenset({("query", query), ("pipeline", "default")})): 0.0}
    state_rows = series(samples, "streamql_query_state_rows", query="CTAS_PER_USER_2")
    assert list(state_rows.values()) == [2.0]  # ann and bob

    engine.execute("PAUSE CSAS_BIG_1")
    engine.wait_for_state("CSAS_BIG_1", "PAUSED", timeout=60)
    insert(engine, "clicks", [("cy", 9)])
    engine.wait_caught_up("CTAS_PER_USER_2", timeout=90)
    samples = scrape(port)
    paused = series(samples, "streamql_query_state", query="CSAS_BIG_1", state="PAUSED")
    assert list(paused.values()) == [1.0]
    assert list(series(samples, "streamql_query_lag_files", query="CSAS_BIG_1").values()) == [1.0]
    assert list(series(samples, "streamql_query_lag_records", query="CSAS_BIG_1").values()) == [1.0]

    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
    assert missing.value.code == 404
