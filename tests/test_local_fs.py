"""Hadoop's local file system without a process per file (issue 33; runtime/local_fs.py): a
session a runtime starts on a local master sets the permissions of what it writes with a
system call, where Hadoop without its native library starts a `chmod` process each time.
What that saves is measured in docs/benchmarks.md; here, that it holds and changes nothing
else."""

import os

import pytest

from airflow_provider_streamql.runtime import local_fs
from bench.chmod_log import ChmodLog

from .support import insert, table

JAR = "/opt/streamql/local-fs.jar"
FS, CP = local_fs.FILE_SYSTEM, local_fs.CLASS_PATH

# the settings given, the master, the jar (None: not built), the two settings the session gets
# fmt: off
OPTIONS = [
    ({}, "local[2]", JAR, local_fs.CLASS, JAR),
    ({}, "local", JAR, local_fs.CLASS, JAR),
    ({}, "local[*]", JAR, local_fs.CLASS, JAR),
    ({CP: "/mine.jar"}, "local[1]", JAR, local_fs.CLASS, f"{JAR}{os.pathsep}/mine.jar"),
    ({}, "local[2]", None, None, None),
    ({FS: "org.example.MyFileSystem"}, "local[2]", JAR, "org.example.MyFileSystem", JAR),
    # executors in JVMs of their own: the jar only on the driver's class path (the class archive's)
    ({}, "local-cluster[2,1,1024]", JAR, None, JAR),
    ({}, "spark://host:7077", JAR, None, JAR),
    ({}, "yarn", JAR, None, JAR),
]
# fmt: on


@pytest.mark.parametrize("given, master, jar, file_system, class_path", OPTIONS)
def test_the_jar_is_the_file_system_of_a_local_master_only(given, master, jar, file_system, class_path):
    got = local_fs.spark_options({"spark.sql.shuffle.partitions": "4", **given}, master, jar)
    assert (got.get(FS), got.get(CP)) == (file_system, class_path)
    assert got["spark.sql.shuffle.partitions"] == "4"


@pytest.mark.parametrize("env, expected", [("off", None), ("OFF", None), ("/opt/fs.jar", "/opt/fs.jar")])
def test_the_environment_names_or_turns_off_the_jar(monkeypatch, env, expected):
    monkeypatch.setenv(local_fs.ENV, env)
    assert local_fs.jar_path() == expected


# spark-defaults.conf's lines, what the session's settings take from it
# fmt: off
DEFAULTS = [
    ("spark.driver.extraClassPath /opt/a.jar\n", {CP: "/opt/a.jar"}),
    ("spark.hadoop.fs.file.impl=org.example.Fs\n", {FS: "org.example.Fs"}),
    ("spark.driver.extraClassPath:  /opt/a.jar:/opt/b.jar  \n", {CP: "/opt/a.jar:/opt/b.jar"}),
    ("# spark.hadoop.fs.file.impl org.example.Fs\nspark.executor.memory 2g\n", {}),
    (None, {}),  # no file
]
# fmt: on


@pytest.mark.parametrize("text, expected", DEFAULTS)
def test_a_class_path_or_file_system_in_spark_defaults_is_kept(monkeypatch, tmp_path, text, expected):
    if text is not None:
        (tmp_path / "spark-defaults.conf").write_text(text)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert local_fs.spark_defaults() == expected


# whether a JVM was started before in this process, spark-submit's gateway port, pyspark's
# submit arguments: whether the next session's JVM takes the class path of its settings
# fmt: off
STARTS = [
    (False, None, None, True),
    (True, None, None, False),  # pyspark keeps a stopped session's JVM
    (False, "40123", None, False),  # under spark-submit
    (False, None, "--driver-class-path /x.jar pyspark-shell", False),
    (False, None, "--driver-memory 2g pyspark-shell", True),
]
# fmt: on


