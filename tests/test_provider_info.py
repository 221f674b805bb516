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
