"""The provider info Airflow's providers manager reads, checked against the JSON schema
Airflow ships for it (``airflow/provider_info.schema.json``), and every class or module it
names importable."""
import importlib
import json
from pathlib import Path

import airflow
import jsonschema
import pytest

from airflow_provider_streamql.get_provider_info import get_provider_info

INFO = get_provider_info()


def test_the_provider_info_follows_airflows_schema():
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(INFO, schema)


NAMED = (
    [m for section in ("operators", "sensors", "hooks", "triggers") for entry in INFO[section]
     for m in entry["python-modules"]]
    + INFO["extra-links"]
    + [c["hook-class-name"] for c in INFO["connection-types"]]
)


@pytest.mark.parametrize("dotted", NAMED)
def test_what_the_provider_info_names_can_be_imported(dotted):
    try:
        importlib.import_module(dotted)
    except ModuleNotFoundError:
        module, _, name = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), name), dotted


REGISTERED = """
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
# only streamql's own errors: another provider's registration is its own business
print([p.name for p in plugins].count("streamql"), sorted(k for k, v in errors.items() if "streamql" in f"{k}{v}".lower()))
"""


@pytest.mark.parametrize("lazy", ["True", "False"])
def test_the_plugin_is_registered_once_whichever_way_airflow_discovers_providers(tmp_path, lazy):
    """From the entry point while provider discovery is lazy (Airflow's default), from the
    provider info's ``plugins`` when it is eager; never both (Airflow would report it as
    registered twice)."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": lazy,
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    # run outside the repository: its setup-made .egg-info would be a second distribution
    out = subprocess.run([sys.executable, "-c", REGISTERED], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "1 []", out.stderr[-2000:]


def test_placeholders_are_on_fields_the_connection_form_shows():
    """Airflow's connection form shows placeholders on its standard fields only (not on
    ``conn-fields``), and never on a hidden one."""
    (streamql,) = INFO["connection-types"]
    behaviour = streamql["ui-field-behaviour"]
    shown = {"description", "schema", "host", "port", "login", "password"} - set(behaviour["hidden-fields"])
    assert behaviour["placeholders"] and set(behaviour["placeholders"]) <= shown
