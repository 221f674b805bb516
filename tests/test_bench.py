"""The benchmarks (bench/, whose commands docs/benchmarks.md gives) load against the package
as it is: a name that moves in the package moves in them too. When WHOLE_RECORDS moved to
runtime/schemas.py, three benchmarks and the Flink peer failed at their imports, and no test
said so.

Every script is loaded (its imports run, not its ``main``) in one process of its own, as
``python bench/<script>.py`` loads it: with its folder, and bench/, first on the path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
#: scripts that do their work as they load, each run elsewhere
NOT_LOADED = {
    "submit_query.py": "a spark-submit application: it runs its query as it loads",
    "flink_driver.py": "PyFlink's side, run in .venv-flink (bench/peers/setup-flink)",
}
SCRIPTS = sorted(p for p in BENCH.rglob("*.py") if p.name not in NOT_LOADED)

LOAD_EACH = """
import importlib.util, json, sys, traceback
failures = {}
saved = list(sys.path)
for path in sys.argv[1:]:
    sys.path[:0] = [path.rsplit("/", 1)[0], %(bench)r]
    spec = importlib.util.spec_from_file_location("bench_under_test" + path.replace("/", "_").replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up while it is made
    try:
        spec.loader.exec_module(module)
    except BaseException:
        failures[path] = traceback.format_exc(limit=3)
    sys.path[:] = saved  # as it was, whatever the script added (peers/flink.py adds bench/)
print(json.dumps(failures))
"""


@pytest.fixture(scope="module")
def failures() -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", LOAD_EACH % {"bench": str(BENCH)}, *map(str, SCRIPTS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(BENCH)))
def test_a_benchmark_loads(failures, script):
    assert str(script) not in failures, failures.get(str(script))
