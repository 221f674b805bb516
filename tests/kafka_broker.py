"""A real Apache Kafka broker for the tests: one KRaft node (broker and controller) on
loopback, run from the jars ``scripts/setup`` copied into ``.kafka/broker``
(``scripts/kafka/broker.pom.xml``), with a throwaway log folder. ``tests/conftest.py``
starts one per test session, the first time a test asks for it, and stops it at the end.
:meth:`KafkaBroker.restart` is an outage: the node killed, then started again on its data.

Records go in and come out through a real client (confluent-kafka, librdkafka); each test
makes its own topics, with unique names.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_JARS = os.path.join(REPO, ".kafka", "broker")

#: the node's settings beside its listeners: one replica of everything, internal topics of one
#: partition (a group or a transaction coordinator is ready at once), few threads (2 cores)
SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",  # as the compose stack's broker
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    # tests write records stamped years back (a query started at a time);
    # Kafka's 7-day retention would delete them at its next check (every 5 min) mid-test,
    # and a query then finds its start offset gone ("Some data may have been lost")
    "log.retention.ms": "-1",
}
LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c %m%n
"""
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


class BrokerError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise BrokerError("no java found (JAVA_HOME or PATH): the Kafka broker needs Java 17")
    return java


class KafkaBroker:
    """One KRaft node on 127.0.0.1; :attr:`bootstrap` is its address."""

    def __init__(self, jars: str = BROKER_JARS):
        if not glob.glob(os.path.join(jars, "kafka_2.13-*.jar")):
            raise BrokerError(f"the Kafka broker's jars are not in {jars!r}: run scripts/setup")
        self.classpath = os.path.join(jars, "*")
        self.folder = tempfile.mkdtemp(prefix="streamql-kafka-")
        self.port, controller = _free_port(), _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = os.path.join(self.folder, "broker.log")
        settings = {
            **SETTINGS,
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "log.dirs": os.path.join(self.folder, "data"),
        }
        self.properties = os.path.join(self.folder, "server.properties")
        with open(self.properties, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in settings.items())
        log4j = os.path.join(self.folder, "log4j2.properties")
        with open(log4j, "w") as f:
            f.write(LOG4J.format(log=self.log))
        self.command = [_java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", self.classpath]
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> KafkaBroker:
        """Format the node's storage, start it, and return once it answers for its metadata."""
        cluster = subprocess.run([*self.command, "kafka.tools.StorageTool", "random-uuid"],
                                 check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        formatted = subprocess.run([*self.command, "kafka.tools.StorageTool", "format", "-t", cluster,
                                    "-c", self.properties], capture_output=True, text=True)
        if formatted.returncode:
            raise BrokerError(f"formatting the broker's storage failed: {formatted.stdout}{formatted.stderr}")
        return self.start_again(timeout)

    def start_again(self, timeout: float = 120) -> KafkaBroker:
        """Start the node on its storage as it was (not formatted), on the same port; return
        once it answers for its metadata."""
        # with the tests' process gone (killed, say), the kernel stops the broker too
        parent_death = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
        with open(os.path.join(self.folder, "stdout.log"), "a") as out:
            self.process = subprocess.Popen([*parent_death, *self.command, "kafka.Kafka", self.properties],
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise BrokerError(f"the Kafka broker exited with {self.process.returncode}: {self.tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                self.admin().list_topics(timeout=5)
                return self
            except Exception as e:  # not listening or not answering yet
                if time.monotonic() > deadline:
                    self.stop()
                    raise BrokerError(f"the Kafka broker did not answer within {timeout:.0f} s: {self.tail()}") from e
                time.sleep(0.5)

    def restart(self, down: float = 0.0, sig: int = signal.SIGKILL, timeout: float = 120) -> float:
        """An outage: the node stopped with ``sig`` (SIGKILL: a crash, no controlled shutdown),
        ``down`` seconds without it, then started again on its data and port (not formatted);
        returns once it answers, with the seconds it took to come back."""
        self.halt(sig)
        time.sleep(down)
        began = time.monotonic()
        self.start_again(timeout)
        return time.monotonic() - began

    def halt(self, sig: int = signal.SIGKILL) -> None:
        """Stop the node's process with ``sig`` (SIGTERM: a controlled shutdown), keeping its
        storage and port for :meth:`start_again`."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def stop(self) -> None:
        self.halt(signal.SIGTERM)
        shutil.rmtree(self.folder, ignore_errors=True)

    def tail(self, lines: int = 30) -> str:
        text = ""
        for name in ("stdout.log", "broker.log"):
            try:
                with open(os.path.join(self.folder, name), errors="replace") as f:
                    text += "".join(f.readlines()[-lines:])
            except OSError:
                pass
        return text

    # -- a real client ---------------------------------------------------------------------

    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        from confluent_kafka.admin import NewTopic
        admin = self.admin()  # kept until the answer came: a client dropped before fails its calls
        admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
        return name

    def produce(self, topic: str, records: Iterable[tuple[str | bytes | None, str | bytes | dict | None]],
                partition: int | None = None, timestamp: int | None = None) -> None:
        """Records (key, value) produced in order and flushed; a dict value is sent as JSON;
        ``timestamp``: their record time (epoch milliseconds; else the time they are sent)."""
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True})
        failed: list[str] = []  # a record the broker refused is said, not lost silently
        report = lambda error, message: failed.append(f"{message.partition()}: {error}") if error else None  # noqa: E731
        for key, value in records:
            if isinstance(value, dict):
                value = json.dumps(value)
            extra = {} if partition is None else {"partition": partition}
            if timestamp is not None:
                extra["timestamp"] = timestamp
            producer.produce(topic, key=key, value=value, on_delivery=report, **extra)
        if producer.flush(30):
            raise BrokerError(f"records for {topic!r} were not delivered in 30 s")
        if failed:
            raise BrokerError(f"records for {topic!r} were not delivered: {'; '.join(failed)}")

    def consume(self, topic: str, count: int, timeout: float = 60, isolation: str = "read_committed",
                raw: bool = False) -> list[tuple]:
        """The first ``count`` records of ``topic`` (from its start): (key, value, partition,
        offset) as text (``raw``: key and value as bytes); fewer if no more came within
        ``timeout`` seconds."""
        from confluent_kafka import Consumer
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": isolation})
        consumer.subscribe([topic])
        records: list[tuple[str | None, str | None, int, int]] = []
        deadline = time.monotonic() + timeout
        try:
            while len(records) < count and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().retriable() or "UNKNOWN_TOPIC" in message.error().name():
                        continue
                    raise BrokerError(f"consuming {topic!r}: {message.error()}")
                records.append(_record(message, raw))
        finally:
            consumer.close()
        return records

    def read_to_end(self, topic: str, isolation: str = "read_committed",
                    timeout: float = 60) -> list[tuple[str | None, str | None, int, int]]:
        """Every record of ``topic`` up to its end as ``isolation`` sees it (read_committed: up to
        its last stable offset), as :meth:`consume` gives them, in offset order per partition."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "isolation.level": isolation})
        records: list[tuple[str | None, str | None, int, int]] = []
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            pending, deadline = set(partitions), time.monotonic() + timeout
            while pending:
                if time.monotonic() > deadline:
                    raise BrokerError(f"reading {topic!r} to its end took over {timeout:.0f} s")
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
                        continue
                    raise BrokerError(f"reading {topic!r}: {message.error()}")
                records.append(_record(message))
        finally:
            consumer.close()
        return records

    def end_offsets(self, topic: str, isolation: str = "read_committed") -> int:
        """The sum of ``topic``'s partitions' end offsets as ``isolation`` sees them: under
        read_committed the last stable offset, which stops before an open transaction."""
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                             "isolation.level": isolation})
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
        finally:
            consumer.close()

    def transaction_open(self, topic: str) -> bool:
        """A transaction holds records in ``topic`` that read_committed consumers cannot see
        yet (its commit marker, written a moment after the commit returns, not there yet)."""
        return self.end_offsets(topic, "read_uncommitted") > self.end_offsets(topic)

    def records_in(self, topic: str) -> int:
        """How many records ``topic`` holds: the sum of its partitions' end offsets (a
        transaction's markers count too), read from the broker with no wait for more."""
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"test-{uuid.uuid4().hex}"})
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
        finally:
            consumer.close()


