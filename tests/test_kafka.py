"""Kafka topics: the statements, the connector options a runtime gives Spark and where it
takes the connector from, its Kafka client properties; and, on a real broker (one KRaft node
the session starts, tests/kafka_broker.py) with Spark's own connector: decoding records into
declared columns (with the bad-record guard), encoding output and a table's tombstones, the
error of a runtime without the connector, and a pipeline on topics through a runtime process."""
from __future__ import annotations

import json
import pathlib
import uuid

import pytest

from airflow_provider_streamql.errors import StateError, ValidationError
from airflow_provider_streamql.runtime import kafka, kafka_connector
from airflow_provider_streamql.runtime.badrecords import RecordGuard
from airflow_provider_streamql.runtime.batch_writer import BatchWriter
from airflow_provider_streamql.runtime.evolution import source_evolution
from airflow_provider_streamql.runtime.tables import HavingChanges
from airflow_provider_streamql.storage.checkpoints import last_committed_batch, last_planned_batch

from .support import insert, reconcile_passes, sigterm, wait_until

REPO = pathlib.Path(__file__).resolve().parent.parent

ORDERS = "CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='orders');"


def test_kafka_streams_and_queries_are_declared(sqlite_engine):
    engine = sqlite_engine
    engine.execute(ORDERS + "CREATE STREAM big WITH (kafka_topic='big-orders') AS SELECT * FROM orders WHERE qty > 10;"
                   "CREATE TABLE per_item AS SELECT item, SUM(qty) AS qty FROM orders GROUP BY item;"
                   "SET 'auto.offset.reset' = 'earliest'; CREATE STREAM copy AS SELECT * FROM orders;")
    orders = engine.catalog.source("ORDERS")
    assert (orders.path, orders.properties) == ("kafka:orders", {"kafka_topic": "orders"})
    big = engine.query("CSAS_BIG_1")
    assert big.shape.to_json()["sink"] == {"path": "kafka:big-orders", "format": "JSON", "writer": "kafka sink"}
    assert engine.query("CSAS_COPY_3").settings["auto.offset.reset"] == "earliest"
    # a Kafka sink may change its topic in place
    result = engine.execute("CREATE OR REPLACE STREAM big WITH (kafka_topic='large-orders') AS "
                            "SELECT * FROM orders WHERE qty > 10")[0]
    assert [f["code"] for f in result.report["findings"]] == ["KAFKA_TOPIC_CHANGED"]
    assert engine.catalog.source("BIG").properties["kafka_topic"] == "large-orders"


# statement -> fragment of the error; nothing is written
BAD = [
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', path='p')", "either kafka_topic or path"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', value_format='CSV')", "Kafka topics hold JSON, AVRO, PROTOBUF, KAFKA values"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='a,b')", "must name one Kafka topic"),
    ("CREATE STREAM s (id INT) WITH (kafka_topic='t', bootstrap_servers='h:9092')",
     "Kafka connection settings come from the runtime's configuration"),
    ("DROP STREAM orders DELETE TOPIC", "does not delete the Kafka topic 'orders'"),
    ("CREATE STREAM f (id INT); SET 'auto.offset.reset' = 'latest'; CREATE STREAM g AS SELECT * FROM f",
     "'latest' is not supported for file topics (F)"),
]


