"""Reading a Spark streaming checkpoint from outside the driver: which batches committed
and which input files they consumed. Used to answer "has the query caught up?". Every file
read or removed is checked to lie in the checkpoint (:class:`.layout.Part`)."""

from __future__ import annotations

import json
import os
import re
import uuid

from .layout import Part
from .logs import read_log, uri_path

#: one source's line of an offset log entry: ``{...}`` (sources by position: the index is
#: the folder under ``sources/``) or ``<name>:{...}`` (named sources, Spark's source
#: evolution: the name is the folder); ``-`` is a source with no offset yet
OFFSET_LINE = re.compile(r"(?:(?P<name>[A-Za-z0-9_]+):)?(?P<offset>\{.*|-)")


#: what a log write a stop interrupted leaves in ``offsets/`` or ``commits/``: Spark's temp
#: file ``.<batch>.<uuid>.tmp`` and its checksum ``..<batch>.<uuid>.tmp.crc``
INTERRUPTED_WRITE = re.compile(r"\.\.?\d+\.[0-9a-f-]{36}\.tmp(\.crc)?")


def remove_interrupted_writes(checkpoint: str) -> list[str]:
    """Delete what interrupted log writes left in a stopped query's ``offsets/`` and
    ``commits/``, and return their paths. Spark never reads those files, but it refuses to
    start a stateful query whose ``offsets/`` holds a file and no batch (a stop during the
    write of ``offsets/0``), so the query could never be resumed."""
    removed = []
    part = Part(checkpoint)
    for log in ("offsets", "commits"):
        folder = part.resolve(os.path.join(checkpoint, log))
        names = os.listdir(folder) if os.path.isdir(folder) else []
        for name in names:
            if INTERRUPTED_WRITE.fullmatch(name):
                os.remove(os.path.join(folder, name))
                removed.append(os.path.join(folder, name))
    return removed


def last_committed_batch(checkpoint: str) -> int:
    """Highest batch id in ``commits/`` (-1 when none has committed)."""
    return max(_batch_ids(checkpoint, "commits"), default=-1)


def _batch_ids(checkpoint: str, log: str) -> list[int]:
    """The batch ids the checkpoint's ``log`` holds: ``offsets`` (Spark plans a batch there
    before it runs it) or ``commits``."""
    folder = Part(checkpoint).resolve(os.path.join(checkpoint, log))
    return [int(n) for n in os.listdir(folder) if n.isdigit()] if os.path.isdir(folder) else []


#: the file in a checkpoint holding the last batch whose dead letters (of its file reads,
#: under LOG_AND_CONTINUE) were sent: ``runtime/file_dead_letters.py``
DEAD_LETTERS_SENT = "dead_letters_sent"


def dead_letters_sent(checkpoint: str) -> int | None:
    """The last batch of the query whose file reads' dead letters were sent (None: not
    recorded; :class:`ValueError` naming the file when it holds no batch number)."""
    path = Part(checkpoint).resolve(os.path.join(checkpoint, DEAD_LETTERS_SENT))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    if not text.lstrip("-").isdigit():
        raise ValueError(f"{path!r} holds {text[:40]!r}, not the number of a batch")
    return int(text)


def record_dead_letters_sent(checkpoint: str, batch_id: int | None) -> None:
    """Record that the dead letters of every batch up to ``batch_id`` were sent (None: the
    query no longer sends them; the record is removed). Written to a new file of its own and
    renamed in: a crash leaves the old value or the new one, and a link at either name is
    replaced, never followed."""
    path = os.path.join(Part(checkpoint).resolve(checkpoint), DEAD_LETTERS_SENT)  # the name itself not followed
    if batch_id is None:
        if os.path.lexists(path):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)  # a new query's, as Spark makes it
    aside = f"{path}.{uuid.uuid4().hex}.tmp"
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"{batch_id}\n")
    os.replace(aside, path)


def first_planned_batch(checkpoint: str) -> int:
    """Lowest batch id still in ``offsets/`` (0 before any: Spark drops the oldest)."""
    return min(_batch_ids(checkpoint, "offsets"), default=0)


def has_offsets(checkpoint: str, batch_id: int) -> bool:
    """Whether the offset log still holds micro-batch ``batch_id`` (Spark keeps the last
    ``spark.sql.streaming.minBatchesToRetain``, 100 by default)."""
    return os.path.isfile(Part(checkpoint).resolve(os.path.join(checkpoint, "offsets", str(batch_id))))


def last_planned_batch(checkpoint: str) -> int:
    """Highest batch id in ``offsets/`` (-1 before any): a batch is planned before it runs."""
    return max(_batch_ids(checkpoint, "offsets"), default=-1)


def source_positions(checkpoint: str, batch_id: int) -> dict[str, object]:
    """Source -> where micro-batch ``batch_id`` reads up to, as the offset log holds it: a
    file source's log offset, a Kafka source's offsets per topic and partition. A source is
    known by its folder under ``sources/``: its index, or its name when the query names its
    sources."""
    path = Part(checkpoint).resolve(os.path.join(checkpoint, "offsets", str(batch_id)))
    if batch_id < 0 or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8", errors="replace") as f:  # a damaged entry reads as no position
        lines = f.read().splitlines()[2:]
    positions: dict[str, object] = {}
    for index, line in enumerate(lines):
        match = OFFSET_LINE.fullmatch(line.strip())
        if match and match["offset"] != "-":
            try:
                value = json.loads(match["offset"])
            except ValueError:  # cut by a crash (storage/faults.py names it)
                continue
            key = match["name"] or str(index)
            positions[key] = value.get("logOffset", value) if isinstance(value, dict) else value
    return positions


