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


def processed_files(checkpoint: str) -> set[str]:
    """Input files of every committed batch, over all file sources of the query."""
    last = last_committed_batch(checkpoint)
    sources_dir = os.path.join(checkpoint, "sources")
    done: set[str] = set()
    if last < 0 or not os.path.isdir(sources_dir):
        return done
    for source in os.listdir(sources_dir):
        for batch, entries in read_log(os.path.join(sources_dir, source)).items():
            for entry in entries:
                if entry.get("batchId", batch) <= last:
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