@pytest.mark.parametrize("sql, fragment", BAD)
def test_bad_kafka_statements(sqlite_engine, sql, fragment):
    sqlite_engine.execute(ORDERS)
    with pytest.raises(ValidationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        sqlite_engine.execute(sql)
    assert [s.name for s in sqlite_engine.catalog.snapshot(sqlite_engine.catalog.engine.connect()).sources.values()] == ["ORDERS"]


CONF = {"spark.streamql.kafka.bootstrap.servers": "broker:9092",
        "spark.streamql.kafka.security.protocol": "SASL_SSL",
        "spark.streamql.kafka.sasl.mechanism": "PLAIN", "spark.sql.shuffle.partitions": "4"}


def test_connector_options_come_from_the_runtime_configuration(sqlite_engine):
    sqlite_engine.execute(ORDERS + "CREATE STREAM big WITH (kafka_topic='big') AS SELECT * FROM orders")
    options = kafka.options_from(CONF)
    assert options == {"kafka.bootstrap.servers": "broker:9092", "kafka.sasl.mechanism": "PLAIN",
                       "kafka.security.protocol": "SASL_SSL"}
    reader = kafka.reader_spec(sqlite_engine.catalog.source("ORDERS"), options, "latest")
    assert (reader.format, reader.options) == ("kafka", {**options, "subscribe": "orders",
                                                         "startingOffsets": "latest", "failOnDataLoss": "true"})
    writer = kafka.writer_spec(sqlite_engine.catalog.source("BIG"), options)
    assert writer.options == {**options, "topic": "big"}
    with pytest.raises(StateError, match="no Kafka bootstrap servers: start it with --conf "
                                         "spark.streamql.kafka.bootstrap.servers=HOST:9092"):
        kafka.reader_spec(sqlite_engine.catalog.source("ORDERS"), {}, "latest")


def test_the_connector_jars_come_from_one_folder(tmp_path):
    """Where a runtime takes Spark's Kafka connector from, and what it says without it."""
    for environ, reason in [({}, "$STREAMQL_KAFKA_CONNECTOR is not set"),
                            ({"STREAMQL_KAFKA_CONNECTOR": str(tmp_path / "none")}, "which is not a folder"),
                            ({"STREAMQL_KAFKA_CONNECTOR": str(tmp_path)}, "which holds no jar")]:
        with pytest.raises(StateError) as error:
            kafka_connector.jars(environ)
        assert error.value.message.startswith("the Kafka connector is not on this runtime's classpath (")
        assert reason in error.value.message
        assert error.value.message.endswith(
            "set $STREAMQL_KAFKA_CONNECTOR to a folder holding its jars (scripts/setup fills .kafka/connector), "
            "or submit the runtime with --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 "
            "(SubmitRuntimeOperator(packages=...))")
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / name).write_text("")
    assert kafka_connector.jars({"STREAMQL_KAFKA_CONNECTOR": str(tmp_path)}) == [
        str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]


def test_setup_installs_the_connector_the_runtime_names():
    """scripts/kafka/connector.pom.xml pins the jars of kafka_connector.PACKAGE."""
    pom = (REPO / "scripts" / "kafka" / "connector.pom.xml").read_text()
    group, artifact, version = kafka_connector.PACKAGE.split(":")
    assert f"<artifactId>{artifact}</artifactId>" in pom
    assert f"<spark.kafka.version>{version}</spark.kafka.version>" in pom


def read_topic(spark, src, guard: RecordGuard | None = None) -> list[tuple]:
    """What a runtime reads of ``src``'s topic now, from its start: its records decoded (and
    put through ``guard``), in offset order, as one available-now streaming run."""
    name = f"read_{uuid.uuid4().hex[:8]}"
    # an unnamed source, as a query from before named streams: source evolution off while it
    # is built and started (a runtime of an earlier test in this session may have set it on)
    with source_evolution(spark, False):
        df = kafka.read(spark, src, "earliest")
        if guard is not None:
            df = guard.apply(df, src)
        query = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    try:
        query.awaitTermination(120)
        return [tuple(r) for r in spark.table(name).collect()]
    finally:
        query.stop()
        spark.catalog.dropTempView(name)


def orders_on(engine, topic: str):
    engine.execute(f"CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='{topic}')")
    return engine.catalog.source("ORDERS")


RECORDS = [("1", '{"item": "tea", "qty": 2}'), ("2", '{"item": "mug", "qty": "many"}'),
           ("3", "not json"), (None, '{"item": "pot", "qty": 1}'), ("5", '{"item": "cup", "qty": 4}')]


@pytest.mark.spark
def test_kafka_records_decode_into_declared_columns_and_bad_ones_are_caught(kafka_spark, kafka_topics, sqlite_engine):
    spark, topic = kafka_spark, kafka_topics.new("orders")
    kafka_topics.produce(topic, RECORDS)
    src = orders_on(sqlite_engine, topic)
    assert read_topic(spark, src) == [
        (1, "tea", 2, None, f"kafka:{topic}/0@0"),
        (2, "mug", None, '{"item": "mug", "qty": "many"}', f"kafka:{topic}/0@1"),
        (3, None, None, "not json", f"kafka:{topic}/0@2"),
        (None, "pot", 1, None, f"kafka:{topic}/0@3"),
        (5, "cup", 4, None, f"kafka:{topic}/0@4"),
    ]
    # a stream record without its KEY is a valid record (as in ksqlDB); only a table needs its key
    assert read_topic(spark, src, RecordGuard("CSAS_X_1", "LOG_AND_CONTINUE")) == [
        (1, "tea", 2), (None, "pot", 1), (5, "cup", 4)]
    with pytest.raises(Exception, match=f"STREAMQL_BAD_RECORD CSAS_X_1 cannot read a record of ORDERS in "
                                        f"kafka:{topic}/0@1: "):
        read_topic(spark, src, RecordGuard("CSAS_X_1", "PAUSE"))


def write_topic(spark, records, sink) -> None:
    """``records`` (key, value) written to ``sink``'s topic as a runtime's batch writer does."""
    spec = kafka.writer_spec(sink, kafka.settings(spark))
    records.write.format(spec.format).options(**spec.options).save()


