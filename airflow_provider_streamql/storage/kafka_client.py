"""Kafka clients in Python: Kafka's Java client settings turned into a confluent-kafka
(librdkafka) configuration, and the producer or consumer made from it.

Users write Kafka settings as Kafka's Java client takes them (``client.properties``, the
runtime's ``spark.streamql.kafka.<setting>``): the Spark connector runs that client. Where
streamql itself talks to Kafka from Python (``INSERT INTO ... VALUES`` on a topic, ``PRINT``,
a pull query over a topic, the exactly-once sink's transactions) it runs librdkafka, which
names some settings differently and keeps credentials elsewhere. Each setting is turned over
once, by the tables below; a Java-only setting librdkafka cannot honour is refused by name
(never by value), and anything else goes to librdkafka as written, whose own check refuses
what it does not know.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from ..errors import StateError
from . import kafka_properties

#: the extra that installs the Python Kafka client
EXTRA = "airflow-provider-streamql[kafka]"

#: librdkafka's own log lines ("Connect to ... failed", once a second while a broker is down):
#: into the runtime's log through Python's logging, never raw onto a command's standard error,
#: where what failed is said once, as the command's error
CLIENT_LOG = logging.getLogger("streamql.kafka.client")
CLIENT_LOG.addHandler(logging.NullHandler())

#: Java-only settings with no meaning for a Python client: dropped (serializers are the
#: Java client's; streamql encodes records itself)
DROPPED = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "ssl.truststore.type",
        "ssl.keystore.type",
        "sasl.login.class",
        "sasl.client.callback.handler.class",
    }
)

#: a Java store setting and, per store type, the librdkafka setting that reads the same file
STORES: dict[str, dict[str, str]] = {
    "ssl.truststore.location": {"PEM": "ssl.ca.location"},
    "ssl.keystore.location": {"PKCS12": "ssl.keystore.location"},
    "ssl.truststore.certificates": {"PEM": "ssl.ca.pem"},
    "ssl.keystore.certificate.chain": {"PEM": "ssl.certificate.pem"},
    "ssl.keystore.key": {"PEM": "ssl.key.pem"},
}
#: the Java default of each store's type setting
STORE_TYPES = {"ssl.truststore": "JKS", "ssl.keystore": "JKS"}

#: SASL login modules whose JAAS options librdkafka takes as ``sasl.username``/``sasl.password``
LOGIN_MODULES = frozenset(
    {
        "org.apache.kafka.common.security.plain.PlainLoginModule",
        "org.apache.kafka.common.security.scram.ScramLoginModule",
    }
)

_JAAS = re.compile(
    r"""^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<options>.*?);?\s*$""", re.S
)
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s;]+)""")


def client_config(settings: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's configuration for the Java client ``settings`` (without ``kafka.`` or
    ``spark.streamql.kafka.`` prefixes). Raises StateError naming a setting it cannot carry."""
    config: dict[str, str] = {}
    for key, value in settings.items():
        if key in DROPPED:
            continue
        if key == "sasl.jaas.config":
            config.update(_jaas_credentials(value))
        elif key in STORES:
            config[_store_setting(key, settings)] = value
        elif key == "ssl.truststore.password" and _store_type("ssl.truststore", settings) == "PEM":
            continue  # a PEM trust store has no password
        else:
            config[key] = value
    if "bootstrap.servers" not in config:
        raise StateError(
            "no Kafka bootstrap servers: give bootstrap.servers in the Kafka client properties "
            f"(${kafka_properties.PROPERTIES_ENV}, the file ${kafka_properties.PROPERTIES_FILE_ENV} names, "
            "or the Airflow connection's kafka_properties)"
        )
    return config


def producer(settings: Mapping[str, str], **overrides: Any):
    """A confluent-kafka Producer for ``settings`` (Java client settings), ``overrides`` given
    as librdkafka settings (``transactional.id=...``)."""
    return _client("Producer", settings, overrides)


def consumer(settings: Mapping[str, str], **overrides: Any):
    """A confluent-kafka Consumer for ``settings``; ``overrides`` as librdkafka settings."""
    return _client("Consumer", settings, overrides)


def admin(settings: Mapping[str, str], **overrides: Any):
    """A confluent-kafka AdminClient for ``settings``; ``overrides`` as librdkafka settings."""
    return _client("AdminClient", settings, overrides)


def require():
    """The confluent_kafka module; a StateError saying what to install if it is missing."""
    try:
        import confluent_kafka
    except ImportError:
        raise StateError(f"talking to Kafka from Python needs confluent-kafka: pip install '{EXTRA}'") from None
    return confluent_kafka


def _client(kind: str, settings: Mapping[str, str], overrides: Mapping[str, Any]):
    confluent_kafka = require()
    config: dict[str, Any] = {**client_config(settings), "logger": CLIENT_LOG, **overrides}
    try:
        if kind == "AdminClient":
            import confluent_kafka.admin

            return confluent_kafka.admin.AdminClient(config)
        return getattr(confluent_kafka, kind)(config)
    except confluent_kafka.KafkaException as e:
        # librdkafka names the setting it refused; mask any value a message might carry
        secrets = kafka_properties.secret_values({k: str(v) for k, v in config.items()})
        message = kafka_properties.mask(str(e.args[0].str() if e.args else e), secrets)
        raise StateError(f"the Kafka client settings are not usable by a Python Kafka client: {message}") from None


def _store_type(store: str, settings: Mapping[str, str]) -> str:
    return settings.get(f"{store}.type", STORE_TYPES[store]).strip().upper()


def _store_setting(key: str, settings: Mapping[str, str]) -> str:
    store = "ssl.truststore" if key.startswith("ssl.truststore") else "ssl.keystore"
    kind = _store_type(store, settings)
    target = STORES[key].get(kind)
    if target is None:
        readable = " or ".join(sorted(STORES[key]))
        raise StateError(
            f"{key!r} is a {kind} store, which a Python Kafka client (librdkafka) cannot read: "
            f"give it as {readable} ({store}.type={sorted(STORES[key])[0]}; keytool converts a JKS store)"
        )
    return target


def _jaas_credentials(jaas: str) -> dict[str, str]:
    """``sasl.username``/``sasl.password`` of a PLAIN or SCRAM JAAS configuration."""
    match = _JAAS.match(jaas)
    module = match.group("module") if match else None
    if module not in LOGIN_MODULES:
        raise StateError(
            "'sasl.jaas.config' names a login module a Python Kafka client (librdkafka) cannot use "
            f"(it takes {', '.join(sorted(m.rsplit('.', 1)[1] for m in LOGIN_MODULES))}); give "
            "sasl.username and sasl.password, or librdkafka's own settings for other mechanisms"
        )
    assert match is not None
    options = {name: _unquote(value) for name, value in _JAAS_OPTION.findall(match.group("options"))}
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise StateError(f"'sasl.jaas.config' has no {' or '.join(missing)} option")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _unquote(value: str) -> str:
    if value[:1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    if value[:1] == "'":
        return value[1:-1]
    return value
