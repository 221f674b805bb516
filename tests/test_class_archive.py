"""The driver's class archive (issue 33, first result fast; runtime/class_archive.py): a
runtime's JVM maps the classes a Spark driver loads at start from an archive that
scripts/setup makes, unless the user's own Java options say otherwise or it is turned off.
How much sooner a runtime commits its first batch is measured by bench/first_result.py."""
import os

import pytest

from airflow_provider_streamql.runtime import class_archive

OPTION = class_archive.OPTION
ARCHIVE = f"-XX:SharedArchiveFile={{archive}} {class_archive.QUIET}"

# the driver's Java options given, whether the archive exists, the options the session gets
# fmt: off
OPTIONS = [
    (None, True, ARCHIVE),
    ("-Xmx2g", True, "-Xmx2g " + ARCHIVE),
    (None, False, None),
    ("-XX:SharedArchiveFile=/mine.jsa", True, "-XX:SharedArchiveFile=/mine.jsa"),
    ("-Xshare:off", True, "-Xshare:off"),
]
# fmt: on


@pytest.mark.parametrize("given, exists, expected", OPTIONS)
def test_the_archive_joins_the_drivers_java_options(tmp_path, given, exists, expected):
    archive = tmp_path / "spark.jsa"
    if exists:
        archive.write_bytes(b"archive")
    conf = {"spark.sql.shuffle.partitions": "4", **({OPTION: given} if given else {})}
    got = class_archive.java_options(conf, str(archive))
    assert got.get(OPTION) == (expected.format(archive=archive) if expected else None)
    assert got["spark.sql.shuffle.partitions"] == "4"


@pytest.mark.parametrize("env, expected", [
    ("off", None),
    ("OFF", None),
    ("/opt/images/spark.jsa", "/opt/images/spark.jsa"),
])
def test_the_environment_names_or_turns_off_the_archive(monkeypatch, env, expected):
    monkeypatch.setenv(class_archive.ENV, env)
    assert class_archive.archive_path() == expected


def test_the_default_archive_is_named_for_this_java_and_pyspark(monkeypatch):
    import pyspark

    monkeypatch.delenv(class_archive.ENV, raising=False)
    path = class_archive.archive_path(java="17.0.15")
    assert os.path.basename(path).startswith(f"spark-{pyspark.__version__}-java-17.0.15-")


def test_a_session_started_here_maps_the_archive_setup_made(spark, monkeypatch):
    """scripts/setup made the archive for this Java and pyspark, and the session the tests
    share (started as a runtime starts its own) runs with it."""
    monkeypatch.delenv(class_archive.ENV, raising=False)
    archive = class_archive.default_archive_path()
    assert archive is not None and os.path.isfile(archive), f"no class archive at {archive}: run scripts/setup"
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
