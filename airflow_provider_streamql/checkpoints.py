"""Reading a Spark streaming checkpoint from outside the driver: which batches committed
and which input files they consumed. Used to answer "has the query caught up?"."""
from __future__ import annotations

import json
import os

from .topics import read_log, uri_path


def last_committed_batch(checkpoint: str) -> int:
    """Highest batch id in ``commits/`` (-1 when none has committed)."""
    commits = os.path.join(checkpoint, "commits")
    if not os.path.isdir(commits):
        return -1
    ids = [int(n) for n in os.listdir(commits) if n.isdigit()]
    return max(ids, default=-1)


def committed_source_offsets(checkpoint: str) -> dict[str, int]:
    """Source index -> the file source's log offset that the last committed micro-batch
    read up to. Source offsets count only batches with new files, so they differ from
    micro-batch ids; the offset log of the committed batch maps one to the other."""
    last = last_committed_batch(checkpoint)
    path = os.path.join(checkpoint, "offsets", str(last))
    if last < 0 or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()[2:]  # version, metadata, then one offset per source
    offsets = {}
    for index, line in enumerate(lines):
        if line.strip().startswith("{"):
            offsets[str(index)] = int(json.loads(line).get("logOffset", -1))
    return offsets


def processed_files(checkpoint: str) -> set[str]:
    """Input files of every committed batch, over all file sources of the query."""
    done: set[str] = set()
    for source, offset in committed_source_offsets(checkpoint).items():
        for log_offset, entries in read_log(os.path.join(checkpoint, "sources", source)).items():
            for entry in entries:
                if entry.get("batchId", log_offset) <= offset:
                    done.add(uri_path(entry["path"]))
    return done


def planned_watermark_ms(checkpoint: str) -> int:
    """The event-time watermark (epoch ms) of the latest planned batch, as Spark recorded it
    in the offset log; 0 before any. This is what a restart resumes from: an advance computed
    after the last planned batch lives only in the driver's memory."""
    offsets = os.path.join(checkpoint, "offsets")
    ids = [int(n) for n in os.listdir(offsets) if n.isdigit()] if os.path.isdir(offsets) else []
    if not ids:
        return 0
    with open(os.path.join(offsets, str(max(ids))), encoding="utf-8") as f:
        lines = f.read().splitlines()
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0)) if len(lines) > 1 else 0