@pytest.mark.spark
def test_output_encodes_keys_and_json_values(kafka_spark, kafka_topics, sqlite_engine):
    spark, orders_topic, per_item_topic = kafka_spark, kafka_topics.new("orders"), kafka_topics.new("per-item")
    orders = orders_on(sqlite_engine, orders_topic)
    sqlite_engine.execute(f"CREATE TABLE per_item WITH (kafka_topic='{per_item_topic}') AS "
                          "SELECT item, SUM(qty) AS qty FROM orders GROUP BY item")
    per_item = sqlite_engine.catalog.source("PER_ITEM")
    write_topic(spark, kafka.encode(spark.createDataFrame([(1, "tea", 2)], "id INT, item STRING, qty INT"), orders),
                orders)
    assert kafka_topics.consume(orders_topic, 1) == [("1", '{"item":"tea","qty":2}', 0, 0)]
    write_topic(spark, kafka.encode(spark.createDataFrame([("tea", 7)], "item STRING, qty BIGINT"), per_item),
                per_item)
    ((key, value, _, _),) = kafka_topics.consume(per_item_topic, 1)
    assert key == "tea" and json.loads(value) == {"qty": 7}
    # and a runtime reads back what it wrote
    assert read_topic(spark, orders) == [(1, "tea", 2, None, f"kafka:{orders_topic}/0@0")]


@pytest.mark.spark
def test_a_group_failing_having_becomes_a_tombstone(kafka_spark, kafka_topics, sqlite_engine):
    """A Kafka table's changelog as ksqlDB writes it: a group an update makes fail HAVING is
    its key with a null value, written by the table's batch writer."""
    spark, topic = kafka_spark, kafka_topics.new("big")
    orders_on(sqlite_engine, kafka_topics.new("orders"))
    sqlite_engine.execute(f"CREATE TABLE big WITH (kafka_topic='{topic}') AS "
                          "SELECT item, SUM(qty) AS qty FROM orders GROUP BY item HAVING SUM(qty) > 5")
    big = sqlite_engine.catalog.source("BIG")
    column = sqlite_engine.catalog.query("CTAS_BIG_1").plan.having_column
    batch = spark.createDataFrame([("tea", 7, True), ("pot", 2, False)], f"item STRING, qty BIGINT, {column} BOOLEAN")
    committed = []
    BatchWriter(big, "v0001", lambda: committed.append(True), as_directory=True,
                compute=HavingChanges(column, big.key_columns))(batch, 0)
    assert committed == [True]
    assert sorted(r[:2] for r in kafka_topics.consume(topic, 2)) == [("pot", None), ("tea", '{"qty":7}')]


