"""Faults in the storage under a query, as the runtime names them: a checkpoint file a crash
left truncated or garbled (a file system without atomic rename, a disk that filled up
mid-write), found before Spark reads it; and a write that failed because its file system is
full.

Spark reads, when a query starts, its ``metadata``, the last two entries of ``offsets/``, the
last of ``commits/`` and the state files of the version it resumes from. Each is checked for
the form Spark writes (a version line and JSON for the logs; lz4-java's block framing for
the state files), so a damaged one is named with what is wrong, before Spark starts over or
fails deep in a task. :func:`damage_report` says what to do about it, :func:`full_disk_report`
what to do about a full file system.
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass

from .checkpoints import OFFSET_LINE, last_committed_batch
from .layout import Part, snapshot_folder

#: the first line of a log entry Spark writes: its format's version
VERSION_LINE = re.compile(r"v[1-9][0-9]*")
#: a state file (HDFS state store): ``<version>.delta`` or ``<version>.snapshot``
STATE_FILE = re.compile(r"(?P<version>[0-9]+)\.(?P<kind>delta|snapshot)")
#: lz4-java's block framing, Spark's default codec for state files: a magic, then per block
#: a token byte, compressed and original lengths and a checksum (little-endian ints); the
#: stream ends with an empty block
LZ4_MAGIC = b"LZ4Block"
LZ4_HEADER = struct.Struct("<Biii")


#: the remedy when no copy of a damaged file is at hand
REBUILD = "or rebuild its output (DROP its sink and CREATE it again: it reads its input from the start)"


@dataclass(frozen=True)
class Damage:
    """A damaged checkpoint file: its path and what is wrong with it."""

    path: str
    problem: str


def find_damage(checkpoint: str) -> Damage | None:
    """The first damaged file Spark would read to start the query from ``checkpoint``
    (None: none, or no checkpoint yet). Reads only; every path is checked to lie in it."""
    part = Part(checkpoint)
    if not os.path.isdir(checkpoint):
        return None
    checks = [(os.path.join(checkpoint, "metadata"), _metadata_problem)]
    logged: dict[str, list[int]] = {}
    for log, rest in (("offsets", _offsets_problem), ("commits", _commit_problem)):
        folder = part.resolve(os.path.join(checkpoint, log))
        ids = logged[log] = sorted(int(n) for n in os.listdir(folder) if n.isdigit()) if os.path.isdir(folder) else []
        kept = ids[-2:] if log == "offsets" else ids[-1:]
        checks += [(os.path.join(folder, str(i)), _log_problem(rest)) for i in kept]
    if logged["commits"] and logged["commits"][-1] not in logged["offsets"]:
        # Spark would plan from the last entry it finds, or from the start with none: read again
        last = logged["commits"][-1]
        return Damage(os.path.join(checkpoint, "offsets", str(last)), f"missing: batch {last} committed")
    checks += [(path, _state_problem) for path in _state_files(checkpoint, part)]
    for path, problem_of in checks:
        path = part.resolve(path)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            problem = problem_of(f.read())
        if problem:
            return Damage(path, problem)
    return None


def newest_whole_snapshot(checkpoint: str, snapshots: list[tuple[int, str]]) -> int | None:
    """The number of the newest of ``snapshots`` ((number, folder) pairs, as the catalog
    records them) whose files are whole: a RESTORE snapshot taken of a damaged checkpoint
    keeps the damage, so it is passed over."""
    for number, folder in sorted(snapshots, reverse=True):
        copy = snapshot_folder(checkpoint, folder)
        if os.path.isdir(copy) and find_damage(copy) is None:
            return number
    return None


def damage_report(query_id: str, damage: Damage, checkpoint: str, newest_snapshot: int | None) -> str:
    """What the runtime says of a query whose checkpoint is damaged: the query, the file
    (its path in the checkpoint, and where that is) and what to do."""
    where = os.path.relpath(damage.path, checkpoint)
    if newest_snapshot is not None:
        remedy = (
            f"PAUSE it, RESTORE {query_id} TO SNAPSHOT {newest_snapshot} (its newest whole snapshot), then RESUME it"
        )
    else:
        remedy = (
            f"it has no snapshot to restore: PAUSE it, put back {where} from a backup of the checkpoint "
            f"and RESUME it, {REBUILD}"
        )
    return (
        f"query {query_id}: its checkpoint file {where!r} is damaged ({damage.problem}; at {damage.path}); "
        f"it is not started, so nothing is read again silently: {remedy}"
    )


def dead_letter_damage_report(query_id: str, damage: Damage, checkpoint: str) -> str:
    """What the runtime says of a query whose dead-letter companion's checkpoint (next to
    ``checkpoint``, the query's) is damaged. Snapshots hold the query's checkpoint alone, so
    the remedy is a backup or a rebuild: a companion started afresh would give its batches
    numbers its dead-letter files already have, and pass bad records over."""
    where = os.path.relpath(damage.path, os.path.dirname(checkpoint))
    return (
        f"query {query_id}: its dead-letter checkpoint file {where!r} is damaged ({damage.problem}; at "
        f"{damage.path}); it is not started, so no bad record is passed over or logged twice: PAUSE it, put back "
        f"{where} from a backup and RESUME it, {REBUILD}"
    )


def _text(data: bytes) -> list[str] | None:
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def _json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _metadata_problem(data: bytes) -> str | None:
    lines = _text(data)
    if not lines:
        return "empty" if lines is not None else "not text"
    return None if _json_object(lines[0]) else "not the query's JSON metadata"


def _log_problem(rest):
    """A log entry's check: a version line, then ``rest`` on the lines after it."""

    def problem(data: bytes) -> str | None:
        lines = _text(data)
        if lines is None:
            return "not text"
        if not lines:
            return "empty"
        if not VERSION_LINE.fullmatch(lines[0]):
            return f"its first line {lines[0][:40]!r} is not a log version"
        return rest(lines[1:])

    return problem


