"""Spark's Kafka connector on a runtime's classpath, put there when the runtime first starts a
query that reads or writes a Kafka topic: a runtime with no Kafka source or sink never loads
it (no download, no jar on its classpath). Spark's Avro functions (``spark-avro``) are put
there the same way, when a runtime first starts a query on a topic with ``VALUE_FORMAT='AVRO'``
(:data:`AVRO`): a runtime with no such topic never loads them.

Its jars are pinned files in a folder, ``$STREAMQL_KAFKA_CONNECTOR`` (``scripts/setup`` fills
``.kafka/connector`` from ``scripts/kafka/connector.pom.xml``; the Avro jar:
``$STREAMQL_AVRO_JARS``, ``.kafka/formats`` from ``scripts/kafka/formats.pom.xml``), so a runtime
needs no network:
they are added to the class loader spark-submit gave the driver (the one every driver thread,
the streaming queries' included, loads classes through) and shipped to the executors
(``SparkContext.addJar``). A runtime submitted with the connector already on its classpath
(``--packages`` :data:`PACKAGE`, ``--jars``, an image that ships it) uses that one.

Maven Central serves the connector up to Spark 4.2.0, not 4.3.0: the 4.2.0 connector is the one
streamql runs and tests on Spark 4.3 (docs/deployment.md, Kafka, says what was measured); the
same holds for spark-avro.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ..errors import StateError


@dataclass(frozen=True)
class Jars:
    """A set of jars a runtime loads when a query first needs them."""

    #: what they are, as errors name them
    what: str
    #: the environment variable naming the folder holding them
    env: str
    #: the folder scripts/setup fills
    folder: str
    #: what streamql is tested with, as Maven coordinates (``--packages``)
    package: str
    #: a class they hold, by which a runtime knows they are loaded
    provider: str


KAFKA = Jars(
    "the Kafka connector",
    "STREAMQL_KAFKA_CONNECTOR",
    ".kafka/connector",
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    "org.apache.spark.sql.kafka010.KafkaSourceProvider",
)
#: Spark's Avro functions (from_avro, to_avro): for VALUE_FORMAT='AVRO'
AVRO = Jars(
    "spark-avro (Spark's Avro functions)",
    "STREAMQL_AVRO_JARS",
    ".kafka/formats",
    "org.apache.spark:spark-avro_2.13:4.2.0",
    "org.apache.spark.sql.avro.AvroDataToCatalyst",
)
#: the folder holding the connector's jars
JARS_ENV = KAFKA.env
#: the connector streamql is tested with, as Maven coordinates (``--packages``)
PACKAGE = KAFKA.package
#: the class Spark finds the ``kafka`` format by
PROVIDER = KAFKA.provider
#: what adds jars to a running driver: the class loader spark-submit makes for it
_LOADER = "org.apache.spark.util.MutableURLClassLoader"

log = logging.getLogger(__name__)
_lock = threading.Lock()
#: the Spark applications (by id) whose driver has each set of jars (by its variable)
_ready: set[tuple[str, str]] = set()


def missing(reason: str, of: Jars = KAFKA) -> StateError:
    """The error of a runtime that cannot load ``of``: ``reason``, then what to do."""
    return StateError(
        f"{of.what} is not on this runtime's classpath ({reason}): set ${of.env} to a "
        f"folder holding its jars (scripts/setup fills {of.folder}), or submit the runtime "
        f"with --packages {of.package} (SubmitRuntimeOperator(packages=...))"
    )


def jars(environ: Mapping[str, str] = os.environ, of: Jars = KAFKA) -> list[str]:
    """The jars of ``of``: the ``.jar`` files of the folder its variable
    (``$STREAMQL_KAFKA_CONNECTOR``) names, by name. None there is an error saying what to do."""
    folder = environ.get(of.env)
    if not folder:
        raise missing(f"${of.env} is not set", of)
    if not os.path.isdir(folder):
        raise missing(f"${of.env} names {folder!r}, which is not a folder", of)
    found = sorted(glob.glob(os.path.join(glob.escape(os.path.abspath(folder)), "*.jar")))
    if not found:
        raise missing(f"${of.env} names {folder!r}, which holds no jar", of)
    return found


def ensure(spark: SparkSession, of: Jars = KAFKA) -> None:
    """Make ``of`` (the connector unless told) loadable in ``spark``'s driver and executors,
    once per application."""
    app = spark.sparkContext.applicationId
    with _lock:
        if (app, of.env) in _ready:
            return
        jvm = spark._jvm
        assert jvm is not None
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        if not _loads(jvm, loader, of):
            files = jars(of=of)
            if not jvm.java.lang.Class.forName(_LOADER).isInstance(loader):
                raise missing(f"the driver's class loader is a {loader.getClass().getName()}, which takes no jar", of)
            for path in files:
                loader.addURL(jvm.java.io.File(path).toURI().toURL())
                spark._jsc.sc().addJar(path)  # type: ignore[union-attr]
            if not _loads(jvm, loader, of):
                raise missing(f"{of.provider} is not in the jars of {os.path.dirname(files[0])!r}", of)
            log.info("%s added to the classpath: %s", of.what, ", ".join(os.path.basename(f) for f in files))
        _ready.add((app, of.env))


def _loads(jvm, loader, of: Jars) -> bool:
    try:
        jvm.java.lang.Class.forName(of.provider, False, loader)
    except Exception:  # py4j's error for a ClassNotFoundException
        return False
    return True
