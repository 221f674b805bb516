"""Kafka client settings kept out of argv: the Java properties text a runtime reads at start
from its environment or a file, which settings are secrets, and their values masked.

A runtime's Kafka settings are ``spark.streamql.kafka.<setting>`` in its Spark configuration
(runtime/kafka.py), which spark-submit's argv (``ps`` shows it to every user of the machine)
and the Spark UI's Environment tab show. Secrets (``sasl.jaas.config``, ``ssl.*.password``,
...) come instead from Kafka client properties (``key=value`` lines, as Kafka's own
``client.properties``): the text itself in ``$STREAMQL_KAFKA_PROPERTIES`` (the environment of
a client-mode spark-submit, or a Kubernetes secret), or a file named by
``$STREAMQL_KAFKA_PROPERTIES_FILE`` (a mounted secret, a file shipped to a YARN container).
Nothing here imports Spark: the Airflow operator checks a connection's properties with it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import StateError

#: the runtime's Kafka settings in its Spark configuration: ``spark.streamql.kafka.<setting>``
CONF_PREFIX = "spark.streamql.kafka."
PROPERTIES_ENV = "STREAMQL_KAFKA_PROPERTIES"
PROPERTIES_FILE_ENV = "STREAMQL_KAFKA_PROPERTIES_FILE"
#: the most a properties text or file may hold
MAX_BYTES = 1 << 20

#: Kafka client settings that hold secrets (those Kafka types PASSWORD, and any setting whose
#: name says password, secret or passphrase): never taken from argv
SECRET_SETTINGS = ("sasl.jaas.config", "ssl.keystore.key")
SECRET_WORDS = ("password", "secret", "passphrase")

#: a quoted option of a JAAS configuration that is a credential: ``password="..."``
_JAAS_CREDENTIAL = re.compile(r"""\w*(?:password|secret|passphrase|token)\w*\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*')""", re.I)
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


def is_secret(setting: str) -> bool:
    """Whether a Kafka client setting (``sasl.jaas.config``, without any prefix) holds a secret."""
    name = setting.strip().lower()
    return name in SECRET_SETTINGS or any(word in name for word in SECRET_WORDS)


def secret_in_argv(key: str) -> str | None:
    """Why the Spark configuration key ``key`` may not be given on a command line (which ``ps``
    shows every user of the machine): it is a Kafka secret. None: it may."""
    if key.startswith(CONF_PREFIX) and is_secret(key[len(CONF_PREFIX) :]):
        return (
            f"{key!r} is a Kafka secret, and a command line is visible to every user of the machine "
            f"(ps): give it in ${PROPERTIES_ENV} or in the file ${PROPERTIES_FILE_ENV} names "
            f"(Kafka client properties, e.g. sasl.jaas.config=...)"
        )
    return None


def parse(text: str, source: str) -> dict[str, str]:
    """Java properties text (``java.util.Properties.load``: ``key=value``, ``key: value`` or
    ``key value`` lines, ``#``/``!`` comments, a trailing ``\\`` continues a line, ``\\t``,
    ``\\n``, ``\\uXXXX`` escapes) as settings. An error names ``source`` and the line, never
    a value."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:  # an environment variable's bytes that are not UTF-8
        raise StateError(f"Kafka properties {source}: not UTF-8 text (at character {e.start})") from None
    if size > MAX_BYTES:
        raise StateError(f"Kafka properties {source}: more than {MAX_BYTES} bytes")
    settings: dict[str, str] = {}
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    number = 0
    while number < len(lines):
        start, logical = number + 1, lines[number].lstrip(_BLANK)
        number += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical) and number < len(lines):
            logical = logical[:-1] + lines[number].lstrip(_BLANK)
            number += 1
        if _continues(logical):
            logical = logical[:-1]
        key, value = _split(logical)
        key, value = _unescape(key, source, start), _unescape(value, source, start)
        if not key:
            raise StateError(f"Kafka properties {source}: line {start} has a value but no setting name")
        if "\0" in key + value:
            raise StateError(f"Kafka properties {source}: line {start} holds a NUL character")
        if key.startswith(("spark.", "kafka.")):
            raise StateError(
                f"Kafka properties {source}: line {start}: {key!r} is not a Kafka client setting; "
                f"write it as Kafka's own client.properties does (e.g. sasl.jaas.config=...)"
            )
        settings[key] = value
    return settings


def render(settings: Mapping[str, object]) -> str:
    """``settings`` as properties text that :func:`parse` reads back as they are."""
    return "".join(f"{_escape(str(k), key=True)}={_escape(str(v), key=False)}\n" for k, v in settings.items())


def load(environ: Mapping[str, str]) -> dict[str, str]:
    """The runtime's Kafka properties: the file ``$STREAMQL_KAFKA_PROPERTIES_FILE`` names, then
    the text of ``$STREAMQL_KAFKA_PROPERTIES`` (whose settings win); empty with neither."""
    settings: dict[str, str] = {}
    path = environ.get(PROPERTIES_FILE_ENV)
    if path:
        where = f"file {path!r} (${PROPERTIES_FILE_ENV})"
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as e:
            raise StateError(f"cannot read the Kafka properties {where}: {e.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise StateError(f"Kafka properties {where}: not UTF-8 text (byte at offset {e.start})") from None
        settings.update(parse(text, where))
    if environ.get(PROPERTIES_ENV):
        settings.update(parse(environ[PROPERTIES_ENV], f"in ${PROPERTIES_ENV}"))
    return settings


def secret_values(settings: Mapping[str, str]) -> set[str]:
    """What of ``settings`` must never be shown: each secret setting's value, and the quoted
    credentials inside a JAAS configuration (``password="..."``)."""
    values = {value for key, value in settings.items() if is_secret(key) and value.strip()}
    for value in list(values):
        values |= {m.group(1)[1:-1] for m in _JAAS_CREDENTIAL.finditer(value)} - {""}
    return values


def mask(text: str, secrets: set[str]) -> str:
    """``text`` with each of ``secrets`` shown as ``***`` (the longest first)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _continues(line: str) -> bool:
    """A line ending in an odd number of backslashes goes on on the next line."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """(key, value) of a logical line: the key ends at an unescaped ``=``, ``:`` or blank."""
    i = 0
    while i < len(line) and line[i] not in "=:" + _BLANK:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def _unescape(text: str, source: str, line: int) -> str:
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        code = text[i + 1]
        if code == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise StateError(f"Kafka properties {source}: line {line} has a malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(code, code))
            i += 2
    return "".join(out)


def _escape(text: str, *, key: bool) -> str:
    out = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char in "=:#!" and (key or i == 0) or char == " " and (key or i == 0):
            out.append("\\" + char)
        elif not char.isprintable() and ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)