def test_a_runtime_without_the_connector_says_what_to_add(sqlite_engine, env, processes, tmp_path):
    """A runtime process with no connector to load: the query goes to ERROR saying what to add."""
    engine = sqlite_engine
    engine.execute(ORDERS + "CREATE STREAM copy AS SELECT * FROM orders")
    env["STREAMQL_KAFKA_CONNECTOR"] = str(tmp_path / "no-connector")
    processes("default", "--conf", "spark.streamql.kafka.bootstrap.servers=127.0.0.1:9")
    engine.wait_for_state("CSAS_COPY_1", "ERROR", timeout=120)
    assert engine.query("CSAS_COPY_1").error == (
        f"the Kafka connector is not on this runtime's classpath ($STREAMQL_KAFKA_CONNECTOR names "
        f"{str(tmp_path / 'no-connector')!r}, which is not a folder): set $STREAMQL_KAFKA_CONNECTOR to a folder "
        f"holding its jars (scripts/setup fills .kafka/connector), or submit the runtime with --packages "
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 (SubmitRuntimeOperator(packages=...))")


def test_a_pipeline_on_kafka_topics_through_a_runtime_process(sqlite_engine, env, processes, kafka_topics):
    """End to end through `streamql runtime` and the broker: the runtime loads the connector only
    when a query first writes or reads a topic; a stream over a topic (records from a real
    producer), a CSAS into another topic, a consumer reading its output; and a restart that
    resumes from the checkpoint's offsets."""
    engine = sqlite_engine
    orders, big, pages = kafka_topics.new("orders", partitions=2), kafka_topics.new("big"), kafka_topics.new("pages")
    engine.execute("CREATE STREAM clicks (id INT KEY, page STRING); CREATE STREAM seen AS SELECT * FROM clicks")
    insert(engine, "clicks", [(1, "home")])
    conf = ["--conf", f"spark.streamql.kafka.bootstrap.servers={kafka_topics.bootstrap}"]
    runtime = processes("default", *conf)
    engine.wait_for_state("CSAS_SEEN_1", "RUNNING", timeout=120)
    engine.wait_caught_up("CSAS_SEEN_1", timeout=60)
    log = lambda proc: open(proc.log).read()
    assert "Kafka connector" not in log(runtime)  # no Kafka source or sink: never loaded

    # a file stream into a topic: the sink loads the connector (PARTITION BY: the record key;
    # a CSAS does not carry its source's KEY over yet)
    engine.execute(f"CREATE STREAM pages WITH (kafka_topic='{pages}') AS SELECT * FROM clicks PARTITION BY id")
    assert kafka_topics.consume(pages, 1, timeout=120) == [("1", '{"page":"home"}', 0, 0)]
    # a stream over a topic, read from its start, filtered into another topic
    engine.execute(f"CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='{orders}');"
                   "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE STREAM big WITH (kafka_topic='{big}') AS "
                   "SELECT id, item, qty * 10 AS total FROM orders WHERE qty > 1 PARTITION BY id")
    kafka_topics.produce(orders, [(str(i), {"item": f"item{i}", "qty": i % 4}) for i in range(20)])
    expected = {str(i): {"item": f"item{i}", "total": i % 4 * 10} for i in range(20) if i % 4 > 1}
    out = kafka_topics.consume(big, len(expected), timeout=120)
    assert {key: json.loads(value) for key, value, _, _ in out} == expected and len(out) == len(expected)
    assert log(runtime).count("Kafka connector added to the classpath: commons-pool2-2.13.1.jar, "
                              "kafka-clients-3.9.2.jar, spark-sql-kafka-0-10_2.13-4.2.0.jar, "
                              "spark-token-provider-kafka-0-10_2.13-4.2.0.jar") == 1

    # records produced while no runtime runs come out once, after a restart on the checkpoint.
    # (Stopped before the batch that wrote them committed, the batch would run again and Spark's
    # Kafka sink produce it twice: at least once, the default; tests/test_kafka_exactly_once.py
    # has processing.guarantee exactly_once_v2.)
    checkpoint = engine.query("CSAS_BIG_3").checkpoint
    wait_until(lambda: last_committed_batch(checkpoint) == last_planned_batch(checkpoint) >= 0, 60, "batch committed")
    assert sigterm(runtime) == 0
    kafka_topics.produce(orders, [(str(i), {"item": f"item{i}", "qty": i % 4}) for i in range(20, 30)])
    expected.update({str(i): {"item": f"item{i}", "total": i % 4 * 10} for i in range(20, 30) if i % 4 > 1})
    processes("default", *conf)
    out = kafka_topics.consume(big, len(expected), timeout=120)
    assert {key: json.loads(value) for key, value, _, _ in out} == expected
    assert kafka_topics.records_in(big) == len(expected)  # nothing twice
    assert engine.state("CSAS_BIG_3") == "RUNNING"



# (the stream's columns, records produced to its topic (key, value), the CSAS's SELECT over it,
# the records its topic gets (key, value) with JSON compared as values): keys from the record
# key as ksqlDB reads them (one KEY column: its text; several: a JSON object; none: no key)
ON_TOPICS = [
    ("id INT KEY, item STRING, qty INT", [("1", {"item": "tea", "qty": 2}), ("2", {"item": "mug", "qty": 1})],
     "SELECT id, item, qty * 10 AS total FROM {src} WHERE qty > 1 PARTITION BY id",
     [("1", {"item": "tea", "total": 20})]),
    ("name STRING KEY, n BIGINT", [("ann", {"n": 5}), ("bob", {"n": 9})],
     "SELECT name, n + 1 AS n FROM {src} PARTITION BY name", [("ann", {"n": 6}), ("bob", {"n": 10})]),
    ("region STRING KEY, id INT KEY, cost DOUBLE", [('{"region": "eu", "id": 7}', {"cost": 2.5})],
     "SELECT * FROM {src} PARTITION BY region, id", [({"region": "eu", "id": 7}, {"cost": 2.5})]),
    ("id INT KEY, item STRING", [(None, {"item": "pot"})],
     "SELECT id, item FROM {src}", [(None, {"id": None, "item": "pot"})]),
    ("item STRING, qty INT", [("ignored", {"item": "cup", "qty": 4})],
     "SELECT UPPER(item) AS item, qty FROM {src}", [(None, {"item": "CUP", "qty": 4})]),
]


def as_json(text: str | None):
    """A JSON object's text as its value (so spacing and order do not matter); other text as it is."""
    return json.loads(text) if text is not None and text.startswith("{") else text


def test_streams_over_topics_and_queries_into_topics(kafka_spark, kafka_topics, sqlite_engine, runtimes):
    """Each case through one runtime and the broker: a stream declared over a topic a producer
    wrote, a CREATE STREAM ... AS SELECT into another topic, what a consumer reads there; and
    records produced while the queries run come out too."""
    engine = sqlite_engine
    topics = []
    for n, (columns, records, select, _) in enumerate(ON_TOPICS):
        source, sink = kafka_topics.new(f"in{n}"), kafka_topics.new(f"out{n}")
        kafka_topics.produce(source, records)
        engine.execute(f"CREATE STREAM in{n} ({columns}) WITH (kafka_topic='{source}');"
                       "SET 'auto.offset.reset' = 'earliest';"  # a SET holds for the rest of its script
                       f"CREATE STREAM out{n} WITH (kafka_topic='{sink}') AS {select.format(src=f'in{n}')}")
        topics.append((source, sink))
    runtimes.start(engine)
    for n, (_, _, _, expected) in enumerate(ON_TOPICS):
        out = kafka_topics.consume(topics[n][1], len(expected), timeout=120)
        assert [(as_json(key), as_json(value)) for key, value, _, _ in out] == expected, ON_TOPICS[n]
    source, sink = topics[0]
    kafka_topics.produce(source, [("3", {"item": "pot", "qty": 3})])
    assert [(k, as_json(v)) for k, v, _, _ in kafka_topics.consume(sink, 2, timeout=120)] == [
        ("1", {"item": "tea", "total": 20}), ("3", {"item": "pot", "total": 30})]


MALFORMED = '{"item": "pot", "qty": 3'


def test_a_poison_pill_on_a_topic_holds_the_query_until_it_is_skipped(kafka_spark, kafka_topics, sqlite_engine,
                                                                      runtimes):
    """ksqlDB's PAUSE on a deserialization error, on Kafka: the query holds at the malformed
    record, naming its topic, partition and offset; RESUME ... SKIP BAD RECORDS moves past
    exactly it, and every good record reaches the output topic once."""
    engine = sqlite_engine
    source, sink = kafka_topics.new("orders"), kafka_topics.new("copy")
    engine.execute(f"CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='{source}');"
                   "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE STREAM copy WITH (kafka_topic='{sink}', on_error='PAUSE') AS "
                   "SELECT id, item, qty FROM orders PARTITION BY id")
    good = lambda i: (str(i), {"item": f"item{i}", "qty": i})  # noqa: E731
    kafka_topics.produce(source, [good(i) for i in range(3)])
    runtimes.start(engine)
    assert len(kafka_topics.consume(sink, 3, timeout=120)) == 3
    # once those are out, the next batch starts at the malformed record (offset 3): nothing
    # of that batch was produced before it failed
    kafka_topics.produce(source, [("3", MALFORMED)] + [good(i) for i in range(4, 6)])
    engine.wait_for_state("CSAS_COPY_1", "PAUSED", timeout=120)
    query = engine.query("CSAS_COPY_1")
    assert query.desired_state == "PAUSED"
    assert query.error.startswith("BAD_RECORD: 1 bad record(s) in batch ")
    assert f"first at kafka:{source}/0@3: " in query.error
    (record,) = engine.bad_records("CSAS_COPY_1")
    assert (record.status, record.position, record.raw, record.source) == (
        "PENDING", f"kafka:{source}/0@3", MALFORMED, "ORDERS")

    engine.execute("RESUME CSAS_COPY_1 SKIP BAD RECORDS", issuer="user:ops")
    engine.wait_for_state("CSAS_COPY_1", "RUNNING", timeout=60)
    kafka_topics.produce(source, [good(6)])
    wanted = [(str(i), {"item": f"item{i}", "qty": i}) for i in (0, 1, 2, 4, 5, 6)]
    out = kafka_topics.consume(sink, len(wanted), timeout=120)
    assert [(k, json.loads(v)) for k, v, _, _ in out] == wanted
    assert kafka_topics.records_in(sink) == len(wanted)  # nothing twice
    assert [(r.status, r.handled_by) for r in engine.bad_records("CSAS_COPY_1")] == [("SKIPPED", "user:ops")]



def latest(kafka_topics, topic: str) -> dict:
    """A table's changelog topic as a reader of the table sees it now: the latest value per
    key (JSON), a tombstone deleting its key."""
    rows: dict = {}
    for key, value, _, _ in kafka_topics.consume(topic, kafka_topics.records_in(topic)):
        if value is None:
            rows.pop(key, None)
        else:
            rows[key] = json.loads(value)
    return rows


def stats_of(orders) -> dict:
    stats: dict = {}
    for _, order in orders:
        n, total = stats.get(order["user"], {"n": 0, "total": 0.0}).values()
        stats[order["user"]] = {"n": n + 1, "total": total + order["cost"]}
    return stats


def test_a_paused_query_on_a_topic_keeps_its_position_and_state_across_a_restart(kafka_spark, kafka_topics,
                                                                                 sqlite_engine, runtimes):
    """KLIP-63's plan on a Kafka source: a paused aggregation reads nothing while the other
    query on its topic goes on; it stays paused when its runtime restarts; RESUME processes
    the records produced meanwhile once, on the state it had."""
    engine = sqlite_engine
    orders, stats, valid = kafka_topics.new("orders", partitions=2), kafka_topics.new("stats"), kafka_topics.new("valid")
    engine.execute(f"CREATE STREAM orders (id INT KEY, user STRING, cost DOUBLE) WITH (kafka_topic='{orders}');"
                   "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE TABLE stats WITH (kafka_topic='{stats}') AS "
                   "SELECT user, COUNT(*) AS n, SUM(cost) AS total FROM orders GROUP BY user;"
                   f"CREATE STREAM valid WITH (kafka_topic='{valid}') AS SELECT * FROM orders WHERE cost > 0 "
                   "PARTITION BY id")
    order = lambda i, user, cost: (str(i), {"user": user, "cost": cost})  # noqa: E731
    first = [order(1, "ann", 5.0), order(2, "bob", -1.0), order(3, "ann", 2.5)]
    later = [order(4, "bob", 10.0), order(5, "cat", 1.0), order(6, "ann", 0.5)]
    kafka_topics.produce(orders, first)
    runtime = runtimes.start(engine)
    wait_until(lambda: latest(kafka_topics, stats) == stats_of(first), 120, "the stats of the first orders")
    assert len(kafka_topics.consume(valid, 2, timeout=120)) == 2

    engine.execute("PAUSE CTAS_STATS_1")
    engine.wait_for_state("CTAS_STATS_1", "PAUSED", timeout=60)
    changes = kafka_topics.records_in(stats)
    kafka_topics.produce(orders, later)
    assert len(kafka_topics.consume(valid, 5, timeout=120)) == 5  # the other query goes on
    # stopped with a batch written but not committed, the batch would run again and Spark's
    # Kafka sink produce it twice (at least once, until issue 30's exactly-once sink)
    checkpoint = engine.query("CSAS_VALID_2").checkpoint
    wait_until(lambda: last_committed_batch(checkpoint) == last_planned_batch(checkpoint), 60, "valid's batch committed")
    runtimes.stop(runtime)
    runtime = runtimes.start(engine)
    engine.wait_for_state("CSAS_VALID_2", "RUNNING", timeout=60)  # the new runtime took it up
    reconcile_passes(engine, runtime.id, passes=3)
    assert engine.state("CTAS_STATS_1") == "PAUSED" and "CTAS_STATS_1" not in runtime.active
    assert kafka_topics.records_in(stats) == changes  # nothing of it ran while paused

    engine.execute("RESUME CTAS_STATS_1")
    engine.wait_for_state("CTAS_STATS_1", "RUNNING", timeout=60)
    wait_until(lambda: latest(kafka_topics, stats) == stats_of(first + later), 120, "the stats of every order")
    assert kafka_topics.records_in(valid) == 5  # once each, across the restart



def test_an_in_place_upgrade_on_a_topic_continues_from_the_committed_offsets(kafka_spark, kafka_topics,
                                                                            sqlite_engine, runtimes):
    """CREATE OR REPLACE of a query over a topic, in place: the new version starts where the old
    one committed, so each record comes out once, through the version that read it."""
    engine = sqlite_engine
    orders, big = kafka_topics.new("orders"), kafka_topics.new("big")
    select = "SELECT id, item, qty FROM orders WHERE qty > {n} PARTITION BY id"
    engine.execute(f"CREATE STREAM orders (id INT KEY, item STRING, qty INT) WITH (kafka_topic='{orders}');"
                   "SET 'auto.offset.reset' = 'earliest';"
                   f"CREATE STREAM big WITH (kafka_topic='{big}') AS {select.format(n=1)}")
    order = lambda i: (str(i), {"item": f"item{i}", "qty": i % 5})  # noqa: E731
    kafka_topics.produce(orders, [order(i) for i in range(5)])
    runtimes.start(engine)
    assert [k for k, _, _, _ in kafka_topics.consume(big, 3, timeout=120)] == ["2", "3", "4"]
    checkpoint = engine.query("CSAS_BIG_1").checkpoint
    wait_until(lambda: last_committed_batch(checkpoint) == last_planned_batch(checkpoint), 60, "the batch committed")

    result = engine.execute(f"CREATE OR REPLACE STREAM big WITH (kafka_topic='{big}') AS {select.format(n=3)}")[0]
    assert (result.report["verdict"], result.version) == ("IN_PLACE", 2)
    engine.wait_for_version("CSAS_BIG_1", 2, timeout=60)
    kafka_topics.produce(orders, [order(i) for i in range(5, 10)])  # qty 0 to 4: only 9's passes qty > 3
    assert [k for k, _, _, _ in kafka_topics.consume(big, 4, timeout=120)] == ["2", "3", "4", "9"]
    wait_until(lambda: last_committed_batch(checkpoint) == last_planned_batch(checkpoint), 60, "the batch committed")
    assert kafka_topics.records_in(big) == 4  # none read twice, none of the first read again


# -- Kafka secrets: read at start from the environment or a file, never from argv --------

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="Qq1 Zz2-kafka";')

# (Kafka client properties text) -> the settings, or a fragment of the error (no value in it)
PROPERTIES = [
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}),
    (f"sasl.jaas.config={JAAS}", {"sasl.jaas.config": JAAS}),
    ("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
     "    username=\"alice\" \\\n    password=\"Qq1 Zz2-kafka\";\n", {"sasl.jaas.config": JAAS}),
    ("# a comment\n! another\n\n   ssl.truststore.password : Qq1 Zz2\r\nssl.key.password Qq1\\tZz2",
     {"ssl.truststore.password": "Qq1 Zz2", "ssl.key.password": "Qq1\tZz2"}),
    ("key\\ with\\ blanks=caf\\u00e9 \\\\ \\n", {"key with blanks": "café \\ \n"}),
    ("a=1\na=2", {"a": "2"}),
    ("empty=", {"empty": ""}),
    ("", {}),
    ("=Qq1Zz2", "line 1 has a value but no setting name"),
    ("ok=1\nssl.key.password=Qq1\\u12Zz2", "line 2 has a malformed \\uXXXX escape"),
    ("sasl.jaas.config=Qq1\\u00\n", "line 1 has a malformed \\uXXXX escape"),
    ("spark.streamql.kafka.sasl.jaas.config=Qq1Zz2", "'spark.streamql.kafka.sasl.jaas.config' is not a Kafka client setting"),
    ("kafka.sasl.jaas.config=Qq1Zz2", "'kafka.sasl.jaas.config' is not a Kafka client setting"),
    ("ssl.key.password=Qq1\\u0000Zz2", "line 1 holds a NUL character"),
    ("ssl.key.password=Qq1\udcffZz2", "not UTF-8 text"),
    ("ssl.key.password=" + "Qq1Zz2" * 200_000, "more than 1048576 bytes"),
]


