"""The engine's own Kafka client (issue 30 parts 3 and 5): INSERT VALUES produces to a topic,
PRINT and pull queries read one, on the real broker (tests/kafka_broker.py); the records it
produces are the bytes a runtime's encoder writes (compared with Spark's own); a statement
that needs Kafka on an engine without settings, and a CREATE naming a topic on a pipeline
whose runtimes have none, are refused saying how to give them."""
from __future__ import annotations

import datetime
import json

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StateError, ValidationError
from airflow_provider_streamql.language.statements import Column
from airflow_provider_streamql.language.types import parse_type
from airflow_provider_streamql.storage import kafka_records

from .support import wait_until


@pytest.fixture
def kafka_engine(sqlite_url, home, kafka_broker):
    """An engine on the session's broker (its bootstrap servers given to the engine)."""
    e = Engine(sqlite_url, home=home, issuer="test", kafka_bootstrap_servers=kafka_broker.bootstrap)
    yield e
    e.close()


@pytest.fixture
def no_kafka_env(monkeypatch):
    """No Kafka properties in the environment (the engine's settings are only those given)."""
    monkeypatch.delenv("STREAMQL_KAFKA_PROPERTIES", raising=False)
    monkeypatch.delenv("STREAMQL_KAFKA_PROPERTIES_FILE", raising=False)


# a column's type, a value as INSERT VALUES stores it, and the same value as Spark holds it
TYPED = [
    ("INT", 7, 7),
    ("BIGINT", -9007199254740993, -9007199254740993),
    ("DOUBLE", 1e10, 1e10),
    ("DOUBLE", 0.0001, 0.0001),
    ("DOUBLE", 9.5, 9.5),
    ("FLOAT", 0.1, 0.1),
    ("DECIMAL(10, 2)", 9.5, __import__("decimal").Decimal("9.50")),
    ("STRING", 'tab\t"quote" \\ \x01 é', 'tab\t"quote" \\ \x01 é'),
    ("BOOLEAN", True, True),
    ("DATE", "2024-02-29", datetime.date(2024, 2, 29)),
    ("TIMESTAMP", "2024-01-01 10:00:00.123456", datetime.datetime(2024, 1, 1, 10, 0, 0, 123456)),
    ("TIMESTAMP", "2024-01-01T12:00:00+02:00", datetime.datetime(2024, 1, 1, 10, 0)),
    ("ARRAY<INT>", [1, None, 3], [1, None, 3]),
    ("MAP<STRING, DOUBLE>", {"a": 1.5}, {"a": 1.5}),
    ("STRUCT<a: INT, b: STRING>", {"a": 1, "b": None}, {"a": 1, "b": None}),
    ("STRING", None, None),
]


@pytest.mark.parametrize("keys", [1, 2], ids=["one key", "two keys"])
def test_insert_values_encodes_records_as_the_runtime_does(spark, keys):
    """For a value of every type (as key and as value): the bytes kafka_records.encode makes
    are those runtime/kafka.py's encode makes with Spark (session time zone UTC)."""
    from pyspark.sql import Row

    from airflow_provider_streamql.runtime import kafka
    from airflow_provider_streamql.runtime.schemas import ddl_schema

    for n, (type_text, stored, sparks) in enumerate(TYPED):
        t = parse_type(type_text)
        key_types = [parse_type("STRING"), t][:keys] if keys == 2 else [t]
        columns = [Column(f"k{i}", kt, key=True) for i, kt in enumerate(key_types)] + [Column("v", t)]
        key_values = ["x", stored][:keys] if keys == 2 else [stored]
        spark_keys = ["x", sparks][:keys] if keys == 2 else [sparks]
        record = {**{f"k{i}": v for i, v in enumerate(key_values)}, "v": stored}
        if t.name.value in ("ARRAY", "MAP", "STRUCT") and keys == 1:
            continue  # no key type
        df = spark.createDataFrame([Row(*spark_keys, sparks)], ddl_schema(columns))

        class Sink:  # the part of a SourceInfo the encoder reads
            pass

        sink = Sink()
        sink.columns, sink.properties, sink.format = columns, {}, "JSON"
        (key, value), = [(r.key, r.value) for r in kafka.encode(df, sink).collect()]
        expected = (None if key is None else key.encode(), value.encode())
        assert kafka_records.encode(record, columns) == expected, (n, type_text, stored)


ORDERS = "CREATE STREAM orders (id INT KEY, item STRING, qty INT, at TIMESTAMP) WITH (kafka_topic='{topic}')"


