"""Spark's metadata logs (a file sink's ``_spark_metadata``, a checkpoint's file-source
logs), read without Spark, each file checked to lie in the folder it is read from. A file
sink's entries are read relative to the sink's own folder (:func:`sink_file`)."""

from __future__ import annotations

import json
import os
from urllib.parse import unquote, urlparse

from ..errors import StateError
from .layout import Part

SINK_LOG = "_spark_metadata"


def is_data_name(name: str) -> bool:
    """Spark's file source skips names starting with ``_`` or ``.``; so do we."""
    return not name.startswith(("_", "."))


def uri_path(uri: str) -> str:
    """``file:///a/b`` (as Spark logs it) -> ``/a/b``."""
    return os.path.realpath(unquote(urlparse(uri).path) if "://" in uri or uri.startswith("file:") else uri)


def read_log(directory: str, part: Part) -> dict[int, list[dict]]:
    """A Spark metadata log (file sink or file source) in ``part``: batch id -> entries,
    compactions expanded. Each file is ``v1`` followed by one JSON object per line."""
    directory = part.resolve(directory)
    if not os.path.isdir(directory):
        return {}
    names = [n for n in os.listdir(directory) if is_data_name(n) and n.split(".")[0].isdigit()]
    batches: dict[int, list[dict]] = {}
    compact = max((int(n.split(".")[0]) for n in names if n.endswith(".compact")), default=-1)
    for name in names:
        batch = int(name.split(".")[0])
        if batch < compact or (batch == compact and not name.endswith(".compact")):
            continue
        with open(part.resolve(os.path.join(directory, name)), encoding="utf-8") as f:
            lines = f.read().splitlines()[1:]
        batches[batch] = [json.loads(line) for line in lines if line.strip()]
    return batches


def sink_file(entry: str, part: Part) -> str:
    """The file a file sink's log entry names, read relative to the sink's folder ``part``.
    Spark logs the absolute ``file:`` URI of each file it wrote into that folder: its name
    is taken there. An entry naming any other place is refused, not skipped: a reader
    never gets a silently partial answer, nor a file from outside the folder."""
    parsed = urlparse(entry)
    path = os.path.normpath(unquote(parsed.path))
    if parsed.scheme not in ("", "file") or os.path.dirname(path) != part.folder:
        raise StateError(
            f"the log {os.path.join(part.folder, SINK_LOG)!r} lists {entry!r} ({path}), which is not a "
            f"file of the folder it describes ({part.folder!r}); streamql reads only that folder's files"
        )
    return part.resolve(path)