@pytest.mark.parametrize("text, expected", PROPERTIES)
def test_kafka_properties_are_read_as_java_reads_them(text, expected):
    from airflow_provider_streamql.storage import kafka_properties
    if isinstance(expected, dict):
        assert kafka_properties.parse(text, "t") == expected
        assert kafka_properties.parse(kafka_properties.render(expected), "t") == expected
        return
    with pytest.raises(StateError) as error:
        kafka_properties.parse(text, "in $STREAMQL_KAFKA_PROPERTIES")
    assert error.value.message.startswith("Kafka properties in $STREAMQL_KAFKA_PROPERTIES: ")
    assert expected in error.value.message
    assert "Qq1" not in error.value.message and "Zz2" not in error.value.message


# (what the runtime's environment holds: TEXT its variable, FILE a file's path) -> what it loads
LOADS = [
    ({"STREAMQL_KAFKA_PROPERTIES": f"sasl.jaas.config={JAAS}"}, {"sasl.jaas.config": JAAS}),
    ({"STREAMQL_KAFKA_PROPERTIES_FILE": "FILE"}, {"sasl.jaas.config": JAAS, "security.protocol": "SASL_SSL"}),
    ({"STREAMQL_KAFKA_PROPERTIES_FILE": "FILE", "STREAMQL_KAFKA_PROPERTIES": "security.protocol=SSL"},
     {"sasl.jaas.config": JAAS, "security.protocol": "SSL"}),  # the variable's settings win
    ({}, {}),
    ({"STREAMQL_KAFKA_PROPERTIES_FILE": "MISSING"}, "cannot read the Kafka properties file 'MISSING' "
                                                    "($STREAMQL_KAFKA_PROPERTIES_FILE): No such file or directory"),
    ({"STREAMQL_KAFKA_PROPERTIES_FILE": "LATIN1"}, "Kafka properties file 'LATIN1' ($STREAMQL_KAFKA_PROPERTIES_FILE): "
                                                   "not UTF-8 text (byte at offset 23)"),
    ({"STREAMQL_KAFKA_PROPERTIES_FILE": "FOLDER"}, "cannot read the Kafka properties file 'FOLDER'"),
]


