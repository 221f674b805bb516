"""Pull queries: the embedded DuckDB path vs the sqlglot Python executor it replaced.

    .venv/bin/python bench/pull_queries.py [--rows 1000000] [--files 4] [--runs 5] [--old-runs 1]

Writes ``--rows`` records of a declared JSON stream directly with ``topics.append`` (a few
large files), then runs each query through ``Engine.execute`` (parse, analyse, catalog
read, pull query: what a user waits for) once per engine and query in a fresh child process:
  * wall time: the median of the child's runs (the first run included);
  * peak memory: the child's ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end, and
    its growth over the child's own peak before the first query (Python, the engine and the
    catalog loaded), so native memory (DuckDB, pyarrow) counts too.
The old path is a copy of the former ``pull.run_pull_query``, kept only here as the
baseline; the child swaps it in for the new one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

QUERIES = {
    "COUNT(*)": "SELECT COUNT(*) AS n FROM big",
    "key lookup": "SELECT id, user, cost FROM big WHERE id = 765432",
    "GROUP BY": "SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM big GROUP BY user",
}


def old_run_pull_query(select, sources, analysis, *_bounds):
    """The former pull path: rows read in Python, sqlglot's Python executor (baseline only;
    it takes, and ignores, the limits and notes the planner passes now)."""
    from sqlglot.errors import ExecuteError
    from sqlglot.executor import execute

    from airflow_provider_streamql.errors import ValidationError
    from airflow_provider_streamql.language.dialect import DIALECT
    from airflow_provider_streamql.storage import topics

    def source_rows(src):
        if src.kind == "TABLE":
            return topics.read_table(src.path, src.format, src.columns, src.key_columns)
        return topics.read_stream(src.path, src.format, src.columns)

    tables = {name: source_rows(src) for name, src in sources.items()}
    schema = {name: {c.name: c.type for c in src.columns} for name, src in sources.items()}
    try:
        table = execute(select.sql(dialect=DIALECT), schema=schema, dialect=DIALECT, tables=tables)
    except ExecuteError as e:
        raise ValidationError(f"pull query failed: {e}") from None
    return [c.name for c in analysis.columns], [list(r) for r in table.rows]


def prepare(home: str, rows: int, files: int) -> None:
    from airflow_provider_streamql.engine import Engine
    from airflow_provider_streamql.storage import topics

    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute("CREATE STREAM big (id INT KEY, user STRING, cost DOUBLE)")
    src = engine.catalog.source("BIG")
    per_file = rows // files
    for f in range(files):
        batch = (
            {"id": i, "user": f"u{i % 1000}", "cost": (i % 200) - 50.5} for i in range(f * per_file, (f + 1) * per_file)
        )
        topics.append(src.path, "JSON", src.columns, batch, name=f"part-{f:05d}")
    engine.close()


def child(home: str, which: str, query: str, runs: int) -> None:
    """One engine, one query, ``runs`` times; prints a JSON line."""
    from airflow_provider_streamql.engine import Engine
    from airflow_provider_streamql.storage import pull

    if which == "old":
        pull.run_pull_query = old_run_pull_query  # the planner imports it at call time
    engine = Engine(f"sqlite:///{home}/catalog.db", home=home)
    engine.execute("SHOW STREAMS")  # catalog opened, modules imported
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times, rows = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        rows = engine.execute(QUERIES[query])[0].rows
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer = sorted((r[0], r[1], round(r[2], 6)) if len(r) == 3 and isinstance(r[2], float) else tuple(r) for r in rows)
    print(
        json.dumps(
            {
                "times": times,
                "peak_kib": peak,
                "base_kib": base,
                "answer": answer[:5],
                "n_rows": len(rows),
                "answer_hash": hashlib.sha256(json.dumps(answer).encode()).hexdigest(),
            }
        )
    )


def run_child(home: str, which: str, query: str, runs: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", which, "--home", home, "--query", query, "--runs", str(runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5, help="runs of the DuckDB path per query")
    parser.add_argument("--old-runs", type=int, default=1, help="runs of the old executor per query")
    parser.add_argument("--child", choices=["old", "new"])
    parser.add_argument("--home")
    parser.add_argument("--query")
    args = parser.parse_args()
    if args.child:
        child(args.home, args.child, args.query, args.runs)
        return
    home = tempfile.mkdtemp(prefix="bench-pull-")
    t0 = time.perf_counter()
    prepare(home, args.rows, args.files)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(home, "topics")) for f in fs)
    print(
        f"{args.rows:,} rows in {args.files} JSON files ({size / 2**20:.0f} MiB), written in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    print("| query | engine | runs | median | min | max | peak RSS | growth |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for query in QUERIES:
        results = {}
        for which, runs in (("new", args.runs), ("old", args.old_runs)):
            r = results[which] = run_child(home, which, query, runs)
            t = r["times"]
            print(
                f"| {query} | {which} | {runs} | {statistics.median(t):.3f} s | {min(t):.3f} s | "
                f"{max(t):.3f} s | {r['peak_kib'] / 1024:.0f} MiB | "
                f"{(r['peak_kib'] - r['base_kib']) / 1024:.0f} MiB |",
                flush=True,
            )
        same = results["new"]["answer_hash"] == results["old"]["answer_hash"]
        speedup = statistics.median(results["old"]["times"]) / statistics.median(results["new"]["times"])
        summary[query] = (
            speedup,
            results["old"]["peak_kib"] / results["new"]["peak_kib"],
            same,
            results["new"]["answer"],
        )
    print()
    for query, (speedup, memory, same, answer) in summary.items():
        print(
            f"{query}: {speedup:.0f}x faster, {memory:.1f}x less peak memory, same answer: {same} "
            f"(first rows {answer[:2]})"
        )


if __name__ == "__main__":
    main()