def test_insert_values_produces_to_a_topic_that_a_query_reads(kafka_spark, kafka_topics, kafka_engine, runtimes):
    """Multi-row INSERT VALUES on a stream on a topic: a consumer sees the exact key and value
    bytes, in order, and a persistent query reading the topic decodes them into its output."""
    engine = kafka_engine
    topic = kafka_topics.new("orders")
    engine.execute(ORDERS.format(topic=topic) + ";"
                   "SET 'auto.offset.reset' = 'earliest'; CREATE STREAM big AS SELECT * FROM orders WHERE qty > 1")
    result, = engine.execute("INSERT INTO orders (id, item, qty, at) VALUES "
                             "(1, 'tea', 2, TIMESTAMP '2024-01-01 10:00:00'), (2, 'pot', 1, NULL), "
                             "(3, 'cup\"s', 5, TIMESTAMP '2024-01-01 10:00:00' + INTERVAL 90 MINUTES)")
    assert result.message == f"Inserted 3 records into ORDERS (Kafka topic {topic!r})"
    assert [(k, v) for k, v, _, _ in kafka_topics.consume(topic, 3)] == [
        ("1", '{"item":"tea","qty":2,"at":"2024-01-01T10:00:00.000Z"}'),
        ("2", '{"item":"pot","qty":1,"at":null}'),
        ("3", '{"item":"cup\\"s","qty":5,"at":"2024-01-01T11:30:00.000Z"}'),
    ]
    runtimes.start(engine)
    rows = wait_until(lambda: len(engine.execute("SELECT * FROM big")[0].rows) == 2
                      and engine.execute("SELECT * FROM big ORDER BY id")[0].rows, timeout=120)
    assert rows == [[1, "tea", 2, "2024-01-01T10:00:00.000Z"], [3, 'cup"s', 5, "2024-01-01T11:30:00.000Z"]]


T = "CREATE TABLE t (id INT PRIMARY KEY, name STRING, score DOUBLE) WITH (kafka_topic='{topic}')"
S = "CREATE STREAM s (id INT KEY, name STRING) WITH (kafka_topic='{topic}')"
# what the topic holds (key, value; None a tombstone), the pull query, its rows
PULLS = [
    (T, [], "SELECT * FROM t", []),
    (T, [("1", {"name": "a", "score": 1}), ("2", {"NAME": "b", "score": 2.5}), ("1", {"name": "A", "score": 3})],
     "SELECT * FROM t", [[1, "A", 3.0], [2, "b", 2.5]]),
    (T, [("1", {"name": "a"}), ("2", {"name": "b"}), ("1", None), ("3", {"name": "c"})],
     "SELECT id, name FROM t", [[2, "b"], [3, "c"]]),
    (T, [("1", {"name": "a"}), ("3", {"name": "c"}), ("3", {"name": "C"})], "SELECT name FROM t WHERE id = 3", [["C"]]),
    (T, [("1", None), ("1", {"name": "back"})], "SELECT * FROM t", [[1, "back", None]]),
    (T, [(None, {"name": "keyless"}), ("2", "not json"), ("3", {"name": "c"})], "SELECT id FROM t", [[3]]),
    (S, [("1", {"name": "a"}), ("1", {"name": "b"}), ("2", {"name": "c"})], "SELECT * FROM s", [[1, "a"], [1, "b"], [2, "c"]]),
    (S, [("1", {"name": "a"}), ("1", {"name": "b"}), ("2", {"name": "c"})], "SELECT name FROM s WHERE id = 1 LIMIT 1",
     [["a"]]),
    (S, [], "SELECT COUNT(*) AS n FROM s", [[0]]),
]


@pytest.mark.parametrize("create, records, select, expected", PULLS)
def test_pull_queries_read_a_topic(kafka_topics, kafka_engine, create, records, select, expected):
    topic = kafka_topics.new("pull")
    kafka_topics.produce(topic, records)
    kafka_engine.execute(create.format(topic=topic))
    assert kafka_engine.execute(select)[0].rows == expected


def test_a_pull_query_says_which_records_it_skipped(kafka_topics, kafka_engine):
    topic = kafka_topics.new("bad")
    kafka_topics.produce(topic, [("1", "not json"), ("2", {"name": "b"}), ("3", "[1]")])
    kafka_engine.execute(S.format(topic=topic))
    result, = kafka_engine.execute("SELECT * FROM s")
    assert result.rows == [[2, "b"]]
    assert result.details["notes"] == [
        f"Skipped 2 records of STREAM S that cannot be read (no JSON object), the first: kafka:{topic}/0@0"]


