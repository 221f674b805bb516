"""Where a query's Kafka sources start on a new checkpoint (a new query, a replacing
upgrade): the session settings ``auto.offset.reset`` (``earliest`` or ``latest``, as in
ksqlDB) and ``starting.timestamp`` (the first offset of each partition whose record time is
at or after it: Kafka's offsets for a time). An existing checkpoint resumes from its offsets
whatever they say.

A persistent query's ``WITH (start = 'earliest' | 'latest' | '<time>')`` says the same for
that statement alone and takes precedence over the session settings (:func:`with_start`):
Flink's per-table ``scan.startup.mode`` beside ksqlDB's session-wide ``auto.offset.reset``.
File topics take a time too: their first file committed (renamed into place) at or after it.

A timestamp is given as ISO-8601 text with its zone (``2026-11-26T09:00:00Z``,
``2026-11-26 10:00:00+01:00``) or as epoch milliseconds; it is resolved once, at SET, to
the text :func:`timestamp_text` writes, which the runtime reads back with
:func:`timestamp_millis`.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass

OFFSET_RESET = "auto.offset.reset"
STARTING_TIMESTAMP = "starting.timestamp"
#: a persistent query's WITH property: where its new checkpoint starts
START = "start"
#: epoch milliseconds Kafka's record timestamps and a datetime can both hold
LATEST_MILLIS = 253402300799999  # 9999-12-31T23:59:59.999Z


class Reset(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True)
class Starting:
    """Where a Kafka source starts on a new checkpoint: at ``reset``, or, with
    ``timestamp_ms``, at the first offset of each partition at or after that time (a
    partition with no such record starts at its end)."""

    reset: Reset = Reset.LATEST
    timestamp_ms: int | None = None

    @classmethod
    def of(cls, settings: Mapping[str, str]) -> Starting:
        """The start a query's settings (as the catalog records them) say."""
        stamp = settings.get(STARTING_TIMESTAMP)
        return cls(Reset(settings.get(OFFSET_RESET, "latest")), None if stamp is None else timestamp_millis(stamp))


def timestamp_millis(text: str) -> int:
    """``text`` (ISO-8601 with a zone, or epoch milliseconds) as epoch milliseconds; a
    ValueError saying what is wrong otherwise."""
    value = text.strip()
    if value.isdigit():
        millis = int(value)
    else:
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                "not a time: give ISO-8601 with its zone ('2026-11-26T09:00:00Z') or epoch milliseconds"
            ) from None
        if moment.tzinfo is None:
            raise ValueError("a time without a zone is ambiguous: end it with Z or an offset such as +01:00")
        millis = round(moment.timestamp() * 1000)
    if not 0 <= millis <= LATEST_MILLIS:
        raise ValueError("out of range: between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z")
    return millis


def timestamp_text(millis: int) -> str:
    """Epoch milliseconds as the ISO-8601 UTC text a setting records (and SHOW shows)."""
    moment = datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def with_start(settings: Mapping[str, str], start: object) -> dict[str, str]:
    """``settings`` as a statement's ``WITH (start = ...)`` leaves them (None: unchanged):
    ``earliest``/``latest`` set ``auto.offset.reset`` and drop a session's
    ``starting.timestamp``; a time sets ``starting.timestamp`` (resolved to
    :func:`timestamp_text`). A ValueError saying what is wrong with ``start`` otherwise."""
    out = dict(settings)
    if start is None:
        return out
    text = str(start).strip()
    if isinstance(start, bool) or not text:
        raise ValueError("must be 'earliest', 'latest' or a time")
    if text.lower() in {r.value for r in Reset}:
        out[OFFSET_RESET] = text.lower()
        out.pop(STARTING_TIMESTAMP, None)
        return out
    try:
        out[STARTING_TIMESTAMP] = timestamp_text(timestamp_millis(text))
    except ValueError as e:
        raise ValueError(f"must be 'earliest', 'latest' or a time: {e}") from None
    return out