def _record(message, raw: bool = False) -> tuple:
    """A consumed record as the tests compare it: (key, value, partition, offset), text as text
    (``raw``: the key and value bytes as they are)."""
    key, value = message.key(), message.value()
    if raw:
        return key, value, message.partition(), message.offset()
    return (None if key is None else key.decode(), None if value is None else value.decode(),
            message.partition(), message.offset())


class Topics:
    """A test's topics on the session's broker: each made with a name no other test has."""

    def __init__(self, broker: KafkaBroker, test: str):
        self.broker = broker
        self.prefix = "".join(c if c.isalnum() else "-" for c in test)[:80]

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def new(self, name: str = "t", partitions: int = 1, config: dict[str, str] | None = None) -> str:
        return self.broker.create_topic(f"{self.prefix}-{name}-{uuid.uuid4().hex[:8]}", partitions, config)

    def produce(self, topic: str, records, partition: int | None = None, timestamp: int | None = None) -> None:
        self.broker.produce(topic, records, partition, timestamp)

    def consume(self, topic: str, count: int, timeout: float = 60, isolation: str = "read_committed",
                raw: bool = False):
        return self.broker.consume(topic, count, timeout, isolation, raw)

    def records_in(self, topic: str) -> int:
        return self.broker.records_in(topic)

    def read_to_end(self, topic: str, isolation: str = "read_committed"):
        return self.broker.read_to_end(topic, isolation)

    def end_offsets(self, topic: str, isolation: str = "read_committed") -> int:
        return self.broker.end_offsets(topic, isolation)

    def transaction_open(self, topic: str) -> bool:
        return self.broker.transaction_open(topic)
