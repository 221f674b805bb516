"""One flat hierarchy: every error streamql raises on purpose is a StreamQLError."""

from __future__ import annotations

import re
from collections.abc import Callable


class StreamQLError(Exception):
    """Base of all streamql errors. ``line``/``col`` point into the statement text when known."""

    def __init__(self, message: str, *, line: int | None = None, col: int | None = None, text: str | None = None):
        self.message = message
        self.line = line
        self.col = col
        self.text = text
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f"line {self.line}, column {self.col}: " if self.line is not None else ""
        snippet = f"\n  near: {self.text}" if self.text else ""
        return f"{where}{self.message}{snippet}"


#: characters of a Spark error's first line that the runtime and the dry run report
SPARK_ERROR_LIMIT = 2000


def first_line(
    error: BaseException | object, limit: int | None = None, *, mask: Callable[[str], str] | None = None
) -> str:
    """The first line of an error's message (its type's name when it has none): what a
    one-line report of a library's error shows. A Py4J/Spark error's own message is its
    ``desc`` (its text adds the JVM stack); an error a foreachBatch writer raised is the
    exception its traceback names, not Py4J's heading (nor, when the writer's call into Spark
    failed, Py4J's heading of that call); so is a Java error Py4J passes on
    (``java.lang.OutOfMemoryError: Java heap space``); ``limit`` caps the line's length.
    ``mask`` (secrets out) is applied to the whole text before the first line is taken."""
    text = str(getattr(error, "desc", None) or error).strip()
    if mask is not None:
        text = mask(text).strip()
    if not text:
        return type(error).__name__
    lines = text.splitlines()
    if lines[0].startswith(PY4J_CALL) and len(lines) > 1 and lines[1].startswith(": "):
        return lines[1][2:][:limit]  # the Java exception, not the call that raised it
    if lines[0].startswith(PYTHON_PROXY):  # a foreachBatch writer failed: its exception is the report
        raised = next(((i, m) for i, m in enumerate(map(RAISED.match, lines)) if i and m), None)
        if raised is not None:  # read as its own error: a Py4J heading there gives way to the Java exception
            at, match = raised
            return first_line("\n".join([match.group(1), *lines[at + 1 :]]), limit)
    return lines[0][:limit]


#: how Py4J heads a Java exception: its next line is ": <the exception>: <message>"
PY4J_CALL = "An error occurred while calling "
#: how Py4J reports an exception raised in Python code Spark called (a foreachBatch function)
PYTHON_PROXY = "An exception was raised by the Python Proxy"
#: the line of a Python traceback that names the exception raised: "module.Type: message"
RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit): (.+)$")


class ParseError(StreamQLError):
    """The text is not a StreamQL statement."""


class ValidationError(StreamQLError):
    """The statement parses but is wrong against the catalog: unknown name, type error, ..."""


class NotFoundError(StreamQLError):
    """A stream, table or query that does not exist."""


class StateError(StreamQLError):
    """The request conflicts with the current state, e.g. RESUME of a terminated query."""


class CheckpointDamaged(StateError):
    """A query's checkpoint holds a damaged file: it is not started until it is restored."""


class CatalogError(StreamQLError):
    """The catalog database cannot be used (wrong URL, newer schema than this code, ...)."""


class WaitTimeout(StreamQLError):
    """A wait's timeout ran out before what it waits for came true; the message says what the
    query was doing. ``end`` is how the wait ended (:class:`~.conditions.WaitEnd`)."""

    def __init__(self, message: str, *, end: object = None):
        super().__init__(message)
        self.end = end


class WaitFailed(StateError):
    """A wait ended before its timeout: what it waits for can no longer come true on its own
    (the query is in ERROR, terminated, held at a bad record, or its version was rolled back).
    The message gives the query's state, last error and what to do next; ``end`` is how the
    wait ended (:class:`~.conditions.WaitEnd`). A :class:`StateError`, as such a wait raised
    before it had its own class."""

    def __init__(self, message: str, *, end: object = None):
        super().__init__(message)
        self.end = end


#: errors in what the user asked for (as opposed to things that failed while doing it): a
#: command exits with a usage error, a task fails without retries
STATEMENT_ERRORS = (ParseError, ValidationError, NotFoundError, StateError)
