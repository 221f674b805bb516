"""The state a query's checkpoint records, read from its files without Spark: each stateful
operator's name, stores and partitions, the batches its state covers, and the key and value
schemas Spark wrote when the state was first created (``state/<op>/_metadata/metadata`` and
``state/<op>/0[/<store>]/_metadata/schema``). The rows themselves are read with Spark's State
Data Source (:mod:`..runtime.state`). Each file read is checked to lie in the checkpoint
(:class:`.layout.Part`)."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field

from .layout import Part
from .snapshots import STATE_FILE

#: Spark's JSON type names as StreamQL (Spark SQL) spells them
TYPE_NAMES = {"long": "BIGINT", "integer": "INT", "short": "SMALLINT", "byte": "TINYINT"}


@dataclass(frozen=True)
class StateStore:
    """One state store of an operator: its name, partitions and schemas (``[(name, type)]``;
    empty when the checkpoint records none)."""

    name: str
    partitions: int
    key: list[tuple[str, str]] = field(default_factory=list)
    value: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class StateOperator:
    """A stateful operator of a query's checkpoint."""

    operator_id: int
    name: str
    stores: list[StateStore]
    first_batch: int | None  # the batches the state files on disk cover
    last_batch: int | None

    def describe(self) -> list[str]:
        """One line per store: operator, store, partitions, batches, key and value."""
        batches = "no batches" if self.last_batch is None else f"batches {self.first_batch}-{self.last_batch}"
        return [
            f"operator {self.operator_id} {self.name}, store {s.name}: {s.partitions} partitions, {batches}; "
            f"key {show_fields(s.key)}; value {show_fields(s.value)}"
            for s in self.stores
        ]


def show_fields(fields: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in fields) + ")" if fields else "(not recorded)"


def recorded_state(checkpoint: str) -> list[StateOperator]:
    """The stateful operators of ``checkpoint`` ([] for a stateless query, or before its
    first batch). A file Spark has not written yet (or cannot be read) leaves its part out."""
    part = Part(checkpoint)
    root = part.resolve(os.path.join(checkpoint, "state"))
    if not os.path.isdir(root):
        return []
    operators = []
    for op in sorted((n for n in os.listdir(root) if n.isdigit()), key=int):
        info = _operator_info(part.resolve(os.path.join(root, op, "_metadata", "metadata")))
        if info is None:
            continue
        name = info.get("operatorInfo", {}).get("operatorName", "?")
        stores = []
        for store in info.get("stateStoreInfo", []):
            store_name, partitions = store.get("storeName", "default"), int(store.get("numPartitions", 0))
            folder = os.path.join(root, op, "0") if store_name == "default" else os.path.join(root, op, "0", store_name)
            key, value = _schemas(part.resolve(os.path.join(folder, "_metadata", "schema")))
            stores.append(StateStore(store_name, partitions, key, value))
        first, last = _batches(os.path.join(root, op))
        operators.append(StateOperator(int(op), name, stores, first, last))
    return operators


def _operator_info(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        return json.loads(lines[1]) if len(lines) > 1 and lines[0] == "v1" else None
    except (OSError, ValueError):
        return None


def _schemas(path: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The key and value schemas of a ``v2`` schema file: Java's ``writeUTF("v2")``, then
    for each schema an int count of chunks and each chunk ``writeUTF``-encoded JSON."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        at, texts = 0, []
        (size,) = struct.unpack_from(">H", data, at)
        version, at = data[at + 2 : at + 2 + size].decode(), at + 2 + size
        if version != "v2":
            return [], []
        for _schema in range(2):
            (chunks,) = struct.unpack_from(">i", data, at)
            at, text = at + 4, ""
            for _chunk in range(chunks):
                (size,) = struct.unpack_from(">H", data, at)
                text, at = text + data[at + 2 : at + 2 + size].decode(), at + 2 + size
            texts.append(text)
        return _fields(json.loads(texts[0])), _fields(json.loads(texts[1]))
    except (OSError, ValueError, struct.error, IndexError):
        return [], []


def _fields(schema: dict) -> list[tuple[str, str]]:
    return [(f["name"], spark_type(f["type"])) for f in schema.get("fields", [])]


def spark_type(t) -> str:
    """A Spark JSON data type as SQL: ``"long"`` -> ``BIGINT``, a struct -> ``STRUCT<a: INT>``."""
    if isinstance(t, str):
        return TYPE_NAMES.get(t, t.upper())
    kind = t.get("type")
    if kind == "struct":
        return "STRUCT<" + ", ".join(f"{f['name']}: {spark_type(f['type'])}" for f in t["fields"]) + ">"
    if kind == "array":
        return f"ARRAY<{spark_type(t['elementType'])}>"
    if kind == "map":
        return f"MAP<{spark_type(t['keyType'])}, {spark_type(t['valueType'])}>"
    return str(kind).upper()


def _batches(operator_folder: str) -> tuple[int | None, int | None]:
    """The batches the state files of partition 0 cover (a state version is batch + 1)."""
    versions = []
    for _root, _dirs, files in os.walk(os.path.join(operator_folder, "0")):
        versions += [int(m.group(1)) for m in map(STATE_FILE.match, files) if m]
    return (min(versions) - 1, max(versions) - 1) if versions else (None, None)