@pytest.mark.parametrize("environ, expected", LOADS)
def test_a_runtime_loads_its_kafka_properties_at_start(tmp_path, environ, expected):
    files = {"FILE": tmp_path / "client.properties", "MISSING": tmp_path / "missing",
             "LATIN1": tmp_path / "latin1.properties", "FOLDER": tmp_path}
    files["FILE"].write_text(f"security.protocol=SASL_SSL\nsasl.jaas.config={JAAS}\n")
    files["LATIN1"].write_bytes(b"ssl.key.password=Qq1Zz2\xe9\n")
    environ = {k: str(files.get(v, v)) for k, v in environ.items()}
    try:
        if isinstance(expected, dict):
            assert kafka.load_properties(environ) == sorted(expected)
            # the connector gets them, over the Spark configuration's, and every report masks them
            conf = {"spark.streamql.kafka.bootstrap.servers": "b:9092", "spark.streamql.kafka.security.protocol": "X"}
            assert kafka.options_from(conf, kafka._properties) == {
                "kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "X",
                **{f"kafka.{k}": v for k, v in expected.items()}}
            error = RuntimeError(f"login failed for {JAAS}\n\tat org.apache.kafka...")
            assert kafka.error_report(error) == ("login failed for ***" if expected.get("sasl.jaas.config")
                                                 else f"login failed for {JAAS}")
            assert kafka.redact("password Qq1 Zz2-kafka refused") == (
                "password *** refused" if expected.get("sasl.jaas.config") else "password Qq1 Zz2-kafka refused")
        else:
            with pytest.raises(StateError) as error:
                kafka.load_properties(environ)
            shown = error.value.message.replace(str(tmp_path / "missing"), "MISSING").replace(
                str(tmp_path / "latin1.properties"), "LATIN1").replace(str(tmp_path), "FOLDER")
            assert expected in shown and "Qq1" not in shown
    finally:
        kafka.load_properties({})


