"""Where streamql keeps things on disk, and where a user-given path may point.

One home directory (``$STREAMQL_HOME``) holds everything::

    <home>/catalog.db                             the embedded SQLite catalog
    <home>/topics/<NAME>/                         file topics (streams and tables)
    <home>/checkpoints/<QUERY_ID>/                a query's Spark checkpoint
    <home>/checkpoints/<QUERY_ID>.dead_letters/   its dead-letter companion's checkpoint (Kafka reads)
    <home>/checkpoints/<QUERY_ID>.snapshots/vNNNN/  snapshots taken before in-place upgrades
    <home>/checkpoints/<QUERY_ID>.snapshots/sNNNN/  snapshots taken by SNAPSHOT and RESTORE
    <home>/runtimes/<pipeline>-<time>.log         drivers started by SubmitRuntimeOperator

A source's ``WITH (path=...)`` is resolved here and nowhere else: a relative path lies under
``<home>/topics``; an absolute one must be inside ``<home>/topics`` or inside a root the
operator allows (``$STREAMQL_ALLOWED_PATHS``, ``os.pathsep``-separated). Never the home, the
catalog, another part of the home, a folder holding another source or nested in one.

What a statement names is checked when it is named; what is on disk is checked when it is
used. Every file streamql reads, writes, moves or deletes is resolved with :class:`Part`
right before: the folder the layout placed (a source's folder, a checkpoint, a query's
snapshots) must still be its own real path, and a path inside it must resolve inside it. A
link that leads out is refused with a :class:`~..errors.StateError`, never followed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Sequence

from ..catalog.urls import catalog_file
from ..errors import StateError, ValidationError
from ..language.names import check_name

ALLOWED_PATHS_ENV = "STREAMQL_ALLOWED_PATHS"
#: the folders of the home, by what they hold
TOPICS, CHECKPOINTS, RUNTIMES = "topics", "checkpoints", "runtimes"
#: suffixes of a checkpoint's companions (the dead-letter query's checkpoint, snapshots)
DEAD_LETTERS, SNAPSHOTS = ".dead_letters", ".snapshots"
#: longest path and path component the layout accepts (Linux PATH_MAX and NAME_MAX)
MAX_PATH, MAX_COMPONENT = 4096, 255
#: prefix of a folder moved aside by DROP ... DELETE TOPIC until the catalog commit; hidden
#: ('.'), so neither Spark's file source nor streamql's readers ever list it
MOVED_ASIDE = ".dropped-"


def allowed_roots_from_env() -> tuple[str, ...]:
    """The roots in ``$STREAMQL_ALLOWED_PATHS`` (absolute paths; empty parts ignored)."""
    return tuple(p for p in os.environ.get(ALLOWED_PATHS_ENV, "").split(os.pathsep) if p.strip())


def is_within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies inside it (both absolute and normalised)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def home_of_checkpoint(checkpoint: str) -> str:
    """The home a query's checkpoint (``<home>/checkpoints/<ID>``) lives in."""
    return os.path.dirname(os.path.dirname(checkpoint))


def dead_letter_checkpoint(checkpoint: str) -> str:
    return checkpoint + DEAD_LETTERS


def snapshots_of(checkpoint: str) -> str:
    return checkpoint + SNAPSHOTS


def snapshot_path(checkpoint: str, version: int) -> str:
    """Where the checkpoint is kept as ``version`` left it, before an in-place upgrade."""
    return os.path.join(snapshots_of(checkpoint), f"v{version:04d}")


def snapshot_folder(checkpoint: str, folder: str) -> str:
    """Where snapshot ``folder`` (``vNNNN`` before an upgrade, ``sNNNN`` numbered) of a
    checkpoint lives; ``folder`` comes from the catalog and is checked all the same."""
    if not folder or folder != os.path.basename(folder) or folder.startswith("."):
        raise ValidationError(f"{folder!r} is not a snapshot folder name")
    return os.path.join(snapshots_of(checkpoint), folder)


def snapshot_output(checkpoint: str, folder: str) -> str:
    """Where a RESTORE snapshot keeps the sink files the restore took out."""
    return snapshot_folder(checkpoint, folder) + ".output"


def query_folders(checkpoint: str) -> list[str]:
    """Everything on disk that belongs to one query: checkpoint, dead-letter checkpoint,
    snapshots."""
    return [checkpoint, dead_letter_checkpoint(checkpoint), snapshots_of(checkpoint)]


