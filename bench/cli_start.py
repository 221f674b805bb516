"""The CLI's own cost (issue 33 part 4): the wall time of ``streamql exec "SHOW STREAMS"`` on
a SQLite catalog, beside a Python that does nothing, the import of the two libraries every
statement needs (SQLAlchemy for the catalog, sqlglot for the parser: the floor) and the import
of the CLI alone, each run as a new process, alternating, several rounds; medians and spread.
Also which heavy modules the CLI loads before any statement (a SHOW needs none of DuckDB,
Arrow, NumPy, PySpark).

    .venv/bin/python bench/cli_start.py --rounds 20

Run it with the checkout's code (``PYTHONPATH=$PWD``; every process runs in a temporary
folder, so ``python -c`` imports what PYTHONPATH names, not the current folder) on a quiet machine: the figures are
tens of milliseconds, and a busy core moves them by as much. The code's bytecode must be
compiled: with ``PYTHONDONTWRITEBYTECODE`` set, a checkout no run has compiled (a new git
worktree) compiles every module in every process, 0.13 s more here; ``python -m compileall``
it first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HEAVY = ("duckdb", "pyarrow", "numpy", "pyspark", "pandas")


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    python = sys.executable
    streamql = os.path.join(os.path.dirname(python), "streamql")
    with tempfile.TemporaryDirectory() as home:
        catalog = f"sqlite:///{home}/catalog.db"
        env = {**os.environ, "STREAMQL_HOME": home, "STREAMQL_CATALOG": catalog}
        show = [streamql, "exec", "SHOW STREAMS"]
        subprocess.run(show, env=env, check=True, stdout=subprocess.DEVNULL)  # the catalog is made once
        forms = {
            "python -c pass": [python, "-c", "pass"],
            # what every statement needs: its parser is built on sqlglot, the catalog on SQLAlchemy
            "import SQLAlchemy and sqlglot": [python, "-c", "import sqlalchemy, sqlglot"],
            "import the CLI": [python, "-c", "import airflow_provider_streamql.cli"],
            'streamql exec "SHOW STREAMS"': show,
        }
        times: dict[str, list[float]] = {name: [] for name in forms}
        for _ in range(args.rounds):
            for name, argv in forms.items():
                times[name].append(timed(argv, env, home))
        probe = f"import sys, airflow_provider_streamql.cli; print([m for m in {HEAVY!r} if m in sys.modules])"
        loaded = subprocess.run([python, "-c", probe], env=env, cwd=home, check=True, capture_output=True, text=True)
    print(f"| form | median | min | max | rounds: {args.rounds} |")
    print("|---|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} s | {min(values):.3f} s | {max(values):.3f} s | |")
    print(f"heavy modules the CLI loads before any statement: {loaded.stdout.strip()}")


if __name__ == "__main__":
    main()
