"""``streamql shell`` (and ``streamql`` alone): an interactive prompt like ksqlDB's CLI.

A request runs when a ``;`` outside quotes and comments ends what was typed (the language's
own cut, :func:`~..language.script.cut`); its statements run as one script, as ``streamql
exec`` runs them (all applied or none), through a :class:`Console` that prints results as
``exec`` does. ``RUN SCRIPT '<file>'`` runs a file the same way. ``SET`` and ``UNSET`` hold
for the rest of the session. History (GNU readline) is kept across sessions in
``$STREAMQL_HISTORY`` or ``~/.streamql_history``; TAB completes (:mod:`.completion`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Protocol

from ..errors import ParseError, StreamQLError
from ..language.script import Cut, Piece, cut
from ..results import Result
from ..views.reader import Reader
from .completion import candidates

PROMPT = "streamql> "
#: the prompt while a statement is open (no ``;`` has ended it yet)
CONTINUATION = "       > "
#: what leaves the shell (as does Ctrl-D), typed alone on a line, with or without ``;``
LEAVE = ("exit", "quit")
#: what prints the statement forms
HELP = ("help", "?")
HISTORY_ENV = "STREAMQL_HISTORY"
HISTORY_FILE = "~/.streamql_history"
#: lines kept in the history file
HISTORY_LENGTH = 1000
#: the forms :data:`HELP` prints: (form, what it does)
FORMS = (
    ("CREATE [OR REPLACE] STREAM|TABLE s (col TYPE [KEY], ...) WITH (...)", "declare a source"),
    ("CREATE [OR REPLACE] STREAM|TABLE s [WITH (...)] AS SELECT ...", "a persistent query"),
    ("INSERT INTO s SELECT ... | INSERT INTO s [(cols)] VALUES (...)", "another writer | append records"),
    ("ALTER STREAM|TABLE s ADD COLUMN c TYPE", "append a column to a declared source"),
    ("SELECT ... FROM s [WHERE ...] [LIMIT n]", "a pull query: what s holds now"),
    ("SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]", "a push query: s's new rows (Ctrl-C stops)"),
    ("SHOW|LIST STREAMS|TABLES|QUERIES|TOPICS|PROPERTIES|SNAPSHOTS [EXTENDED]", "list"),
    ("DESCRIBE s|query [EXTENDED|STATE]   EXPLAIN query", "describe"),
    ("PRINT s [FROM BEGINNING] [INTERVAL n] [LIMIT n]", "follow a topic's records (Ctrl-C stops)"),
    ("PAUSE|RESUME|TERMINATE query|ALL", "control queries"),
    ("ALTER QUERY q SET|UNSET max_records_per_batch|max_files_per_batch [= n]", "a query's rate limit"),
    ("DROP STREAM|TABLE [IF EXISTS] s [DELETE TOPIC]", "drop a source"),
    ("SNAPSHOT q | RESTORE q TO SNAPSHOT n | PROMOTE|DISCARD|DIFF q", "snapshots and shadows"),
    ("PROMOTE q WHEN READY [WITHIN 5 MINUTES] [LAG <= n]", "promote a shadow once it caught up"),
    ("SET 'auto.offset.reset' = 'earliest' | UNSET '...'", "a setting for the rest of the session"),
    ("RUN SCRIPT 'file.sql'", "run a file's statements as one script"),
    ("help | ? | exit | quit | Ctrl-D", "this list; leave (Ctrl-C cancels the input)"),
)


class Console(Protocol):
    """What the shell runs through; the command line's faces print as ``exec`` prints."""

    def run(self, script: str, settings: Mapping[str, str]) -> list[Result] | None:
        """Run ``script`` as one script from the session's ``settings`` and print what it
        returns or why it failed (then None)."""

    def read(self, path: str) -> str | None:
        """The text of the file ``path``; None (said why) if it cannot be read."""

    def show(self, result: Result) -> None:
        """Print ``result`` as a statement's result is printed."""

    def error(self, error: StreamQLError) -> None:
        """Print ``error`` as a statement's error is printed."""


