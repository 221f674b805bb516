"""Kafka's Java client settings as a Python (librdkafka) client takes them."""

from __future__ import annotations

import pytest

from airflow_provider_streamql.engine import Engine
from airflow_provider_streamql.errors import StateError
from airflow_provider_streamql.storage import kafka_client, kafka_topics

from .conftest import _free_port

JAAS_PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="s3\\"cr;t";'
JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required username='app' password='pw';"
JAAS_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
B = {"bootstrap.servers": "b:9092"}


@pytest.mark.parametrize(
    "settings, config",
    [
        (B, B),
        ({**B, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, {**B, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}),
        ({**B, "sasl.jaas.config": JAAS_PLAIN}, {**B, "sasl.username": "app", "sasl.password": 's3"cr;t'}),
        ({**B, "sasl.jaas.config": JAAS_SCRAM}, {**B, "sasl.username": "app", "sasl.password": "pw"}),
        ({**B, "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem", "ssl.truststore.password": "x"}, {**B, "ssl.ca.location": "/ca.pem"}),
        ({**B, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x"}, {**B, "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x"}),
        ({**B, "ssl.keystore.type": "pem", "ssl.keystore.key": "KEY", "ssl.keystore.certificate.chain": "CERT"}, {**B, "ssl.key.pem": "KEY", "ssl.certificate.pem": "CERT"}),
        ({**B, "key.serializer": "org.apache.kafka.common.serialization.StringSerializer"}, B),
        ({**B, "ssl.ca.location": "/ca.pem", "client.id": "etl"}, {**B, "ssl.ca.location": "/ca.pem", "client.id": "etl"}),
    ],
)
def test_java_settings_become_librdkafka_settings(settings, config):
    assert kafka_client.client_config(settings) == config


@pytest.mark.parametrize(
    "settings, said",
    [
        ({}, "no Kafka bootstrap servers"),
        ({**B, "ssl.truststore.location": "/t.jks"}, "'ssl.truststore.location' is a JKS store"),
        ({**B, "ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "'ssl.keystore.location' is a JKS store"),
        ({**B, "sasl.jaas.config": JAAS_OAUTH}, "names a login module a Python Kafka client (librdkafka) cannot use"),
        ({**B, "sasl.jaas.config": "not jaas at all"}, "names a login module"),
        ({**B, "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username='u';"}, "has no password option"),
    ],
)
def test_settings_a_python_client_cannot_carry_are_refused_by_name(settings, said):
    with pytest.raises(StateError) as e:
        kafka_client.client_config(settings)
    assert said in str(e.value)


def test_a_setting_librdkafka_does_not_know_is_refused_by_name_without_its_value():
    with pytest.raises(StateError) as e:
        kafka_client.producer({**B, "sasl.password": "hunter2", "max.in.flight.requests.per.connexion": "hunter2"})
    assert "max.in.flight.requests.per.connexion" in str(e.value)
    assert "hunter2" not in str(e.value)


@pytest.mark.slow
def test_a_producer_and_consumer_made_from_java_settings_talk_to_the_broker(kafka_topics):
    topic = kafka_topics.new("roundtrip")
    settings = {"bootstrap.servers": kafka_topics.bootstrap, "key.serializer": "ignored", "client.id": "streamql-test"}
    producer = kafka_client.producer(settings)
    producer.produce(topic, key=b"k", value=b'{"v": 1}')
    assert producer.flush(30) == 0
    consumer = kafka_client.consumer(settings, **{"group.id": "t", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = None
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                break
        assert message is not None and (message.key(), message.value()) == (b"k", b'{"v": 1}')
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "bootstrap, note",
    [
        (None, "no Kafka bootstrap servers given: lag in records is not known"),
        ("127.0.0.1:{port}", "cannot reach Kafka at 127.0.0.1:{port} (asked for topic 'ev1'): "),
    ],
)
def test_a_listing_says_why_a_lag_on_kafka_is_not_known(bootstrap, note, sqlite_url, home, monkeypatch, capfd):
    """`streamql queries` while the broker is down (or none is given): each query over a topic
    says why its lag is unknown, naming where Kafka was looked for; the broker is asked once
    for the whole listing (the second topic's query names the first topic asked), and
    librdkafka's own log lines stay off the command's standard error."""
    monkeypatch.setattr(kafka_topics, "REQUEST_SECONDS", 1.0)  # a refused connection waits out the timeout
    port = _free_port()  # closed again once found: nothing listens there
    engine = Engine(sqlite_url, home=home, kafka_bootstrap_servers=bootstrap and bootstrap.format(port=port))
    engine.execute("CREATE STREAM ev1 (id INT KEY) WITH (kafka_topic='ev1'); CREATE STREAM a AS SELECT * FROM ev1;"
                   "CREATE STREAM ev2 (id INT KEY) WITH (kafka_topic='ev2'); CREATE STREAM b AS SELECT * FROM ev2")
    rows = engine.queries()
    engine.close()
    assert [(r["lag_records"], r["lag_note"][:len(note.format(port=port))]) for r in rows] == \
        [(None, note.format(port=port))] * 2
    assert "rdkafka" not in capfd.readouterr().err
