"""The sink side of a RESTORE: what a query wrote to its file sink after the batch it is
rewound to, taken out and kept with the RESTORE snapshot (and a restored RESTORE snapshot's
kept output put back), undone whole if anything fails."""

from __future__ import annotations

import os
import shutil

from ..catalog import QueryInfo
from ..errors import StateError
from ..storage.hardlinks import link_tree
from ..storage.layout import Part
from ..storage.snapshots import later_output


class OutputSwap:
    """The sink side of a restore: the query's output of batches after ``cut`` moved into
    the new RESTORE snapshot's ``keep`` folder, then the restored snapshot's kept output
    (if it is a RESTORE snapshot) copied back in; :meth:`undo` reverses both, and a swap
    that fails midway undoes itself."""

    def __init__(self, sink_path: str | None, query: QueryInfo, cut: int, keep: str, bring_back: str | None):
        self.keep = Part(keep).folder  # checked before anything is removed
        self.taken: list[tuple[str, str]] = []
        self.returned: list[str] = []
        shutil.rmtree(keep, ignore_errors=True)  # left by a crash: its restore never committed
        os.makedirs(keep)
        if sink_path is None:
            return
        try:
            sink = Part(sink_path)
            for path in later_output(sink_path, query.id, table=query.kind == "CTAS", batch=cut):
                aside = os.path.join(keep, os.path.basename(path))
                sink.resolve(path)  # a link out of the sink is refused; one inside it moves as a link
                shutil.move(path, aside)  # a sink under an allowed root may be another file system
                self.taken.append((path, aside))
            if bring_back is not None and os.path.isdir(bring_back):
                kept = Part(bring_back)
                for name in sorted(os.listdir(bring_back)):
                    target = os.path.join(sink_path, name)
                    if os.path.lexists(target):
                        raise StateError(f"{target!r} exists: the sink changed since the snapshot was taken")
                    self.returned.append(target)
                    # linked: the kept copy stays for another restore of the same snapshot
                    link_tree(kept, kept.resolve(os.path.join(bring_back, name)), target)
        except BaseException:
            self.undo()
            raise

    def undo(self) -> None:
        for path in reversed(self.returned):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                os.remove(path)
        for path, aside in reversed(self.taken):
            shutil.move(aside, path)
        shutil.rmtree(self.keep, ignore_errors=True)
