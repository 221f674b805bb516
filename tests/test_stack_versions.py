"""The versions the docker-compose stack runs are the ones the tests run: its Kafka broker and
the Kafka connector it submits the runtime with are those ``scripts/kafka/`` installs (the poms
are the one source of truth), its Spark is the pinned pyspark's, and its broker is set up as the
tests' one is. Read from the files alone: no Docker, no network."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

import pytest
import yaml

from .conftest import REPO
from .kafka_broker import SETTINGS

POM = "{http://maven.apache.org/POM/4.0.0}"


def pom_artifacts(name: str) -> dict[str, str]:
    """``group:artifact`` -> version, of the dependencies of ``scripts/kafka/<name>.pom.xml``."""
    root = ET.parse(os.path.join(REPO, "scripts", "kafka", f"{name}.pom.xml")).getroot()
    properties = {p.tag[len(POM) :]: p.text for p in root.find(f"{POM}properties") or ()}
    found = {}
    for dep in root.iter(f"{POM}dependency"):
        version = re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], dep.findtext(f"{POM}version"))
        found[f"{dep.findtext(f'{POM}groupId')}:{dep.findtext(f'{POM}artifactId')}"] = version
    return found


def compose() -> dict:
    with open(os.path.join(REPO, "docker-compose.yaml")) as f:
        return yaml.safe_load(f)


def runtime_option(name: str) -> list[str]:
    """The comma-separated values of spark-submit's ``name`` option in the runtime's command."""
    words = compose()["services"]["runtime"]["command"].split()
    return words[words.index(name) + 1].split(",")


def image_tag(service: str) -> str:
    return compose()["services"][service]["image"].split(":")[1]


def pinned(package: str) -> str:
    with open(os.path.join(REPO, "requirements", "test.txt")) as f:
        return re.search(rf"^{package}==(\S+)", f.read(), re.M).group(1)


CONNECTOR = pom_artifacts("connector")
BROKER_VERSION = pom_artifacts("broker")["org.apache.kafka:kafka_2.13"]


@pytest.mark.parametrize(
    "what, in_the_stack, tested",
    [
        ("the broker image", lambda: image_tag("kafka"), lambda: BROKER_VERSION),
        ("the connector jars the runtime is submitted with", lambda: sorted(runtime_option("--packages")),
         lambda: sorted(f"{a}:{v}" for a, v in CONNECTOR.items())),
        ("Spark's image, the runtime's and the cluster's", lambda: {image_tag(s) for s in
                                                                    ("spark-master", "spark-worker", "runtime")},
         lambda: {f"{pinned('pyspark')}-python3"}),
    ],
)
def test_the_stack_runs_the_versions_the_tests_run(what, in_the_stack, tested):
    assert in_the_stack() == tested(), what


def test_the_stack_excludes_only_what_the_connector_jars_pull_in_besides():
    assert not {p.rsplit(":", 1)[0] for p in runtime_option("--packages")} & set(runtime_option("--exclude-packages"))


#: the tests' broker settings the stack's broker need not share: thread counts, sized for the
#: tests' two cores (its listeners and folders, set apart from SETTINGS, are the container's)
NOT_SHARED = {"num.network.threads", "num.io.threads", "background.threads", "num.recovery.threads.per.data.dir",
              "log.cleaner.threads"}


def test_the_stacks_broker_is_set_up_as_the_tests_one():
    """The apache/kafka image reads ``KAFKA_<SETTING>`` as ``<setting>`` (dots as underscores)."""
    env = {k[len("KAFKA_") :].lower().replace("_", "."): str(v)
           for k, v in compose()["services"]["kafka"]["environment"].items()}
    env["process.roles"] = env["process.roles"].replace(" ", "")
    assert {k: env.get(k) for k in SETTINGS if k not in NOT_SHARED} == {
        k: v for k, v in SETTINGS.items() if k not in NOT_SHARED}


@pytest.mark.parametrize("folder, pom", [("connector", "connector"), ("broker", "broker")])
def test_the_jars_the_tests_run_are_the_poms(folder, pom):
    """``.kafka/<folder>`` (what the tests put on a classpath) was filled from this checkout's pom."""
    jars = os.path.join(REPO, ".kafka", folder)
    if not os.path.isdir(jars):
        pytest.skip(f"{jars} is not installed (scripts/setup)")
    names = set(os.listdir(jars))
    for artifact, version in pom_artifacts(pom).items():
        assert f"{artifact.split(':')[1]}-{version}.jar" in names, (artifact, version)
