"""First result fast (issue 33 part 2): from ``streamql runtime`` to the first committed batch
of a trivial filter whose input is already there, with and without the driver's class archive
(runtime/class_archive.py), alternating, several rounds; medians and spread.

Each round makes a new home and SQLite catalog, declares a stream, inserts 100 rows and
creates ``CREATE STREAM f AS SELECT * FROM s WHERE cost > 0`` (no runtime yet: the query waits
in the catalog), then starts ``streamql runtime --master local[2]`` and times, from the
process's start, the moment the filter's first output row can be read (``SELECT * FROM f``, a
pull query on the committed output, every 50 ms). The runtime is then stopped (SIGTERM).

    .venv/bin/python bench/first_result.py --rounds 5

The archive must exist (``scripts/setup`` makes it; or ``python -m
airflow_provider_streamql.runtime.class_archive``). Run on a quiet machine: every Spark start
wants both cores.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SETUP = """
CREATE STREAM s (id INT KEY, user STRING, cost DOUBLE);
INSERT INTO s VALUES {rows};
CREATE STREAM f AS SELECT * FROM s WHERE cost > 0;
"""


def first_result(archive: bool, timeout: float = 120.0) -> float:
    from airflow_provider_streamql.engine import Engine

    with tempfile.TemporaryDirectory() as home:
        catalog = f"sqlite:///{home}/catalog.db"
        engine = Engine(catalog, home=f"{home}/topics", issuer="bench")
        rows = ", ".join(f"({n}, 'u{n % 7}', {n % 5 - 1})" for n in range(100))
        engine.execute(SETUP.format(rows=rows))
        env = {**os.environ}
        if not archive:
            env["STREAMQL_CLASS_ARCHIVE"] = "off"
        streamql = os.path.join(os.path.dirname(sys.executable), "streamql")
        argv = [streamql, "runtime", "--catalog", catalog, "--home", f"{home}/topics", "--master", "local[2]"]
        start = time.perf_counter()
        runtime = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while time.perf_counter() - start < timeout:
                if runtime.poll() is not None:
                    raise RuntimeError(f"the runtime ended (exit {runtime.returncode})")
                if engine.execute("SELECT * FROM f LIMIT 1")[0].rows:
                    return time.perf_counter() - start
                time.sleep(0.05)
            raise RuntimeError(f"no output in {timeout} s")
        finally:
            runtime.send_signal(signal.SIGTERM)
            runtime.wait(60)
            engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from airflow_provider_streamql.runtime import class_archive

    archive = class_archive.default_archive_path()
    if archive is None or not os.path.isfile(archive):
        sys.exit(f"no class archive at {archive}: python -m airflow_provider_streamql.runtime.class_archive makes it")
    times: dict[str, list[float]] = {"without the archive": [], "with the archive": []}
    for _ in range(args.rounds):
        times["without the archive"].append(first_result(False))
        times["with the archive"].append(first_result(True))
    print(f"| form | median | min | max | rounds: {args.rounds} |")
    print("|---|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} s | {min(values):.2f} s | {max(values):.2f} s | |")


if __name__ == "__main__":
    main()
