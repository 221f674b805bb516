"""What ``PRINT`` shows of a file topic: its records as stored, oldest file first, each with
its event time, key and value (ksqlDB's ``rowtime: ..., key: ..., value: ...``), and where
it stopped, so that a caller following the topic reads only what was written since."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..catalog import SourceInfo
from . import topics
from .pull import data_files

#: the columns of a printed record
COLUMNS = ["rowtime", "key", "value", "file"]


@dataclass(frozen=True)
class Printed:
    """Where a PRINT stands: the records shown this time (:data:`COLUMNS`), every file read
    so far, how many records were read (for ``INTERVAL``) and shown in all."""

    rows: list[list[Any]] = field(default_factory=list)
    files: frozenset[str] = frozenset()
    read: int = 0
    shown: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Where it stands, without the rows (a JSON value: a follower hands it back)."""
        return {"files": sorted(self.files), "read": self.read, "shown": self.shown}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Printed:
        return cls(files=frozenset(data["files"]), read=data["read"], shown=data["shown"])


def skip_all(src: SourceInfo) -> Printed:
    """Where a PRINT without FROM BEGINNING starts: after every record stored now."""
    return Printed(files=frozenset(data_files(src)))


def print_records(src: SourceInfo, since: Printed, *, interval: int = 1, limit: int | None = None) -> Printed:
    """The records of ``src`` in the files ``since`` has not read, oldest file first: every
    ``interval``-th record read, until ``limit`` are shown in all."""
    rows: list[list[Any]] = []
    files, read, shown = set(since.files), since.read, since.shown
    keys = src.key_columns
    for path in data_files(src):
        if path in files:
            continue
        if limit is not None and shown >= limit:
            break
        files.add(path)  # a file is read whole or, once the limit is reached, left as read
        tombstones = re.search(topics.TOMBSTONE_NAME, path) is not None
        records = topics.read_file(path, src.format, src.columns, delimiter=topics.value_delimiter(src.properties))
        for record in records:
            read += 1
            if (read - 1) % interval or (limit is not None and shown >= limit):
                continue
            shown += 1
            rows.append(
                [
                    _text(record.get(src.timestamp_column)) if src.timestamp_column else None,
                    _key(record, keys),
                    None if tombstones else json.dumps(record, default=str, separators=(",", ":")),
                    path.rsplit("/", 1)[-1],
                ]
            )
    return Printed(rows, frozenset(files), read, shown)


def _key(record: dict[str, Any], keys: list[str]) -> str | None:
    """The record's key as a Kafka record of it holds it: one key column's text, several as
    a JSON object, none: no key."""
    if not keys:
        return None
    if len(keys) == 1:
        return _text(record.get(keys[0]))
    return json.dumps({k: record.get(k) for k in keys}, default=str, separators=(",", ":"))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