def test_insert_values_then_a_pull_query_of_the_table(kafka_topics, kafka_engine):
    """What INSERT VALUES produced is what a pull query reads back: the latest row per key."""
    topic = kafka_topics.new("t")
    kafka_engine.execute(T.format(topic=topic))
    kafka_engine.execute("INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', 1e10); INSERT INTO t VALUES (1, 'A', NULL)")
    assert kafka_engine.execute("SELECT * FROM t")[0].rows == [[1, "A", None], [2, "b", 1e10]]


def test_print_shows_a_topic_and_follows_it(kafka_topics, kafka_engine):
    """PRINT on a topic as ksqlDB's: FROM BEGINNING (INTERVAL, LIMIT) shows what it holds,
    without it only what is produced after it started, followed as the CLI does."""
    topic = kafka_topics.new("p")
    kafka_engine.execute(S.format(topic=topic))
    kafka_topics.produce(topic, [("1", '{"name":"a"}'), ("2", '{"name":"b"}'), (None, None)])
    printed, = kafka_engine.execute("PRINT s FROM BEGINNING")
    assert printed.columns == ["rowtime", "key", "value", "partition", "offset"]
    assert [row[1:] for row in printed.rows] == [["1", '{"name":"a"}', 0, 0], ["2", '{"name":"b"}', 0, 1],
                                                 [None, None, 0, 2]]
    assert all(datetime.datetime.strptime(row[0], "%Y/%m/%d %H:%M:%S.%f Z") for row in printed.rows)
    assert [r[1] for r in kafka_engine.execute("PRINT s FROM BEGINNING INTERVAL 2")[0].rows] == ["1", None]
    limited, = kafka_engine.execute("PRINT s FROM BEGINNING LIMIT 1")
    assert [r[1] for r in limited.rows] == ["1"]
    assert [r[1] for r in kafka_engine.follow_print(limited).rows] == []  # its LIMIT was shown

    later, = kafka_engine.execute("PRINT s LIMIT 2")
    assert later.rows == []
    kafka_topics.produce(topic, [("4", '{"name":"d"}'), ("5", '{"name":"e"}'), ("6", '{"name":"f"}')])
    followed = kafka_engine.follow_print(later)
    assert [r[1:] for r in followed.rows] == [["4", '{"name":"d"}', 0, 3], ["5", '{"name":"e"}', 0, 4]]
    assert json.loads(json.dumps(followed.details["print"]))["shown"] == 2


# what the topic holds before and after the push query starts (key, value), the push query
# (its session settings), the rows it shows of what was produced after it started
PUSHES = [
    (S, [("1", {"name": "a"})], [("2", {"name": "b"}), ("3", {"name": "c"})], {}, "SELECT * FROM s EMIT CHANGES",
     [[2, "b"], [3, "c"]]),
    (S, [("1", {"name": "a"})], [("2", {"name": "b"})], {"auto.offset.reset": "earliest"},
     "SELECT * FROM s EMIT CHANGES", [[1, "a"], [2, "b"]]),
    (S, [], [("1", {"name": "a"}), ("2", {"name": "b"}), ("3", {"name": "c"})], {},
     "SELECT UPPER(name) AS n FROM s WHERE id > 1 EMIT CHANGES LIMIT 1", [["B"]]),
    # a table's changes as they come: a tombstone and a record without a key show no row
    (T, [("1", {"name": "a"})], [("1", {"name": "A", "score": 2}), ("1", None), (None, {"name": "x"}),
                                 ("2", {"name": "b"})], {}, "SELECT id, name FROM t EMIT CHANGES", [[1, "A"], [2, "b"]]),
    # a record that cannot be read shows no row (the result's note says where it is)
    (S, [], [("1", "not json"), ("2", {"name": "b"})], {}, "SELECT name FROM s EMIT CHANGES", [["b"]]),
]


@pytest.mark.parametrize("create, before, after, settings, push, expected", PUSHES)
def test_a_push_query_follows_a_topic(kafka_topics, kafka_engine, create, before, after, settings, push, expected):
    """SELECT ... EMIT CHANGES on a stream or table over a topic (issue 31): the records
    committed after it started (from the first with earliest), through its projection and
    WHERE, each change a row, until its LIMIT; no query is made."""
    topic = kafka_topics.new("push")
    kafka_engine.execute(create.format(topic=topic))
    kafka_topics.produce(topic, before)
    pushed, = kafka_engine.execute(push, settings=settings)
    rows = list(pushed.rows)
    kafka_topics.produce(topic, after)
    for _ in range(2):
        pushed = kafka_engine.follow_push(pushed)
        rows += pushed.rows
    assert rows == expected
    assert kafka_engine.execute("SHOW QUERIES")[0].rows == []


