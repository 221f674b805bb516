"""Running DAGs with dag.test() in the tests and reading what their tasks left behind."""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import select

from .conftest import REPO
from .support import wait_until

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


class Reviewer(threading.Thread):
    """A person answering a human-in-the-loop task while ``dag.test()`` waits for it: once
    ``task_id`` of a run of ``dag_id`` waits for input, reads the request and answers ``option``
    through Airflow's REST API route for HITL details (the one the Required Actions page calls),
    in-process, signed in as ``user``. ``before`` runs between reading and answering. If anything
    fails, the waiting task is failed, so the run ends instead of waiting forever."""

    def __init__(self, dag_id: str, task_id: str, option: str, *, user: str = "reviewer",
                 before: Callable[[], Any] | None = None, timeout: float = 120) -> None:
        super().__init__(name=f"reviewer-{dag_id}", daemon=True)
        self.dag_id, self.task_id, self.option, self.user = dag_id, task_id, option, user
        self.before, self.timeout = before, timeout
        self.shown: dict[str, Any] = {}  # the request as the reviewer read it
        self.recorded: dict[str, Any] = {}  # the answer as Airflow recorded it
        self.error: BaseException | None = None
        self.run_over = threading.Event()  # set by answered(): stop waiting for a question

    def run(self) -> None:
        from airflow.api_fastapi.app import create_app, get_auth_manager
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from fastapi.testclient import TestClient

        def waiting() -> TaskInstance | None:
            assert not self.run_over.is_set(), f"the run ended before {self.task_id} waited for input"
            with create_session() as session:
                return session.scalars(select(TaskInstance).where(
                    TaskInstance.dag_id == self.dag_id, TaskInstance.task_id == self.task_id,
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT)).first()
        try:
            ti = wait_until(waiting, self.timeout, f"{self.task_id} to wait for input")
            client = TestClient(create_app("core"))
            token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=self.user, role="admin"))
            headers = {"Authorization": f"Bearer {token}"}
            url = f"/api/v2/dags/{self.dag_id}/dagRuns/{ti.run_id}/taskInstances/{self.task_id}/-1/hitlDetails"
            shown = client.get(url, headers=headers)
            assert shown.status_code == 200, shown.text
            self.shown = shown.json()
            if self.before is not None:
                self.before()
            answered = client.patch(url, headers=headers, json={"chosen_options": [self.option]})
            assert answered.status_code == 200, answered.text
            self.recorded = answered.json()
        except BaseException as e:  # noqa: BLE001  (re-raised by answered())
            self.error = e
            with create_session() as session:
                for stuck in session.scalars(select(TaskInstance).where(
                        TaskInstance.dag_id == self.dag_id,
                        TaskInstance.state == TaskInstanceState.AWAITING_INPUT)):
                    stuck.state = TaskInstanceState.FAILED

    def answered(self) -> dict[str, Any]:
        """What the reviewer was shown (the HITL detail: subject, body, options, ...), once
        the run is over."""
        self.run_over.set()
        self.join(30)
        if self.error is not None:
            raise self.error
        return self.shown