def source_offsets(checkpoint: str, batch_id: int) -> dict[str, int]:
    """Source -> the file source's log offset that micro-batch ``batch_id`` reads up
    to, from the offset log ({} if that batch was never planned; -1 for a source that logs
    no files, such as Kafka). Source offsets count only batches with new files, so they
    differ from micro-batch ids."""
    return {
        source: position if isinstance(position, int) else -1
        for source, position in source_positions(checkpoint, batch_id).items()
    }


def committed_source_offsets(checkpoint: str) -> dict[str, int]:
    """:func:`source_offsets` of the last committed micro-batch."""
    return source_offsets(checkpoint, last_committed_batch(checkpoint))


def _source_files(checkpoint: str, source: str, after: int, upto: int) -> set[str]:
    """Files a file source logged with log offsets in (after, upto]."""
    files = set()
    for log_offset, entries in read_log(os.path.join(checkpoint, "sources", source), Part(checkpoint)).items():
        for entry in entries:  # a Kafka source logs offsets, not files
            if "path" in entry and after < entry.get("batchId", log_offset) <= upto:
                files.add(uri_path(entry["path"]))
    return files


def processed_files(checkpoint: str) -> set[str]:
    """Input files of every committed batch, over all file sources of the query."""
    return {
        f
        for source, offset in committed_source_offsets(checkpoint).items()
        for f in _source_files(checkpoint, source, -1, offset)
    }


def processed_by(checkpoint: str, batch_ids: list[int]) -> dict[int, set[str]]:
    """For each micro-batch of ``batch_ids``, the input files processed once it committed
    (over all file sources); a batch whose offset log entry is gone is left out. The source
    logs are read once."""
    logged: dict[str, dict[int, list[dict]]] = {}
    found: dict[int, set[str]] = {}
    for batch_id in batch_ids:
        offsets = source_offsets(checkpoint, batch_id)
        if not offsets:
            continue
        found[batch_id] = set()
        for source, upto in offsets.items():
            if source not in logged:
                logged[source] = read_log(os.path.join(checkpoint, "sources", source), Part(checkpoint))
            found[batch_id].update(
                uri_path(entry["path"])
                for log_offset, entries in logged[source].items()
                for entry in entries
                if "path" in entry and entry.get("batchId", log_offset) <= upto
            )
    return found


def batch_files(checkpoint: str, batch_id: int) -> set[str]:
    """The input files micro-batch ``batch_id`` reads (planned, whether or not it committed)."""
    before = source_offsets(checkpoint, batch_id - 1)
    return {
        f
        for source, offset in source_offsets(checkpoint, batch_id).items()
        for f in _source_files(checkpoint, source, before.get(source, -1), offset)
    }


def planned_watermark_ms(checkpoint: str) -> int:
    """The event-time watermark (epoch ms) of the latest planned batch, as Spark recorded it
    in the offset log; 0 before any. This is what a restart resumes from: an advance computed
    after the last planned batch lives only in the driver's memory."""
    last = last_planned_batch(checkpoint)
    if last < 0:
        return 0
    path = Part(checkpoint).resolve(os.path.join(checkpoint, "offsets", str(last)))
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    try:
        metadata = json.loads(lines[1]) if len(lines) > 1 else {}
    except ValueError:  # cut by a crash: the query will not start on it (storage/faults.py)
        return 0
    return int(metadata.get("batchWatermarkMs", 0)) if isinstance(metadata, dict) else 0


def kafka_positions(checkpoint: str) -> dict[str, dict[str, int]]:
    """Kafka topic -> partition -> the offset the query reads next: the end of its last
    committed batch, else where each Kafka source started (its initial offsets, kept in
    ``sources/``). Empty for a query that reads no Kafka topic or has no checkpoint yet."""
    positions: dict[str, dict[str, int]] = {}
    committed = source_positions(checkpoint, last_committed_batch(checkpoint)).values()
    found = [p for p in committed if isinstance(p, dict)] or _initial_kafka_offsets(checkpoint)
    for position in found:
        for topic, partitions in position.items():
            if isinstance(partitions, dict):
                positions.setdefault(topic, {}).update({str(p): int(o) for p, o in partitions.items()})
    return positions


def _initial_kafka_offsets(checkpoint: str) -> list[dict]:
    """Each Kafka source's first offsets, as its initial-offset file holds them (a version
    line, then the offsets' JSON); other sources' files are not JSON objects of topics."""
    sources = Part(checkpoint).resolve(os.path.join(checkpoint, "sources"))
    found = []
    for name in sorted(os.listdir(sources)) if os.path.isdir(sources) else []:
        path = Part(checkpoint).resolve(os.path.join(sources, name, "0"))
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[1:]
        try:
            value = json.loads(lines[0]) if lines else None
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found