def test_a_push_query_says_which_records_it_skipped(kafka_topics, kafka_engine):
    topic = kafka_topics.new("push-bad")
    kafka_engine.execute(S.format(topic=topic))
    pushed, = kafka_engine.execute("SELECT * FROM s EMIT CHANGES")
    kafka_topics.produce(topic, [("1", "not json"), ("2", {"name": "b"})])
    followed = kafka_engine.follow_push(pushed)
    assert followed.rows == [[2, "b"]]
    assert followed.message == (
        f"Skipped 1 record of STREAM S that cannot be read (no JSON object), the first: kafka:{topic}/0@0")


# a statement on a Kafka topic that the engine must talk to Kafka for
NEEDS_KAFKA = [
    "INSERT INTO orders VALUES (1, 'tea', 2, NULL)",
    "SELECT * FROM orders",
    "PRINT orders",
    "SELECT * FROM orders EMIT CHANGES",
]


@pytest.mark.parametrize("sql", NEEDS_KAFKA)
def test_a_statement_on_a_topic_needs_the_engines_kafka_settings(sqlite_engine, no_kafka_env, sql):
    sqlite_engine.execute(ORDERS.format(topic="orders"))
    with pytest.raises(StateError, match=r"talks to Kafka, and this engine has no Kafka bootstrap servers: give "
                                         r"them as Kafka client properties .* in \$STREAMQL_KAFKA_PROPERTIES"):
        sqlite_engine.execute(sql)


def test_the_engine_takes_kafka_settings_from_its_environment_and_its_caller(tmp_path, sqlite_url, home, monkeypatch):
    """The runtime's Kafka properties (environment, file) and the caller's settings, the
    caller's winning; secrets never shown."""
    path = tmp_path / "client.properties"
    path.write_text("bootstrap.servers=file:9092\nsasl.jaas.config=x password=\"s3cret\";\nsecurity.protocol=SSL\n")
    monkeypatch.setenv("STREAMQL_KAFKA_PROPERTIES_FILE", str(path))
    monkeypatch.setenv("STREAMQL_KAFKA_PROPERTIES", "security.protocol=SASL_SSL")
    engine = Engine(sqlite_url, home=home, kafka_properties={"client.id": "etl"})
    assert dict(engine.kafka.settings) == {"bootstrap.servers": "file:9092", "sasl.jaas.config": 'x password="s3cret";',
                                           "security.protocol": "SASL_SSL", "client.id": "etl"}
    assert "s3cret" not in repr(engine.kafka)
    assert engine.kafka.mask('failed: x password="s3cret";') == "failed: ***"
    given = Engine(sqlite_url, home=home, kafka_bootstrap_servers="given:9092", kafka_properties="client.id=a\n")
    assert (given.kafka.bootstrap_servers, given.kafka.settings["client.id"]) == ("given:9092", "a")


def test_a_delivery_failure_is_an_error(sqlite_url, home, kafka_topics):
    """A record the broker refuses (over its size limit) fails the statement, naming the topic."""
    topic = kafka_topics.new("small", config={"max.message.bytes": "1000"})
    engine = Engine(sqlite_url, home=home, kafka_bootstrap_servers=kafka_topics.bootstrap)
    engine.execute(S.format(topic=topic))
    with pytest.raises(StateError, match=f"INSERT INTO S: Kafka topic {topic!r} did not take 1 of 1 record"):
        engine.execute("INSERT INTO s VALUES (1, RPAD('x', 5000, 'x'))")
    assert kafka_topics.records_in(topic) == 0
    with pytest.raises(ValidationError, match="does not fit column 'id'"):  # checked as for file topics
        engine.execute("INSERT INTO s VALUES ('one', 'x')")


def test_the_airflow_connection_gives_the_engine_its_kafka_settings(tmp_path, no_kafka_env):
    """An operator's engine talks to the connection's Kafka: its kafka_bootstrap_servers and
    kafka_properties (text or an object of settings)."""
    from airflow.sdk import Connection

    from airflow_provider_streamql.hooks.streamql import StreamQLHook

    for properties in ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n",
                       {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}):
        conn = Connection(conn_id="streamql_default", conn_type="streamql", extra=json.dumps(
            {"home": str(tmp_path), "kafka_bootstrap_servers": "broker:9092", "kafka_properties": properties}))
        engine = StreamQLHook.engine_for(conn)
        assert dict(engine.kafka.settings) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                               "bootstrap.servers": "broker:9092"}
        engine.close()


