"""Checkpoint snapshots around an in-place upgrade, so a failed version can be undone."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from ..storage.layout import snapshot_path


@dataclass
class PendingUpgrade:
    """A new version that has started but not yet proven itself (its readiness window)."""

    previous_version: int
    snapshot: str
    committed_before: int      # last committed batch id when the swap began
    deadline: float            # time.monotonic() by which it counts as ready without a batch


def take_snapshot(checkpoint: str, version: int) -> str:
    """Copy the checkpoint (offsets, commits, sources, state) as version ``version`` left it."""
    target = snapshot_path(checkpoint, version)
    shutil.rmtree(target, ignore_errors=True)
    if os.path.isdir(checkpoint):
        shutil.copytree(checkpoint, target)
    else:
        os.makedirs(target)
    return target


def restore_snapshot(checkpoint: str, snapshot: str) -> None:
    """Put the checkpoint back exactly as the snapshot holds it."""
    shutil.rmtree(checkpoint, ignore_errors=True)
    shutil.copytree(snapshot, checkpoint)


def discard_output(sink_path: str, version: int) -> None:
    """Remove what a rolled-back version renamed into its sink (changelog entries and batch
    files are named with ``v<version>-b<batch>``); the old version re-runs those batches."""
    marker = f"v{version:04d}-b"
    if not os.path.isdir(sink_path):
        return
    for name in os.listdir(sink_path):
        if marker in name:
            path = os.path.join(sink_path, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