# (streamql runtime arguments, environment) -> a fragment of its error: refused before anything starts
RUNTIME_REFUSALS = [
    (["--conf", f"spark.streamql.kafka.sasl.jaas.config={JAAS}"], {},
     "--conf 'spark.streamql.kafka.sasl.jaas.config' is a Kafka secret"),
    (["--conf", "spark.streamql.kafka.ssl.truststore.password=Qq1 Zz2"], {},
     "--conf 'spark.streamql.kafka.ssl.truststore.password' is a Kafka secret"),
    (["--conf", "spark.streamql.kafka.SSL.KEY.PASSWORD=Qq1Zz2"], {}, "'spark.streamql.kafka.SSL.KEY.PASSWORD' is a Kafka"),
    (["--conf", "spark.streamql.kafka.sasl.oauthbearer.client.secret=Qq1Zz2"], {}, "is a Kafka secret"),
    (["--conf", "spark.streamql.kafka.ssl.keystore.key=Qq1Zz2"], {}, "is a Kafka secret"),
    ([], {"STREAMQL_KAFKA_PROPERTIES_FILE": "/nonexistent/client.properties"},
     "cannot read the Kafka properties file '/nonexistent/client.properties'"),
    ([], {"STREAMQL_KAFKA_PROPERTIES": "=Qq1Zz2"}, "Kafka properties in $STREAMQL_KAFKA_PROPERTIES: line 1"),
]