class Layout:
    """The paths of one home, and the rules for paths users give.

    :param home: the home directory.
    :param allowed_roots: folders outside the home where sources may live (default
        ``$STREAMQL_ALLOWED_PATHS``).
    :param protected: further paths no source may be, contain or lie in (e.g. a SQLite
        catalog kept outside the home).
    """

    def __init__(self, home: str, *, allowed_roots: Iterable[str] | None = None, protected: Iterable[str] = ()):
        self.home = os.path.realpath(home)
        roots = allowed_roots_from_env() if allowed_roots is None else allowed_roots
        self.allowed_roots = tuple(os.path.realpath(r) for r in roots if r)
        self.protected = tuple(os.path.realpath(p) for p in protected if p)
        self.topics = os.path.join(self.home, TOPICS)
        self.checkpoints = os.path.join(self.home, CHECKPOINTS)
        self.runtimes = os.path.join(self.home, RUNTIMES)
        self.catalog_file = catalog_file(self.home)  # the catalog names its own file

    # -- what streamql names itself ----------------------------------------------------
    def topic(self, name: str) -> str:
        """The default folder of stream or table ``name``."""
        return os.path.join(self.topics, check_name(name, "stream or table name"))

    def checkpoint(self, query_id: str) -> str:
        return os.path.join(self.checkpoints, check_name(query_id, "query ID"))

    def runtime_log(self, pipeline: str, stamp: str) -> str:
        return os.path.join(self.runtimes, f"{check_name(pipeline, 'pipeline')}-{stamp}.log")

    # -- what users name ------------------------------------------------------------------
    def source_path(self, given: object, others: dict[str, str] | None = None) -> str:
        """The absolute folder ``WITH (path=...)`` names, or :class:`ValidationError` saying
        which rule it breaks. ``others`` maps the names of the other file sources to their
        folders: a source never holds another one or lies inside one."""
        path = self._resolve(given)
        inside_topics = is_within(path, self.topics) and path != self.topics
        inside_root = any(is_within(path, r) and path != r for r in self.allowed_roots)
        if not (inside_topics or inside_root):
            if path == self.topics:
                raise ValidationError(
                    f"path {given!r} is the topics folder itself, which holds every stream; name a folder inside it"
                )
            roots = f" or under {', '.join(map(repr, self.allowed_roots))}" if self.allowed_roots else ""
            raise ValidationError(
                f"path {given!r} ({path}) is outside the topics folder "
                f"{self.topics!r}{roots}; a source lives under the topics folder "
                f"or under a root allowed in ${ALLOWED_PATHS_ENV}"
            )
        # an allowed root may contain the home: the home's own parts stay off limits
        for forbidden, what in (
            (self.home, "the streamql home"),
            (self.catalog_file, "the catalog"),
            (self.checkpoints, "the checkpoints folder"),
            (self.runtimes, "the runtime logs folder"),
            *((p, "the catalog") for p in self.protected),
        ):
            if is_within(forbidden, path) or (is_within(path, forbidden) and not inside_topics):
                raise ValidationError(f"path {given!r} ({path}) overlaps {what} ({forbidden})")
        for name, other in (others or {}).items():
            other = os.path.realpath(other)
            if is_within(path, other) or is_within(other, path):
                how = "is" if path == other else "holds" if is_within(other, path) else "lies inside"
                raise ValidationError(
                    f"path {given!r} ({path}) {how} the folder of {name} ({other}); "
                    f"each source needs a folder of its own"
                )
        return path

    def _resolve(self, given: object) -> str:
        if not isinstance(given, str) or not given.strip():
            raise ValidationError(f"path must be a non-empty string, not {given!r}")
        bad = next((c for c in given if ord(c) < 32 or ord(c) == 127), None)
        if bad is not None:
            raise ValidationError(f"path {given!r} contains the control character {bad!r}")
        if len(given.encode("utf-8", "surrogatepass")) > MAX_PATH:
            raise ValidationError(f"path is longer than {MAX_PATH} bytes")
        long = next((p for p in given.split(os.sep) if len(p.encode("utf-8", "surrogatepass")) > MAX_COMPONENT), None)
        if long is not None:
            raise ValidationError(f"path {given[:60]!r}...: a folder name is longer than {MAX_COMPONENT} bytes")
        # symlinks resolved: a link inside the topics folder cannot point outside it
        return os.path.realpath(given if os.path.isabs(given) else os.path.join(self.topics, given))

    def may_delete(self, path: str) -> bool:
        """Whether DROP ... DELETE TOPIC may delete ``path``: only folders where sources and
        checkpoints are allowed, never anything else."""
        path = os.path.realpath(path)
        return any(
            is_within(path, root) and path != root for root in (self.topics, self.checkpoints, *self.allowed_roots)
        )


