"""How the ``streamql`` command prints: what statements return (text, or ``--json``), a PRINT
or push query followed until its LIMIT or Ctrl-C as ksqlDB's CLI follows them, tables, how a
wait ended, and why a command failed; each as the command's exit code where it decides it.

Exit codes: 0 ok, 1 failed, 2 usage or statement error, 3 a wait timed out.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from ..conditions import Check
from ..engine import Ending, Engine, WaitEnd
from ..errors import STATEMENT_ERRORS, CatalogError, StreamQLError
from ..results import Result, cell

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMED_OUT = 0, 1, 2, 3
#: how a wait's ending is the command's exit code
WAIT_EXITS = {Ending.REACHED: EXIT_OK, Ending.FAILED_FAST: EXIT_FAILED, Ending.TIMED_OUT: EXIT_TIMED_OUT}

#: what a command (or a request of the shell) fails with, and :func:`report` shows
FAILURES = (StreamQLError, CatalogError, OSError)


def report(e: Exception, *, as_json: bool) -> int:
    """Show why a command failed, as its exit code: a statement's error (``--json``: also a
    JSON line with its position) is a usage error; anything else a failure."""
    if isinstance(e, STATEMENT_ERRORS):
        if as_json:
            print(json.dumps({"error": str(e), "type": type(e).__name__, "line": e.line, "col": e.col}), flush=True)
        print(f"error: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    # an I/O failure (a home that cannot be made, a file effect after the catalog commit)
    # failed the command; it is not an error in the statements
    print(f"error: {e}", file=sys.stderr, flush=True)
    return EXIT_FAILED


#: what a statement's ``details`` hold when it goes on reading: PRINT, a push query
FOLLOWED = ("print", "push")


def followed(result: Result) -> str | None:
    """Which of :data:`FOLLOWED` ``result`` is, if any."""
    return next((kind for kind in FOLLOWED if kind in result.details), None)


def printing(results: list[Result]) -> bool:
    return bool(results) and followed(results[-1]) is not None


def show(engine: Engine, results: list[Result], *, as_json: bool) -> int:
    """Print what statements returned (``--json``: one JSON list of them), then follow a
    PRINT or push query that ends them (one before other statements shows what it found at
    its first look)."""
    printed = results[-1] if printing(results) else None
    shown = results[:-1] if printed is not None else results
    if as_json and shown:
        print(json.dumps([r.to_dict() for r in shown], default=str), flush=True)
    elif shown:
        print("\n\n".join(r.render() for r in shown if r.render()), flush=True)
    if printed is not None:
        return follow(engine, printed, as_json=as_json)
    return EXIT_OK


#: seconds between two looks at a printed topic for new records
PRINT_POLL = 0.5


def follow(engine: Engine, printed: Result, *, as_json: bool) -> int:
    """PRINT and push queries as ksqlDB's CLI shows them: a first line (PRINT: the topic's
    format; a push query: its columns), then each record or row on a line (``--json``: a JSON
    object per line), then those written since, until its LIMIT or Ctrl-C."""
    kind = followed(printed) or "print"  # show hands on only what followed names
    more = engine.follow_push if kind == "push" else engine.follow_print
    try:  # from the first line on: a Ctrl-C as soon as it shows ends it cleanly too
        # first what is followed (a caller knows it has started), then its records or rows
        print(_FIRST_LINES[kind](printed, as_json), flush=True)
        while True:
            if kind == "push" and printed.message:  # lines of the source that cannot be read
                print(f"note: {printed.message}", file=sys.stderr, flush=True)
            for row in printed.rows:
                print(_LINES[kind](printed, row, as_json), flush=True)
            where = printed.details[kind]
            if where["limit"] is not None and where["shown"] >= where["limit"]:
                return EXIT_OK
            time.sleep(PRINT_POLL)
            printed = more(printed)
    except KeyboardInterrupt:  # Ctrl-C ends a PRINT or a push query, as in ksqlDB
        return EXIT_OK


def _print_line(printed: Result, row: list[Any], as_json: bool) -> str:
    # a file topic's record ends with its file, a Kafka topic's with partition and offset
    fields = dict(zip(printed.columns, row, strict=True))
    if as_json:
        return json.dumps(fields)
    return ", ".join(f"{name}: {_printed(name, value)}" for name, value in fields.items())


def _printed(column: str, value) -> str:
    """A PRINT field as ksqlDB's CLI shows it: no time ``N/A``, no key or value ``<null>``."""
    if value is None or value == "":
        return {"rowtime": "N/A", "key": "<null>", "value": "<null>"}.get(column, "")
    return str(value)


def _push_line(pushed: Result, row: list[Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(dict(zip(pushed.columns, row, strict=True)), default=str)
    return " | ".join(cell(v) for v in row)


#: the first line and each record's or row's line of what :func:`follow` follows
_FIRST_LINES = {
    "print": lambda r, as_json: json.dumps({"format": r.message.removeprefix("Format: ")}) if as_json else r.message,
    "push": lambda r, as_json: json.dumps({"columns": r.columns}) if as_json else " | ".join(r.columns),
}
_LINES = {"print": _print_line, "push": _push_line}


class Waiting:
    """Says on standard error what a wait is waiting for, once it has waited ``quiet`` seconds
    and each time that changes, so a long wait is never silent (a wait that ends sooner says
    nothing more than before)."""

    def __init__(self, *, quiet: float = 1.0) -> None:
        self.since = time.monotonic()
        self.quiet = quiet
        self.said: str | None = None

    def __call__(self, check: Check) -> None:
        if check.message != self.said and time.monotonic() - self.since >= self.quiet:
            self.said = check.message
            print(f"waiting: {check.message}", file=sys.stderr, flush=True)


def ended(end: WaitEnd, *, as_json: bool, reached: str | None = None) -> int:
    """Say how a wait ended (``--json``: as the ``wait`` XCom has it), as its exit code."""
    if as_json:
        print(json.dumps(end.to_dict(), default=str), flush=True)
    elif end.ending is not Ending.REACHED:
        print(f"error: {end.message}", file=sys.stderr, flush=True)
    elif reached:
        print(reached, flush=True)
    return WAIT_EXITS[end.ending]


def table(rows: list[dict[str, Any]], columns: list[str], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, default=str))
    else:
        print(Result("", columns=columns, rows=[[r.get(c) for c in columns] for r in rows]).render())
