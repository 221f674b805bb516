"""Hadoop's local file system without a process per file (issue 33).

Without Hadoop's native library (pip's pyspark has none), Hadoop sets the permission of
every file and folder it creates on a local disk by starting a ``chmod`` process. A Spark
driver creates several per micro-batch (offsets, commits, state deltas, output files and
their checksums): a runtime of 60 queries fed a record at a time started about 130 a
second, and the kernel's work for them was 40 % of the machine's CPU.

``java/LocalFileSystemWithoutProcesses.java`` is Hadoop's own local file system with one
change: a permission is set with a system call (``java.nio``), the same bits, and a failure
is still an ``IOException``. :func:`build` compiles it against the Hadoop that Spark ships
into a jar beside the Python environment (``scripts/setup`` does; ``python -m
airflow_provider_streamql.runtime.local_fs`` by hand). :func:`spark_options` puts the jar
first on the class path of a driver JVM a runtime starts, and makes it the ``file:`` file
system when the master is local (the executors are the driver's JVM, so the class is on
their class path too) and no ``file:`` file system is named (in the settings, or in
``spark-defaults.conf``: :func:`spark_defaults`). Without the jar everything runs as before,
only slower; ``STREAMQL_LOCAL_FS=off`` turns it off.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping

ENV = "STREAMQL_LOCAL_FS"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "LocalFileSystemWithoutProcesses.java")
CLASS = "streamql.fs.LocalFileSystemWithoutProcesses"
#: the Spark settings it takes: Hadoop's class for ``file:`` URLs and the driver's class path
FILE_SYSTEM = "spark.hadoop.fs.file.impl"
CLASS_PATH = "spark.driver.extraClassPath"
#: masters whose executors run in the driver's JVM (not ``local-cluster[...]``)
LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")


def spark_home() -> str:
    """Spark's installation as pyspark finds it: ``$SPARK_HOME``, else pyspark's folder with
    links resolved."""
    import pyspark

    return os.environ.get("SPARK_HOME") or os.path.realpath(os.path.dirname(pyspark.__file__))


def hadoop_api_jar() -> str | None:
    """The Hadoop API jar Spark ships (what the class is compiled against), None without one."""
    found = sorted(glob.glob(os.path.join(spark_home(), "jars", "hadoop-client-api-*.jar")))
    return found[-1] if found else None


def jar_path() -> str | None:
    """Where the jar for this Spark installation and this source is (or would be); None when
    turned off or when Spark ships no Hadoop API jar."""
    given = os.environ.get(ENV, "")
    if given.lower() == "off":
        return None
    if given:
        return given
    api = hadoop_api_jar()
    if api is None:
        return None
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + api.encode()).hexdigest()[:8]
    return os.path.join(sys.prefix, "share", "streamql", f"local-fs-{os.path.basename(api)[:-4]}-{digest}.jar")


def usable_jar() -> str | None:
    """:func:`jar_path` when the jar is there."""
    jar = jar_path()
    return jar if jar is not None and os.path.isfile(jar) else None


def spark_options(conf: Mapping[str, str], master: str, jar: str | None) -> dict[str, str]:
    """``conf`` for a driver JVM started with it: ``jar`` first on its class path (on any
    master: the class archive is made for one class path) and, when ``master`` is local and
    ``conf`` names no ``file:`` file system, the jar's as ``file:``'s. ``conf`` as it is
    without a jar."""
    if jar is None:
        return dict(conf)
    given = conf.get(CLASS_PATH, "")
    options = {**conf, CLASS_PATH: f"{jar}{os.pathsep}{given}" if given else jar}
    if LOCAL_MASTER.fullmatch(master) and FILE_SYSTEM not in conf:
        options[FILE_SYSTEM] = CLASS
    return options


#: a line of a Java properties file: key, then '=', ':' or blanks, then the value
PROPERTY = re.compile(r"\s*([^\s=:#!]+)\s*[=:\s]\s*(.*)")


def spark_defaults() -> dict[str, str]:
    """The settings this module takes, as ``spark-defaults.conf`` gives them
    (``$SPARK_CONF_DIR``, else Spark's ``conf`` folder): the launcher reads that file, but a
    setting given to the session replaces the file's, so :func:`spark_options` must see them."""
    folder = os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home(), "conf")
    try:
        with open(os.path.join(folder, "spark-defaults.conf")) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    found = (PROPERTY.fullmatch(line) for line in lines)
    return {m[1]: m[2].strip() for m in found if m and m[1] in (FILE_SYSTEM, CLASS_PATH)}


def javac() -> str | None:
    """The Java compiler beside the ``java`` a driver runs ($JAVA_HOME/bin, else PATH)."""
    home = os.environ.get("JAVA_HOME")
    return shutil.which("javac", path=os.path.join(home, "bin") if home else None)


def build(jar: str) -> None:
    """Compile :data:`SOURCE` into ``jar`` (written to a temporary name, then renamed: a
    driver never sees half a jar)."""
    api, compiler = hadoop_api_jar(), javac()
    if api is None or compiler is None:
        raise RuntimeError(
            f"cannot build {jar!r}: " + ("Spark ships no Hadoop API jar" if api is None else "no javac (a JDK) found")
        )
    os.makedirs(os.path.dirname(jar), exist_ok=True)
    with tempfile.TemporaryDirectory() as classes:
        done = subprocess.run(
            [compiler, "--release", "17", "-nowarn", "-cp", api, "-d", classes, SOURCE],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{compiler!r} failed on {SOURCE!r} (exit {done.returncode}): {done.stderr[-2000:]}")
        fd, partial = tempfile.mkstemp(prefix=".partial-", suffix=".jar", dir=os.path.dirname(jar))
        os.close(fd)
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
                for path in sorted(glob.glob(os.path.join(classes, "**", "*.class"), recursive=True)):
                    out.write(path, os.path.relpath(path, classes))
            os.chmod(partial, 0o644)  # mkstemp makes it 0600: a runtime of another user reads it
            os.replace(partial, jar)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)


def main() -> int:
    jar = jar_path()
    if jar is None:
        print(f"local file system: Hadoop's (${ENV}=off, or Spark ships no Hadoop API jar)")
        return 0
    if os.path.isfile(jar):
        print(f"local file system: {jar} (already built)")
        return 0
    if javac() is None:
        print("local file system: Hadoop's (no javac found: a JDK builds the faster one)")
        return 0
    build(jar)
    print(f"local file system: {jar}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