def test_the_cli_prints_a_topic_with_the_kafka_properties_of_its_environment(sqlite_engine, env, kafka_topics):
    """`streamql exec "PRINT s LIMIT 2"` with $STREAMQL_KAFKA_PROPERTIES: the records produced
    after it started, as ksqlDB's CLI shows them, then its LIMIT ends it."""
    import subprocess

    from .support import CLI

    topic = kafka_topics.new("cli")
    sqlite_engine.execute(S.format(topic=topic))
    kafka_topics.produce(topic, [("1", '{"name":"before"}')])
    env = {**env, "STREAMQL_KAFKA_PROPERTIES": f"bootstrap.servers={kafka_topics.bootstrap}\n"}
    proc = subprocess.Popen(CLI + ["exec", "PRINT s LIMIT 2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "Format: JSON\n"  # PRINT has started: what the topic holds is behind it
    kafka_topics.produce(topic, [("2", '{"name":"b"}'), (None, None)])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [line.split(", ", 1)[1] for line in out.splitlines()] == [
        'key: 2, value: {"name":"b"}, partition: 0, offset: 1', "key: <null>, value: <null>, partition: 0, offset: 2"]


# the live runtimes of the pipeline (whether each has Kafka settings; None: a runtime of an
# earlier release), whether the engine has Kafka settings, the statement; the refusal, or None
DECLARE = "CREATE STREAM k (id INT KEY, v STRING) WITH (kafka_topic='k')"
QUERY = "CREATE STREAM f (id INT KEY, v STRING); CREATE STREAM out WITH (kafka_topic='out') AS SELECT * FROM f"
NO_KAFKA = "no live runtime of pipeline 'default' has Kafka settings (r1): restart it with --conf " \
           "spark.streamql.kafka.bootstrap.servers=HOST:9092"
REFUSALS = [
    ([], False, DECLARE, None),  # no runtime yet: one started later may have them
    ([], False, QUERY, None),
    ([False], False, DECLARE, f"CREATE STREAM K names Kafka topic 'k', and {NO_KAFKA}"),
    ([False], False, QUERY, f"CREATE STREAM OUT names Kafka topic 'out', and {NO_KAFKA}"),
    ([False], True, DECLARE, None),  # the engine reaches the topic (INSERT VALUES, PRINT, pull queries)
    ([False], True, QUERY, f"CREATE STREAM OUT names Kafka topic 'out', and {NO_KAFKA}"),  # the runtime runs it
    ([False, True], False, QUERY, None),
    ([None], False, QUERY, None),
    (["stopped"], False, QUERY, None),
    (["other pipeline"], False, QUERY, None),
]


@pytest.mark.parametrize("live, engine_kafka, sql, refusal", REFUSALS)
def test_a_create_naming_a_topic_is_refused_when_no_live_runtime_has_kafka(sqlite_url, home, no_kafka_env,
                                                                           live, engine_kafka, sql, refusal):
    engine = Engine(sqlite_url, home=home, kafka_bootstrap_servers="broker:9092" if engine_kafka else None)
    for n, kafka in enumerate(live, start=1):  # heartbeats as runtimes write them
        pipeline = "other" if kafka == "other pipeline" else "default"
        engine.catalog.runtimes.heartbeat(f"r{n}", pipeline, "host", n, kafka=kafka if kafka in (True, None) else False)
        if kafka == "stopped":
            engine.catalog.runtimes.stopped(f"r{n}")
    if refusal is None:
        engine.execute(sql)
        return
    with pytest.raises(StateError) as error:
        engine.execute(sql)
    assert error.value.message.startswith(refusal)
    assert "near: CREATE STREAM" in str(error.value)
    assert [s.name for s in engine.catalog.snapshot(engine.catalog.engine.connect()).sources.values()] == []


def test_a_runtime_records_whether_it_has_kafka_settings(spark, sqlite_engine, runtimes):
    """A real runtime without Kafka bootstrap servers says so in its heartbeat, and a CREATE
    naming a topic on its pipeline is refused at once (not later, in the runtime)."""
    runtime = runtimes.start(sqlite_engine)
    wait_until(lambda: sqlite_engine.runtimes("default", live=True), what="a heartbeat")
    assert [r["kafka"] for r in sqlite_engine.runtimes("default", live=True)] == [False]
    with pytest.raises(StateError, match=f"no live runtime of pipeline 'default' has Kafka settings \\({runtime.id}\\)"):
        sqlite_engine.execute(QUERY)
