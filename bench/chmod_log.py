"""A `chmod` that logs each run, first on a driver's PATH: how many `chmod` processes Hadoop's
local file system starts (runtime/local_fs.py). Used by bench/batch_cost.py --count-chmod and
tests/test_local_fs.py."""

from __future__ import annotations

import os
import shlex


class ChmodLog:
    """A folder holding the logging ``chmod`` (:attr:`bin`, to put first on a PATH) and the
    log it appends a line to per run."""

    def __init__(self, folder: str):
        self.bin = os.path.join(folder, "bin")
        self.log = os.path.join(folder, "chmod.log")
        os.makedirs(self.bin)
        script = os.path.join(self.bin, "chmod")
        with open(script, "w") as f:
            f.write(f'#!/bin/sh\necho "$@" >> {shlex.quote(self.log)}\nexec /bin/chmod "$@"\n')
        os.chmod(script, 0o755)

    def path(self, path: str) -> str:
        """``path`` (a PATH's value) with the logging ``chmod`` first."""
        return f"{self.bin}{os.pathsep}{path}"

    def count(self) -> int:
        """How many times it ran so far."""
        if not os.path.exists(self.log):
            return 0
        with open(self.log) as f:
            return sum(1 for _ in f)
