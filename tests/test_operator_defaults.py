"""Operators and sensors wait in the triggerer as ``[operators] default_deferrable`` says,
as every provider's do (true where a configuration has no such option); an argument wins."""
import pytest

from airflow_provider_streamql.operators.queries import CreateQueryOperator
from airflow_provider_streamql.sensors.queries import QueryStateSensor

ENV = "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"

# (deferrable=..., the deployment's [operators] default_deferrable, deferrable)
CASES = [
    (None, "False", False),  # Airflow's shipped default
    (None, "true", True),
    (True, "False", True),
    (False, "True", False),
]
BUILD = {
    "operator": lambda **kw: CreateQueryOperator(task_id="t", sql="CREATE STREAM s (id INT)", **kw),
    "sensor": lambda **kw: QueryStateSensor(task_id="t", query_id="CSAS_S_1", **kw),
}


@pytest.mark.parametrize("kind", BUILD)
@pytest.mark.parametrize("argument, setting, deferrable", CASES)
def test_deferrable_by_default(monkeypatch, kind, argument, setting, deferrable):
    monkeypatch.setenv(ENV, setting)
    task = BUILD[kind](**({} if argument is None else {"deferrable": argument}))
    assert task.deferrable is deferrable


# ([streamql] wait_timeout and poll_interval set by the deployment, arguments, what the operator uses)
WAITS = [
    ({}, {}, (600.0, 2.0)),
    ({"AIRFLOW__STREAMQL__WAIT_TIMEOUT": "1800", "AIRFLOW__STREAMQL__POLL_INTERVAL": "5"}, {}, (1800.0, 5.0)),
    ({"AIRFLOW__STREAMQL__WAIT_TIMEOUT": "1800"}, {"timeout": 30, "poll_interval": 0.5}, (30, 0.5)),
]


@pytest.mark.parametrize("settings, arguments, waits", WAITS)
def test_wait_defaults_come_from_the_streamql_section(monkeypatch, settings, arguments, waits):
    for key in ("AIRFLOW__STREAMQL__WAIT_TIMEOUT", "AIRFLOW__STREAMQL__POLL_INTERVAL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    task = BUILD["operator"](**arguments)
    assert (task.timeout, task.poll_interval) == waits


# a bad wait, from an argument or the deployment's [streamql] section: refused, naming it
BAD_WAITS = [
    ({"AIRFLOW__STREAMQL__WAIT_TIMEOUT": "-5"}, {}, "[streamql] wait_timeout must be a positive number of seconds, not -5.0"),
    ({"AIRFLOW__STREAMQL__WAIT_TIMEOUT": "nan"}, {}, "[streamql] wait_timeout must be a positive number"),
    ({"AIRFLOW__STREAMQL__POLL_INTERVAL": "inf"}, {}, "[streamql] poll_interval must be a positive number"),
    ({}, {"timeout": 0}, "timeout=0 must be a positive number of seconds, not 0"),
    ({}, {"poll_interval": True}, "poll_interval=True must be a positive number"),
]


@pytest.mark.parametrize("settings, arguments, message", BAD_WAITS)
def test_a_bad_wait_is_refused_naming_it(monkeypatch, settings, arguments, message):
    for key in ("AIRFLOW__STREAMQL__WAIT_TIMEOUT", "AIRFLOW__STREAMQL__POLL_INTERVAL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError) as refused:
        BUILD["operator"](**arguments)
    assert message in str(refused.value)
