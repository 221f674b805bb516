"""What planning one statement returns: a :class:`Step`, its phases and how they fail, and the
file effects a step is built from (each returning its undo)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from ..errors import StreamQLError, ValidationError
from ..language.statements import Statement
from ..results import Result
from ..storage.layout import Part

#: a file effect: done inside the catalog transaction, it returns how to undo it
FileEffect = Callable[[], Callable[[], None] | None]


@dataclass
class Step:
    """A planned statement, in four phases: its catalog rows, then its file effects (still
    inside the transaction, under the catalog's write lock, after every check passed; an
    effect returns its undo in case the transaction fails), then work after the commit
    (deleting what was moved aside), then its read (a pull query, DESCRIBE ... STATE's rows:
    outside any catalog transaction, after the script's writes are committed; it fills in
    ``result``)."""

    result: Result
    write: Callable[[Connection], None] | None = None
    files: FileEffect | None = None
    after_commit: Callable[[Result], None] | None = None
    log: bool = True
    read: Callable[[], None] | None = None
    #: the streams, tables and queries the read looks at, by name
    reads: frozenset[str] = frozenset()

    def run_files(self) -> Callable[[], None]:
        """Run the file effect; its undo. An OS failure is an error that names the statement
        (the transaction is rolled back and earlier effects undone)."""
        try:
            return (self.files() if self.files else None) or (lambda: None)
        except OSError as e:
            raise StreamQLError(f"{_quoted(self)} could not change {e.filename!r}: {e.strerror}") from None

    def run_read(self, *, wrote: bool) -> None:
        """Run the read (a pull query), outside any catalog transaction; in a script that
        wrote, a read that fails says that the writes before it were applied."""
        if self.read is None:
            return
        try:
            self.read()
        except OSError as e:
            raise StreamQLError(f"{_quoted(self)} could not read {e.filename!r}: {e.strerror}") from None
        except StreamQLError as e:
            if wrote:
                e.message += " (the script's statements that change the catalog were applied before it ran)"
                e.args = (str(e),)
            raise


def reads_last(statements: list[Statement], steps: list[Step]) -> None:
    """Refuse a script in which a read comes before a statement that changes what it reads:
    reads run once the whole script's writes are committed, so it would show what the
    statement after it did, not what the script says at its place."""
    for i, step in enumerate(steps):
        changed = [
            (later, stmt)
            for later, stmt in zip(steps[i + 1 :], statements[i + 1 :], strict=True)
            if (later.write or later.files) and stmt.changes & step.reads
        ]
        if step.read is not None and changed:
            raise ValidationError(
                f"{_quoted(step)} reads {', '.join(sorted(changed[0][1].changes & step.reads))} before "
                f"{_quoted(changed[0][0])} changes it: a script's reads run once all its writes are "
                "applied, so put the read after it or run it apart"
            )


def _quoted(step: Step) -> str:
    return repr(step.result.statement.strip()[:80])


# -- file effects and their undos ------------------------------------------------------
def make_folder(path: str) -> Callable[[], None]:
    """Create a source's folder; the undo removes it again if it was created here (empty).
    A link at its name (or above it) is refused, never created through."""
    path = Part(path).folder
    existed = os.path.isdir(path)
    os.makedirs(path, exist_ok=True)
    return (lambda: None) if existed else (lambda: remove_empty(path))


def remove_empty(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def remove_files(paths) -> None:
    for path in paths:
        if path and os.path.isfile(path):
            os.remove(path)
