"""Spark's Kafka connector on a runtime's classpath, put there when the runtime first starts a
query that reads or writes a Kafka topic: a runtime with no Kafka source or sink never loads
it (no download, no jar on its classpath).

Its jars are pinned files in a folder, ``$STREAMQL_KAFKA_CONNECTOR`` (``scripts/setup`` fills
``.kafka/connector`` from ``scripts/kafka/connector.pom.xml``), so a runtime needs no network:
they are added to the class loader spark-submit gave the driver (the one every driver thread,
the streaming queries' included, loads classes through) and shipped to the executors
(``SparkContext.addJar``). A runtime submitted with the connector already on its classpath
(``--packages`` :data:`PACKAGE`, ``--jars``, an image that ships it) uses that one.

Maven Central serves the connector up to Spark 4.2.0, not 4.3.0: the 4.2.0 connector is the one
streamql runs and tests on Spark 4.3 (docs/deployment.md, Kafka, says what was measured).
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections.abc import Mapping

from pyspark.sql import SparkSession

from ..errors import StateError

#: the folder holding the connector's jars
JARS_ENV = "STREAMQL_KAFKA_CONNECTOR"
#: the connector streamql is tested with, as Maven coordinates (``--packages``)
PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
#: the class Spark finds the ``kafka`` format by
PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: what adds jars to a running driver: the class loader spark-submit makes for it
_LOADER = "org.apache.spark.util.MutableURLClassLoader"

log = logging.getLogger(__name__)
_lock = threading.Lock()
#: the Spark applications (by id) whose driver has the connector
_ready: set[str] = set()


def missing(reason: str) -> StateError:
    """The error of a runtime that cannot load the connector: ``reason``, then what to do."""
    return StateError(
        f"the Kafka connector is not on this runtime's classpath ({reason}): set ${JARS_ENV} to a "
        f"folder holding its jars (scripts/setup fills .kafka/connector), or submit the runtime "
        f"with --packages {PACKAGE} (SubmitRuntimeOperator(packages=...))"
    )


def jars(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The connector's jars: the ``.jar`` files of the folder ``$STREAMQL_KAFKA_CONNECTOR``
    names, by name. None there is an error saying what to do."""
    folder = environ.get(JARS_ENV)
    if not folder:
        raise missing(f"${JARS_ENV} is not set")
    if not os.path.isdir(folder):
        raise missing(f"${JARS_ENV} names {folder!r}, which is not a folder")
    found = sorted(glob.glob(os.path.join(glob.escape(os.path.abspath(folder)), "*.jar")))
    if not found:
        raise missing(f"${JARS_ENV} names {folder!r}, which holds no jar")
    return found


def ensure(spark: SparkSession) -> None:
    """Make the connector loadable in ``spark``'s driver and executors, once per application."""
    app = spark.sparkContext.applicationId
    with _lock:
        if app in _ready:
            return
        jvm = spark._jvm
        assert jvm is not None
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        if not _loads(jvm, loader):
            files = jars()
            if not jvm.java.lang.Class.forName(_LOADER).isInstance(loader):
                raise missing(f"the driver's class loader is a {loader.getClass().getName()}, which takes no jar")
            for path in files:
                loader.addURL(jvm.java.io.File(path).toURI().toURL())
                spark._jsc.sc().addJar(path)  # type: ignore[union-attr]
            if not _loads(jvm, loader):
                raise missing(f"{PROVIDER} is not in the jars of {os.path.dirname(files[0])!r}")
            log.info("Kafka connector added to the classpath: %s", ", ".join(os.path.basename(f) for f in files))
        _ready.add(app)


def _loads(jvm, loader) -> bool:
    try:
        jvm.java.lang.Class.forName(PROVIDER, False, loader)
    except Exception:  # py4j's error for a ClassNotFoundException
        return False
    return True