class Shell:
    """The prompt loop over ``console``; ``reader`` gives the names TAB completes.

    :param interactive: prompts, history and completion (standard input is a terminal);
        otherwise the text read is run as it comes, without prompts.
    """

    def __init__(self, reader: Reader, console: Console, *, interactive: bool):
        self.reader = reader
        self.console = console
        self.interactive = interactive
        #: the session's SET properties, carried into each request
        self.settings: dict[str, str] = {}
        #: the lines of the open request
        self.lines: list[str] = []

    def loop(self) -> int:
        """Read and run requests until Ctrl-D, ``exit`` or ``quit``; the exit code (0)."""
        history = self._start_readline() if self.interactive else None
        try:
            while True:
                try:
                    line = input((CONTINUATION if self.lines else PROMPT) if self.interactive else "")
                except EOFError:
                    self._run_rest()
                    return 0
                except KeyboardInterrupt:  # Ctrl-C: the input so far is dropped
                    print(flush=True)
                    self.lines = []
                    continue
                if not self._take(line):
                    return 0
        finally:
            if history is not None:
                _save_history(history)
            if self.interactive:
                print(flush=True)

    def _take(self, line: str) -> bool:
        """Take one typed line; whether the shell goes on."""
        word = line.strip().rstrip(";").strip().lower()
        if not self.lines and word in LEAVE:
            return False
        if not self.lines and word in HELP:
            self.console.show(Result("", columns=["form", "what"], rows=[list(f) for f in FORMS]))
            return True
        self.lines.append(line)
        request = cut("\n".join(self.lines))
        if request.whole:  # else a quote, a comment or a statement is still open: read on
            self.lines = []
            self._run(request)
        return True

    def _run_rest(self) -> None:
        """At the end of the input, what is left unended runs as ``exec`` runs a script's
        last statement without its ``;``."""
        if self.lines:
            request = cut("\n".join([*self.lines, ";"]))  # on a line of its own: not in a -- comment
            self.lines = []
            if request.readable:
                self._run(request)

    def _run(self, request: Cut) -> None:
        """Run a whole request: consecutive statements as one script, a RUN SCRIPT's file as
        another; the first that fails ends it (those before it stay applied)."""
        try:
            batch: list[Piece] = []
            for piece in request.ended:
                path = piece.script_file()
                if path is None:
                    batch.append(piece)
                    continue
                if batch and not self._script(batch):
                    return
                batch = []
                text = self.console.read(path)
                if text is None or not self._apply(self.console.run(text, self.settings)):
                    return
            if batch:
                self._script(batch)
        except ParseError as e:  # a RUN SCRIPT without its file name
            self.console.error(e)
        except KeyboardInterrupt:  # Ctrl-C while a request runs (a script's transaction rolls back)
            print("cancelled", file=sys.stderr, flush=True)

    def _script(self, batch: list[Piece]) -> bool:
        script, first, last = batch[0].script, batch[0].tokens[0], batch[-1].tokens[-1]
        # from the request's start when the batch opens it, so errors point where it was typed
        start = 0 if not script[: first.start].strip() else first.start
        return self._apply(self.console.run(script[start : last.end + 1], self.settings))

    def _apply(self, results: list[Result] | None) -> bool:
        """Take the settings ``results`` made (a SET's ``details["set"]``) into the session."""
        if results is None:
            return False
        for result in results:
            for key, value in result.details.get("set", {}).items():
                if value is None:
                    self.settings.pop(key, None)
                else:
                    self.settings[key] = value
        return True

    # -- readline ------------------------------------------------------------------------
    def _start_readline(self) -> str | None:
        """History and completion; the history file's path (None without readline)."""
        try:
            import readline
        except ImportError:  # a Python built without it: a plain prompt
            return None
        path = os.path.expanduser(os.environ.get(HISTORY_ENV) or HISTORY_FILE)
        try:
            readline.read_history_file(path)
        except OSError:
            pass  # none yet (made on leaving)
        readline.set_history_length(HISTORY_LENGTH)
        readline.set_completer_delims(" \t\n;,()=<>+-*/")
        readline.set_completer(self._complete)
        readline.parse_and_bind("tab: complete")
        return path

    def _complete(self, prefix: str, state: int) -> str | None:
        """readline's completer: the ``state``-th word completing ``prefix``."""
        import readline

        if state == 0:
            line = readline.get_line_buffer()
            before = "\n".join([*self.lines, line[: readline.get_begidx()]])
            try:
                offered = candidates(before, prefix, self.reader.names(), after=line[readline.get_endidx() :])
            except Exception:  # noqa: BLE001 - an unreadable catalog completes nothing; TAB never fails
                offered = []
            # a whole word, then a space (Python's readline appends none), as rlcompleter does
            self._offered = [f"{word} " for word in offered]
        return self._offered[state] if state < len(self._offered) else None


def _save_history(path: str) -> None:
    """Write the history, readable by its owner only (statements hold no secrets: Kafka
    connection settings are refused in SQL; values typed in INSERTs are data)."""
    import readline

    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        readline.write_history_file(path)
    except OSError as e:
        print(f"warning: history not saved to {path!r}: {e.strerror or e}", file=sys.stderr)