@pytest.mark.parametrize("started_before, gateway_port, submit_args, expected", STARTS)
def test_only_a_jvm_started_here_takes_the_class_path(monkeypatch, started_before, gateway_port, submit_args, expected):
    from pyspark import SparkContext

    from airflow_provider_streamql.runtime.session import starts_jvm

    monkeypatch.setattr(SparkContext, "_gateway", object() if started_before else None)
    for name, value in (("PYSPARK_GATEWAY_PORT", gateway_port), ("PYSPARK_SUBMIT_ARGS", submit_args)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert starts_jvm() is expected


def _local_fs(spark):
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())


def test_the_shared_session_writes_through_the_jar_setup_built(spark, monkeypatch):
    """scripts/setup built the jar, and the session the tests share (started as a runtime
    starts its own) has it as its `file:` file system."""
    monkeypatch.delenv(local_fs.ENV, raising=False)
    jar = local_fs.jar_path()
    assert jar is not None and os.path.isfile(jar), f"no local file system jar at {jar}: run scripts/setup"
    assert _local_fs(spark).getClass().getName() == local_fs.CLASS


# the sticky bit, which java.nio cannot set, goes Hadoop's way (a chmod process)
MODES = [0o644, 0o600, 0o755, 0o700, 0o777, 0o000, 0o1777]


@pytest.mark.parametrize("mode", MODES, ids=[oct(m) for m in MODES])
def test_a_permission_is_set_as_asked(spark, tmp_path, mode):
    path = tmp_path / "part-0.json"
    path.write_text("{}\n")
    jvm = spark.sparkContext._jvm
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission(mode)
    _local_fs(spark).setPermission(jvm.org.apache.hadoop.fs.Path(str(path)), permission)
    assert oct(os.stat(path).st_mode & 0o7777) == oct(mode)


def test_what_spark_creates_gets_hadoops_permissions(spark, tmp_path):
    """A folder and a file (with its checksum) made as Spark makes them: Hadoop's default
    modes under its default umask (022)."""
    jvm = spark.sparkContext._jvm
    fs, folder = _local_fs(spark), tmp_path / "offsets"
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(folder)))
    fs.create(jvm.org.apache.hadoop.fs.Path(str(folder / "0")), True).close()
    modes = {p.name: oct(p.stat().st_mode & 0o7777) for p in [folder, *folder.iterdir()]}
    assert modes == {"offsets": "0o755", "0": "0o644", ".0.crc": "0o644"}


#: what `streamql runtime` runs on: the jar setup built, or Hadoop's own file system
@pytest.mark.parametrize("setting, chmods", [(None, "none"), ("off", "some")])
def test_a_runtimes_micro_batches_start_no_chmod_process(sqlite_engine, env, processes, tmp_path, setting, chmods):
    """A filter and a GROUP BY table in a runtime process, a record a batch: their
    checkpoints, state and output files are written without a `chmod` process each (counted
    by a `chmod` first on the runtime's PATH that logs each run), and read back as before."""
    engine, chmod_log = sqlite_engine, ChmodLog(str(tmp_path))
    env["PATH"] = chmod_log.path(env["PATH"])
    env.pop(local_fs.ENV, None)
    if setting is not None:
        env[local_fs.ENV] = setting
    engine.execute(
        "CREATE STREAM purchases (id INT KEY, user STRING, cost DOUBLE);"
        "CREATE STREAM valid AS SELECT * FROM purchases WHERE cost > 0;"
        "CREATE TABLE spend AS SELECT user, COUNT(*) AS n FROM purchases GROUP BY user;"
    )
    processes()
    for query_id in ("CSAS_VALID_1", "CTAS_SPEND_2"):
        engine.wait_for_state(query_id, "RUNNING", timeout=120)
    for row in [(1, "ann", 1.0), (2, "bob", 2.0), (3, "ann", -3.0)]:
        insert(engine, "purchases", [row])
        for query_id in ("CSAS_VALID_1", "CTAS_SPEND_2"):
            engine.wait_caught_up(query_id, timeout=60)
    assert table(engine, "spend") == {"ann": (2,), "bob": (1,)}
    assert sorted(r[0] for r in engine.execute("SELECT id FROM valid")[0].rows) == [1, 2]
    started = chmod_log.count()
    assert (started == 0) if chmods == "none" else (started > 0), f"{started} chmod processes"
