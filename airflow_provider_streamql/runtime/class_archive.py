"""A class-data-sharing archive for the Spark driver's JVM (Java's AppCDS), so a runtime
starts sooner (issue 33, first result fast).

A Spark driver loads and verifies some ten thousand classes before its first batch. Java
can map them from an archive made once instead: :func:`build` runs a small Spark job (a
streaming query over JSON files, as a runtime's first batch) in a JVM that writes the
classes it loaded to the archive at exit (``-XX:ArchiveClassesAtExit``); :func:`java_options`
then adds ``-XX:SharedArchiveFile`` to ``spark.driver.extraJavaOptions`` when that archive
exists. ``-Xshare:auto`` makes a JVM that cannot use it (another Java build, another
pyspark, another class path) start as without it, silently: the archive only ever saves time.

The archive is made for one Java and one pyspark installation: its name holds both versions
and a digest of pyspark's folder, so an upgrade of either makes the runtime look for a new
one (``scripts/setup`` makes it; ``python -m airflow_provider_streamql.runtime.class_archive``
makes it by hand). It lives
beside the Python environment (``<sys.prefix>/share/streamql``) or where
``$STREAMQL_CLASS_ARCHIVE`` names; ``STREAMQL_CLASS_ARCHIVE=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping

from . import local_fs

ENV = "STREAMQL_CLASS_ARCHIVE"
OPTION = "spark.driver.extraJavaOptions"
#: a JVM that cannot map the archive starts without it, and says nothing (its warning would
#: go to the driver's standard output)
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
#: the job whose classes go into the archive: a session, a streaming JSON read with a
#: filter and an aggregation, as a runtime's first batches
TRAINING_MASTER = "local[2]"
TRAINING_JOB = """
import os, shutil, tempfile
from airflow_provider_streamql.runtime.session import build_session
spark = build_session(%(master)r, "streamql-class-archive", {"spark.ui.enabled": "false", %(option)r: %(dump)r})
folder = tempfile.mkdtemp()
os.makedirs(os.path.join(folder, "in"))
with open(os.path.join(folder, "in", "part.json"), "w") as f:
    f.write('{"user": "a", "cost": 1.5}\\n{"user": "b", "cost": -1}\\n')
df = spark.readStream.schema("user STRING, cost DOUBLE").json(os.path.join(folder, "in"))
q = (df.where("cost > 0").writeStream.format("json").option("path", os.path.join(folder, "out"))
     .option("checkpointLocation", os.path.join(folder, "c1")).trigger(availableNow=True).start())
q.awaitTermination()
a = (df.groupBy("user").count().writeStream.outputMode("update").foreachBatch(lambda b, i: b.collect())
     .option("checkpointLocation", os.path.join(folder, "c2")).trigger(availableNow=True).start())
a.awaitTermination()
spark.stop()
shutil.rmtree(folder)
"""


def java_version() -> str | None:
    """The version of the ``java`` a driver runs (``17.0.13``), None when there is none."""
    home = os.environ.get("JAVA_HOME")  # as pyspark picks it: $JAVA_HOME/bin/java, else java on PATH
    java = shutil.which("java", path=os.path.join(home, "bin") if home else None)
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'version "([^"]+)"', out)
    return found.group(1) if found else None


def archive_path(java: str | None = None, class_path: str = "") -> str | None:
    """Where the archive for this Java and pyspark is (or would be), for a driver whose
    class path starts with ``class_path`` (``spark.driver.extraClassPath``); None when turned
    off or when there is no Java."""
    given = os.environ.get(ENV, "")
    if given.lower() == "off":
        return None
    if given:
        return given
    java = java or java_version()
    if java is None:
        return None
    import pyspark

    # the JVM maps an archive only for the class path it was made with: Spark's jars, under
    # SPARK_HOME as pyspark finds it, after the driver's extra class path, whose files it
    # checks by size and time (a jar built again makes a new archive)
    stamps = [_stamp(p) for p in class_path.split(os.pathsep)]
    where = hashlib.sha256(f"{stamps}{local_fs.spark_home()}".encode()).hexdigest()[:8]
    name = f"spark-{pyspark.__version__}-java-{re.sub(r'[^0-9A-Za-z._-]', '_', java)}-{where}.jsa"
    return os.path.join(sys.prefix, "share", "streamql", name)


def _stamp(path: str) -> str:
    """``path`` with its size and time when it is a file."""
    if not os.path.isfile(path):
        return path
    info = os.stat(path)
    return f"{path}:{info.st_size}:{info.st_mtime_ns}"


def java_options(conf: Mapping[str, str], archive: str | None) -> dict[str, str]:
    """``conf`` with the archive's options added to the driver's Java options (after any
    given: a user's own ``-XX:SharedArchiveFile`` or ``-Xshare`` wins, and then nothing is
    added) when ``archive`` is a file."""
    given = conf.get(OPTION, "")
    if archive is None or not os.path.isfile(archive) or "SharedArchiveFile" in given or "-Xshare" in given:
        return dict(conf)
    return {**conf, OPTION: f"{given} -XX:SharedArchiveFile={archive} {QUIET}".strip()}


def build(archive: str) -> None:
    """Make the archive at ``archive`` by running :data:`TRAINING_JOB` (written to a
    temporary name, then renamed: a reader never sees half an archive)."""
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=".partial-", suffix=".jsa", dir=os.path.dirname(archive))
    os.close(fd)
    os.unlink(partial)  # the JVM makes it
    job = TRAINING_JOB % {"master": TRAINING_MASTER, "option": OPTION, "dump": f"-XX:ArchiveClassesAtExit={partial}"}
    env = {**os.environ, ENV: "off"}
    try:
        done = subprocess.run([sys.executable, "-c", job], env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not os.path.isfile(partial):
            raise RuntimeError(f"the training job failed (exit {done.returncode}): {done.stderr[-2000:]}")
        os.replace(partial, archive)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def default_archive_path() -> str | None:
    """:func:`archive_path` for a driver a runtime starts: the local file system's jar first on
    its class path when built (:mod:`.local_fs`). The archive scripts/setup makes."""
    return archive_path(class_path=local_fs.usable_jar() or "")


def main() -> int:
    archive = default_archive_path()
    if archive is None:
        print(f"class archive: none (no java, or ${ENV}=off)")
        return 0
    if os.path.isfile(archive):
        print(f"class archive: {archive} (already made)")
        return 0
    build(archive)
    print(f"class archive: {archive} ({os.path.getsize(archive) // 2**20} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