@pytest.mark.parametrize("args, environ, said", RUNTIME_REFUSALS)
def test_the_runtime_refuses_kafka_secrets_on_its_command_line(tmp_path, monkeypatch, capsys, args, environ, said):
    from airflow_provider_streamql.cli import EXIT_USAGE, main
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    code = main(["runtime", "--home", str(home), "--master", "not-a-master", *args])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.startswith("error: ") and said in err, err
    assert "Qq1" not in err and "Zz2" not in err and "Traceback" not in err
    assert not home.exists()  # no catalog made, no Spark started


@pytest.mark.parametrize("setting, secret", [
    ("sasl.jaas.config", True), ("ssl.truststore.password", True), ("ssl.key.password", True),
    ("ssl.keystore.key", True), ("sasl.oauthbearer.client.credentials.client.secret", True),
    ("sasl.oauthbearer.assertion.private.key.passphrase", True), (" SASL.JAAS.CONFIG ", True),
    ("bootstrap.servers", False), ("security.protocol", False), ("sasl.mechanism", False),
    ("ssl.truststore.location", False), ("ssl.endpoint.identification.algorithm", False),
    ("sasl.oauthbearer.token.endpoint.url", False),
])
def test_which_kafka_settings_are_secrets(setting, secret):
    from airflow_provider_streamql.storage.kafka_properties import is_secret
    assert is_secret(setting) is secret
