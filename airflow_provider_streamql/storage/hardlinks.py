"""Kept copies of files nobody changes in place, made as hard links where the file system
allows.

Spark writes every checkpoint file (offsets, commits, a source's log, state) whole under a
temporary name and renames it in, and a sink's batch files are renamed in once: a file at a
name is never rewritten, only replaced or deleted. A hard link is then as good a copy as a
byte copy, at a fraction of its time: a checkpoint holds some 600 small files (the last 100
batches' offsets, commits and source log entries, with their checksums) and a file source's
compacted log, which grows with every file the query has read. Where the file system refuses
a link (another device, a file system without them), the file is copied.

One path of Hadoop's would write a linked file in place: when the rename of a file written
whole fails (rename(2) refused, say an I/O error) and a name is replaced, Hadoop's local file
system falls back to copying the bytes over the old name. A rename that fails in the folder
a copy then succeeds in is not expected on a local disk.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

from .layout import Part

#: why a link may be refused where a copy works
_NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP)


def link_or_copy(source: str, target: str) -> None:
    """``target`` becomes another name of ``source``'s file, or a copy of it. Only a regular
    file of the runtime's own user is linked, and the name itself, never what a link swapped in
    meanwhile leads to: a file someone else put there is copied as it is now, so that they
    cannot change the kept copy later, nor have the runtime make a name for a file of its own."""
    status = os.lstat(source)
    if stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid():
        try:
            os.link(source, target, follow_symlinks=False)
            return
        except OSError as e:
            if e.errno not in _NO_LINK:
                raise
    shutil.copy2(source, target)


def link_tree(part: Part, source: str, target: str) -> None:
    """``source`` (a file or a folder of ``part``) at ``target``: every name checked by
    ``part`` before it is read (no link out of it is followed), every file linked or copied."""
    if os.path.isdir(source):
        shutil.copytree(source, target, copy_function=link_or_copy, ignore=part.guard)
    else:
        link_or_copy(source, target)
