"""Where a rewind to a time cuts a query's checkpoint: the last committed batch before the
first one that read input committed at or after the time, read from the checkpoint alone.

A file source's log records each file it read with the file's modification time (Spark's
``timestamp``: when the file was renamed into the topic, which writes it whole to a hidden
name first) and the log offset of the batch that listed it; the offset log says which log
offset each micro-batch reads up to, and for a Kafka source the offsets per partition it
reads up to, which are compared with Kafka's offsets for the time (looked up by the caller,
which holds the Kafka settings). A micro-batch is the unit a checkpoint can be cut at,
so records of that first batch committed before the time run again too (their output is
taken out with the rest: the output holds each record once either way).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from .checkpoints import last_committed_batch, source_offsets, source_positions
from .layout import Part
from .logs import read_log


@dataclass(frozen=True)
class Cut:
    """Where a rewind to ``timestamp_ms`` puts a checkpoint: after batch ``batch`` (-1: before
    the first). ``first_batch``: the first batch it runs again (None: every batch committed
    read only earlier input, nothing to rewind); ``earliest_ms``: the oldest input time the
    checkpoint recorded (None: it read no file)."""

    timestamp_ms: int
    batch: int
    first_batch: int | None
    earliest_ms: int | None


def holds_state(checkpoint: str) -> bool:
    """Whether the query keeps state in its checkpoint (an aggregation, a deduplication, a
    stream-stream join): a rewind must then restore the state as of the cut too."""
    state = Part(checkpoint).resolve(os.path.join(checkpoint, "state"))
    return os.path.isdir(state) and any(files for _root, _dirs, files in os.walk(state))


#: topic -> partition -> the offset of its first record at or after the time (Kafka's
#: offsets for a time, looked up by the caller)
KafkaOffsets = Mapping[str, Mapping[int, int]]


def kafka_topics_read(checkpoint: str) -> list[str]:
    """The Kafka topics the checkpoint's Kafka sources read."""
    last = last_committed_batch(checkpoint)
    return sorted({t for p in source_positions(checkpoint, last).values() if isinstance(p, dict) for t in p})


def _reads_from(position: object, offsets: KafkaOffsets) -> bool:
    """A Kafka source's end position of a batch passes a record at or after the time."""
    return isinstance(position, dict) and any(
        int(end) > offsets.get(topic, {}).get(int(partition), int(end))
        for topic, ends in position.items()
        if isinstance(ends, dict)
        for partition, end in ends.items()
    )


def cut_at(checkpoint: str, timestamp_ms: int, kafka: KafkaOffsets | None = None) -> Cut:
    """The :class:`Cut` of ``checkpoint`` for a rewind to ``timestamp_ms``: by its file
    sources' logs, and its Kafka sources' offsets against ``kafka``."""
    part = Part(checkpoint)
    last = last_committed_batch(checkpoint)
    # per source: the first log offset that listed a file at or after the time
    firsts: dict[str, int] = {}
    earliest: int | None = None
    sources = part.resolve(os.path.join(checkpoint, "sources"))
    for source in sorted(os.listdir(sources)) if os.path.isdir(sources) else []:
        for log_offset, entries in sorted(read_log(os.path.join(sources, source), part).items()):
            for entry in entries:
                if "path" not in entry:
                    continue  # a Kafka source logs offsets
                stamp = int(entry.get("timestamp", 0))
                earliest = stamp if earliest is None else min(earliest, stamp)
                if stamp >= timestamp_ms:
                    offset = int(entry.get("batchId", log_offset))
                    firsts[source] = min(firsts.get(source, offset), offset)

    def reads_from(batch: int) -> bool:
        ends = source_positions(checkpoint, batch)
        files = any(source_offsets(checkpoint, batch).get(s, -1) >= o for s, o in firsts.items())
        return files or (kafka is not None and any(_reads_from(p, kafka) for p in ends.values()))

    first = next((b for b in range(last + 1) if reads_from(b)), None)
    return Cut(timestamp_ms, last if first is None else first - 1, first, earliest)


def forget_file_sources(checkpoint: str) -> None:
    """A checkpoint cut before its first batch: its file sources' logs go (a source that
    remembers a file never reads it again); a Kafka source's log keeps where it started."""
    part = Part(checkpoint)
    sources = part.resolve(os.path.join(checkpoint, "sources"))
    for source in sorted(os.listdir(sources)) if os.path.isdir(sources) else []:
        folder = part.resolve(os.path.join(sources, source))
        if any("path" in e for entries in read_log(folder, part).values() for e in entries):
            shutil.rmtree(folder)