class Part:
    """A folder of the layout about to be used, checked: it is where the catalog recorded it
    (its own real path: it is no link and lies behind none), or :class:`StateError` naming the
    link. :meth:`resolve` then checks each path inside it at the moment of use.

    The catalog records real paths (:meth:`Layout.source_path` and the home are resolved), so
    a link at or above a recorded folder was put there since, and is refused. Inside the
    folder a link is followed only while it stays inside it.
    """

    def __init__(self, folder: str):
        self.folder = os.path.abspath(folder)
        if os.path.realpath(self.folder) != self.folder:
            first = next((p for p in _prefixes(self.folder) if os.path.islink(p)), None)
            raise StateError(_refused(self.folder, first, self.folder))

    def resolve(self, path: str) -> str:
        """The real path of ``path`` (this folder or a path inside it, about to be read,
        written, moved or deleted); :class:`StateError` if a link on the way leads out."""
        path = os.path.abspath(path)
        if not is_within(path, self.folder):
            raise StateError(f"{path!r} is not inside {self.folder!r}")
        at = self.folder
        for name in os.path.relpath(path, self.folder).split(os.sep):
            at = os.path.join(at, name) if name != os.curdir else at
            if os.path.islink(at):  # one lstat per component below the folder
                real = os.path.realpath(at)
                if not is_within(real, self.folder):
                    raise StateError(_refused(path, at, self.folder))
                at = real
        return at

    def guard(self, directory: str, names: list[str]) -> set[str]:
        """For ``shutil.copytree(..., ignore=part.guard)``: checks each name the copy is
        about to read (:meth:`resolve`) and ignores none."""
        for name in names:
            self.resolve(os.path.join(directory, name))
        return set()


def _prefixes(path: str) -> list[str]:
    """``/a/b/c`` -> ``/a``, ``/a/b``, ``/a/b/c``."""
    parts = path.split(os.sep)
    return [os.sep.join(parts[:i]) or os.sep for i in range(2, len(parts) + 1)]


def _refused(path: str, link: str | None, folder: str) -> str:
    """Why ``path`` is refused: ``link`` on it, and where that leads (outside ``folder``)."""
    if link is None:  # changed under our feet: no link found any more
        return f"{path!r} resolves to {os.path.realpath(path)!r}, not inside {folder!r}"
    target, real = os.readlink(link), os.path.realpath(link)
    shown = repr(target) if os.path.join(os.path.dirname(link), target) == real else f"{target!r} ({real})"
    how = "is a link to" if link == path else f"lies behind a link: {link!r} leads to"
    return (
        f"{path!r} {how} {shown}; streamql never follows a link out of the folder it uses "
        f"(replace the link with what it stands for)"
    )


class MovedAside:
    """Folders renamed to hidden siblings inside the catalog transaction (so a writer that
    commits after it finds the name free and its data safe), deleted after the commit, put
    back if the transaction fails."""

    def __init__(self, paths: Sequence[str]):
        self.moves: list[tuple[str, str]] = []
        for path in paths:  # each is where it was placed, no link: else nothing is moved
            Part(path)
        try:
            for path in paths:
                if os.path.lexists(path):
                    aside = os.path.join(
                        os.path.dirname(path),
                        f"{MOVED_ASIDE}{uuid.uuid4().hex[:12]}-{os.path.basename(path)}"[:MAX_COMPONENT],
                    )
                    os.rename(path, aside)
                    self.moves.append((path, aside))
        except BaseException:
            self.restore()  # a rename that failed midway puts back the ones before it
            raise

    def restore(self) -> None:
        for path, aside in reversed(self.moves):
            if not os.path.lexists(path):
                os.rename(aside, path)

    def purge(self) -> None:
        for _path, aside in self.moves:
            if os.path.isdir(aside) and not os.path.islink(aside):
                shutil.rmtree(aside, ignore_errors=True)
            elif os.path.lexists(aside):
                os.remove(aside)