def _offsets_problem(lines: list[str]) -> str | None:
    if not lines or not _json_object(lines[0]):
        return "truncated: its batch metadata is missing or cut"
    for line in lines[1:]:
        match = OFFSET_LINE.fullmatch(line.strip())
        if match is None or (match["offset"] != "-" and not _json_object(match["offset"])):
            return f"a source offset is cut or garbled: {line[:60]!r}"
    return None if len(lines) > 1 else "truncated: no source offset"


def _commit_problem(lines: list[str]) -> str | None:
    return None if lines and _json_object(lines[0]) else "truncated: its commit metadata is missing or cut"


def _state_problem(data: bytes) -> str | None:
    """A state file in lz4-java's block framing, whole up to its closing empty block."""
    at = 0
    while True:
        if data[at : at + len(LZ4_MAGIC)] != LZ4_MAGIC:
            return "truncated" if at == len(data) or len(data) - at < len(LZ4_MAGIC) else "not lz4 block data"
        at += len(LZ4_MAGIC)
        if len(data) - at < LZ4_HEADER.size:
            return "truncated"
        _, compressed, original, _ = LZ4_HEADER.unpack_from(data, at)
        at += LZ4_HEADER.size
        if compressed < 0 or original < 0 or len(data) - at < compressed:
            return "truncated" if compressed >= 0 else "garbled block header"
        at += compressed
        if original == 0 and compressed == 0:
            return None if at == len(data) else "data after its last block"


def _state_files(checkpoint: str, part: Part) -> list[str]:
    """The state files the version a start resumes from is rebuilt from, per store
    (``state/<operator>/<partition>[/<store>]``): the newest snapshot up to it and the
    deltas after that snapshot."""
    state = part.resolve(os.path.join(checkpoint, "state"))
    version = last_committed_batch(checkpoint) + 1
    found = []
    for folder, _, names in os.walk(state) if os.path.isdir(state) else []:
        files = {(int(m["version"]), m["kind"]): n for n in names if (m := STATE_FILE.fullmatch(n))}
        base = max((v for v, kind in files if kind == "snapshot" and v <= version), default=None)
        found += [
            os.path.join(folder, name)
            for (v, kind), name in sorted(files.items())
            if v <= version and (v == base if kind == "snapshot" else base is None or v > base)
        ]
    return found


#: how the OS says a write found no room: the file system is full, a quota is used up, or
#: the file reached the largest size the process may write (RLIMIT_FSIZE)
NO_ROOM = ("No space left on device", "Disk quota exceeded", "File too large")
#: a path in a Java or Python error's text (``file:/...`` URIs included)
PATH_IN_TEXT = re.compile(r"(?:file:)?(/[^\s'\"(),:]+)")


def full_disk_report(query_id: str, error_text: str, roots: list[str]) -> str | None:
    """What the runtime says of a query whose batch failed because a write found no room,
    from the whole text of its error (the cause is deep in Spark's stack, not on its first
    line); None if that is not why it failed. It names the first path under ``roots`` (the
    home, the allowed roots) the text holds, so the operator knows which file system to free."""
    reason = next((r for r in NO_ROOM if r in error_text), None)
    if reason is None:
        return None
    inside = [root.rstrip(os.sep) + os.sep for root in roots]
    paths = [p.rstrip(".;") for p in PATH_IN_TEXT.findall(error_text) if p.startswith(tuple(inside))]
    where = f" writing {paths[0]}" if paths else ""
    return (
        f"query {query_id}: a write found no room ({reason}){where}: free space on that file system, "
        f"then PAUSE and RESUME {query_id} (or wait: it retries by itself after its back-off); nothing "
        f"of the batch was committed, it runs again from the checkpoint"
    )
