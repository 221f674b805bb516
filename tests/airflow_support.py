"""Running DAGs with dag.test() in the tests and reading what their tasks left behind."""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .conftest import REPO

DAGS = Path(REPO, "dags")
TEST_DAGS = Path(REPO, "tests", "dags")


@cache
def dag_bag(path: Path):
    from airflow.dag_processing.dagbag import BundleDagBag
    return BundleDagBag(dag_folder=path, bundle_path=path)


@dataclass
class Run:
    """A finished dag run: task states, XCom, and the task logs printed while it ran."""

    dag_id: str
    run_id: str
    state: str
    states: dict[str, str]
    log: str

    def xcom(self, task_id: str, key: str = "return_value") -> Any:
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        with create_session() as session:
            row = session.scalars(XComModel.get_many(run_id=self.run_id, key=key, task_ids=task_id,
                                                     dag_ids=self.dag_id)).first()
            return XComModel.deserialize_value(row) if row is not None else None


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run_dag(dag_id: str, capfd, *, example: bool = False, **conf: Any) -> Run:
    """Run a DAG (an example DAG from dags/, else a test DAG) with dag.test(). Task logs
    reach stdout or the logging module depending on when Airflow configured logging in
    this process; the run's log collects both."""
    dag = dag_bag(DAGS if example else TEST_DAGS).get_dag(dag_id)
    assert dag is not None, f"no DAG {dag_id!r}"
    capfd.readouterr()
    collected = _Lines()
    logging.getLogger().addHandler(collected)
    try:
        dr = dag.test(run_conf=conf)
    finally:
        logging.getLogger().removeHandler(collected)
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    log = capfd.readouterr().out + "\n".join(collected.lines)
    return Run(dag_id, dr.run_id, str(dr.state), states, log)


def streamql_connection(catalog: str, home: str, **extra: Any) -> str:
    """A streamql connection as Airflow reads it from AIRFLOW_CONN_<ID>."""
    return json.dumps({"conn_type": "streamql", "extra": {"catalog": catalog, "home": home, **extra}})


def set_connection(monkeypatch, conn_id: str, value: str | None) -> None:
    name = f"AIRFLOW_CONN_{conn_id.upper()}"
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)
    assert (os.environ.get(name) is None) == (value is None)
