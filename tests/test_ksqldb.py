"""ksqlDB compatibility: ksqlDB statements, their input and the output ksqlDB gives, run
against a real runtime. The cases live in ``tests/ksqldb/cases_*.py``, one module per
capability; all queries of a module run in one runtime (see :mod:`tests.ksqldb.harness`)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import time

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.storage.topics import FORMATS

from . import ksqldb
from .conftest import RuntimeThreads
from .ksqldb.harness import Case, normalised

MODULES = {
    name: importlib.import_module(f"{ksqldb.__name__}.{name}")
    for _, name, _ in sorted(pkgutil.iter_modules(ksqldb.__path__))
    if name.startswith("cases_")
}
#: how long a case's output may take to reach the expected rows after its query caught up
SETTLE_SECONDS = 20.0
PARAMS = [
    pytest.param(name, case, id=f"{name[6:]}-{case.name}") for name, module in MODULES.items() for case in module.CASES
]


def produce(engine: Engine, source: str, lines: list[str]) -> None:
    """Records as a producer writes them (a value INSERT VALUES cannot spell: a STRUCT, an
    ARRAY, raw text): one whole file of ``lines`` in ``source``'s topic."""
    path = engine.catalog.source(source.upper()).path
    suffix = FORMATS[engine.catalog.source(source.upper()).format][1]
    with open(f"{path}/.records{suffix}.tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(f"{path}/.records{suffix}.tmp", f"{path}/records{suffix}")


class World:
    """One case module's sources, input and queries in one engine served by one runtime."""

    def __init__(self, module, spark, path):
        home = path / "home"
        home.mkdir()
        self.engine = Engine(f"sqlite:///{path}/catalog.db", home=str(home), issuer="test")
        self.outcomes: dict[str, Exception | None] = {}
        self.engine.execute(module.SOURCES)
        for source, lines in getattr(module, "RECORDS", {}).items():
            produce(self.engine, source, lines)
        for statement in getattr(module, "INPUTS", []):
            self.engine.execute(statement)
        query_ids = []
        for case in module.CASES:
            try:
                results = self.engine.execute(case.sql)
            except Exception as e:  # each case reports its own refusal or failure
                self.outcomes[case.name] = e
                continue
            self.outcomes[case.name] = None
            query_ids += [r.query_id for r in results if r.query_id and r.action == "created"]
        self.runtimes = RuntimeThreads(spark)
        if query_ids:
            self.runtimes.start(self.engine)
            for query_id in query_ids:
                self.engine.wait_caught_up(query_id, timeout=120)

    def close(self) -> None:
        self.runtimes.stop_all()
        self.engine.close()


@pytest.fixture(scope="module")
def worlds(spark, tmp_path_factory):
    """The world of a case module, built when its first case runs; the previous module's
    runtime stops first (cases are ordered module by module)."""
    built: dict[str, World] = {}

    def get(name: str) -> World:
        if name not in built:
            for other in built.values():
                other.close()
            built.clear()
            built[name] = World(MODULES[name], spark, tmp_path_factory.mktemp(name))
        return built[name]

    yield get
    for world in built.values():
        world.close()


@pytest.mark.parametrize("module, case", PARAMS)
def test_ksqldb_case(worlds, module: str, case: Case):
    world = worlds(module)
    error = world.outcomes[case.name]
    if case.refused is not None:
        assert error is not None, f"{case.sql!r} should be refused ({case.refused!r})"
        assert case.refused in str(error)
        return
    assert error is None, f"{case.sql!r} was refused: {error}"
    if case.output is None:
        return
    result = world.engine.execute(f"SELECT * FROM {case.output}")[0]
    if case.columns is not None:
        assert [c.upper() for c in result.columns] == [c.upper() for c in case.columns]
    # rows a watermark releases (outer joins, EMIT FINAL) come in Spark's next batch, which
    # runs without new input after the input's batch committed: give it time to come
    deadline = time.monotonic() + SETTLE_SECONDS
    while normalised(result.rows) != normalised(case.rows) and time.monotonic() < deadline:
        time.sleep(0.2)
        result = world.engine.execute(f"SELECT * FROM {case.output}")[0]
    assert normalised(result.rows) == normalised(case.rows)
