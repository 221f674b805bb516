"""A query's checkpoint copied as of one committed batch, and the output a rewind removes.

A snapshot may be taken while the query runs: Spark's checkpoint files of committed batches
never change (offsets, commits, file-source log entries, state versions), so the copy is
trimmed to the last batch committed when the copy began, which is what Spark would recover
from after a crash at that moment. Later batches' files, temp files and files Spark's state
maintenance deleted mid-copy are left out. The checkpoint is read and the copy written only
where the layout placed them (:class:`.layout.Part`): a link out of either is refused.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import uuid

from ..errors import StateError
from .checkpoints import last_committed_batch, source_offsets
from .layout import Part
from .logs import read_log

#: a state store version file: ``<version>.delta|snapshot`` (HDFS) or ``.zip|.changelog``
#: (RocksDB); a state version is the batch id + 1
STATE_FILE = re.compile(r"^(\d+)\.(delta|snapshot|zip|changelog)$")
#: a log entry of offsets/, commits/, sources/<i>/ or an operator's metadata: ``<n>[.compact]``
LOG_FILE = re.compile(r"^(\d+)(\.compact)?$")
COPY_ATTEMPTS = 3


def copy_committed(checkpoint: str, target: str, *, batch: int | None = None) -> int:
    """Copy ``checkpoint`` into ``target`` (created) as it stood when ``batch`` (default:
    its last) committed; return that batch id (-1: nothing committed, an empty copy).
    Nothing is left at ``target`` if the copy fails; nothing is done if ``target`` or the
    checkpoint is a link or lies behind one."""
    source, target = Part(checkpoint), Part(target).folder  # before anything is removed
    try:
        for _attempt in range(COPY_ATTEMPTS):
            upto = last_committed_batch(checkpoint) if batch is None else batch
            offsets = source_offsets(checkpoint, upto)
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(target)
            if os.path.isdir(checkpoint):
                _copy(source, checkpoint, target)
            _trim(target, upto, offsets)
            if _source_logs_complete(target, offsets):
                return upto
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    raise StateError(
        f"the checkpoint {checkpoint!r} kept changing while it was copied ({COPY_ATTEMPTS} attempts); try again"
    )


def give_new_identity(checkpoint: str) -> None:
    """Make a copied checkpoint another query's: Spark keeps the query's id in ``metadata``
    and stops the running query with the same id when one starts (a shadow or a dry run on a
    copy would stop the live query). Offsets, commits and state do not depend on the id."""
    path = Part(checkpoint).resolve(os.path.join(checkpoint, "metadata"))
    if os.path.exists(path):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(json.dumps({"id": str(uuid.uuid4())}) + "\n")
        os.replace(path + ".tmp", path)
        crc = os.path.join(checkpoint, ".metadata.crc")
        if os.path.exists(crc):
            os.remove(crc)  # Hadoop checks a file against its .crc: the old one no longer matches


def _copy(part: Part, source: str, target: str) -> None:
    """``source`` (in ``part``) into ``target``; a link is copied as what it points at, inside
    ``part`` only."""
    for entry in os.scandir(source):
        name = entry.name
        if name.startswith("temp-") or name.endswith(".tmp") or ".tmp." in name:
            continue  # an unfinished write; its final name is renamed in when complete
        destination = os.path.join(target, name)
        try:
            if entry.is_dir(follow_symlinks=False):
                os.makedirs(destination, exist_ok=True)
                _copy(part, entry.path, destination)
            elif entry.is_symlink():
                real = part.resolve(entry.path)
                if os.path.isdir(real):
                    shutil.copytree(real, destination, ignore=part.guard)
                else:
                    shutil.copy2(real, destination)
            else:
                shutil.copy2(entry.path, destination)
        except FileNotFoundError:
            continue  # deleted by Spark's maintenance: older than every version kept
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise


def _plain(name: str) -> str:
    """A checksum file's subject: ``.1.delta.crc`` -> ``1.delta``."""
    if name.startswith(".") and name.endswith(".crc"):
        return name[1:-4]
    return name


def _trim(target: str, batch: int, offsets: dict[str, int]) -> None:
    """Remove what batches after ``batch`` wrote to the copy."""
    for root, _dirs, files in os.walk(target):
        parts = os.path.relpath(root, target).split(os.sep)
        for name in files:
            plain, limit = _plain(name), None
            log_entry, state_file = LOG_FILE.match(plain), STATE_FILE.match(plain)
            if parts[0] in ("offsets", "commits") and log_entry:
                limit, number = batch, int(log_entry.group(1))
            elif parts[0] == "sources" and len(parts) == 2 and log_entry and offsets.get(parts[1], -1) >= 0:
                # a file source's log (a Kafka source's holds its initial offsets: kept)
                limit, number = offsets[parts[1]], int(log_entry.group(1))
            elif parts[0] == "state" and state_file:
                limit, number = batch + 1, int(state_file.group(1))
            elif parts[0] == "state" and "_metadata" in parts and log_entry:
                limit, number = batch, int(log_entry.group(1))  # operator metadata per batch
            if limit is not None and number > limit:
                os.remove(os.path.join(root, name))


def _source_logs_complete(target: str, offsets: dict[str, int]) -> bool:
    """Every file source's log in the copy holds each entry up to the batch's offset, from
    0 or a compaction on: a compaction written mid-copy past it (its trim, and Spark's
    deletion of the entries it replaced) would otherwise lose them."""
    for source, offset in offsets.items():
        if offset < 0:
            continue
        folder = os.path.join(target, "sources", source)
        ids = sorted(read_log(folder, Part(target)))
        if not ids or ids != list(range(ids[0], offset + 1)):
            return False
        if ids[0] != 0 and not os.path.exists(os.path.join(folder, f"{ids[0]}.compact")):
            return False
    return True


def own_output(sink_path: str, query_id: str, *, table: bool) -> list[tuple[int, str]]:
    """(batch id, path) of what a query renamed into its sink, under any of its versions: a
    table's changelog entries ``v<version>-b<batch>``, a stream's batch files
    ``<query>-v<version>-b<batch>...`` (never another writer's files), by batch."""
    if not os.path.isdir(Part(sink_path).folder):
        return []
    own = re.compile(("" if table else re.escape(query_id) + "-") + r"v\d{4}-b(\d{12})")
    found = [
        (int(m.group(1)), os.path.join(sink_path, name)) for name in os.listdir(sink_path) if (m := own.match(name))
    ]
    return sorted(found)


def later_output(sink_path: str, query_id: str, *, table: bool, batch: int) -> list[str]:
    """What a query renamed into its sink for batches after ``batch`` (see :func:`own_output`)."""
    return sorted(path for b, path in own_output(sink_path, query_id, table=table) if b > batch)
