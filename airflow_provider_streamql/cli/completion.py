"""What the shell completes on TAB, as ksqlDB's CLI does: a statement's leading words, then
the names of streams, tables and queries where a statement takes one, and the columns of the
sources the statement has named so far. The statement typed so far is read on the language's
own token stream (:func:`~..language.script.cut`); the names come from the engine's read side
(:meth:`~..views.reader.Reader.names`)."""

from __future__ import annotations

from enum import Enum

from ..language.script import cut
from ..views.reader import Names

#: each statement's leading words (the shell's own: RUN SCRIPT; HELP, EXIT and QUIT alone)
FORMS = tuple(
    tuple(form.split())
    for form in (
        "CREATE STREAM",
        "CREATE TABLE",
        "CREATE OR REPLACE STREAM",
        "CREATE OR REPLACE TABLE",
        "ALTER STREAM",
        "ALTER TABLE",
        "ALTER QUERY",
        "INSERT INTO",
        "SELECT",
        "PAUSE",
        "RESUME",
        "TERMINATE",
        "DROP STREAM",
        "DROP TABLE",
        "SHOW STREAMS",
        "SHOW TABLES",
        "SHOW QUERIES",
        "SHOW TOPICS",
        "SHOW PROPERTIES",
        "SHOW SNAPSHOTS",
        "LIST STREAMS",
        "LIST TABLES",
        "LIST QUERIES",
        "LIST TOPICS",
        "DESCRIBE",
        "EXPLAIN",
        "PRINT",
        "SET",
        "UNSET",
        "SNAPSHOT",
        "RESTORE",
        "PROMOTE",
        "DISCARD",
        "DIFF",
        "RUN SCRIPT",
        "HELP",
        "EXIT",
        "QUIT",
    )
)


class Named(Enum):
    """What kind of name a word is followed by."""

    SOURCE = "a stream or table"
    QUERY = "a query"
    EITHER = "a stream, table or query"


#: the words a name follows, and which kind of name
NAME_AFTER = {
    "FROM": Named.SOURCE,
    "JOIN": Named.SOURCE,
    "INTO": Named.SOURCE,
    "PRINT": Named.SOURCE,
    "DESCRIBE": Named.EITHER,
    "EXPLAIN": Named.QUERY,
    "PAUSE": Named.QUERY,
    "RESUME": Named.QUERY,
    "TERMINATE": Named.QUERY,
    "SNAPSHOT": Named.QUERY,
    "RESTORE": Named.QUERY,
    "PROMOTE": Named.QUERY,
    "DISCARD": Named.QUERY,
    "DIFF": Named.QUERY,
    "QUERY": Named.QUERY,  # ALTER QUERY
}
#: ALTER and DROP name a source after STREAM or TABLE (CREATE names a new one)
SOURCE_AFTER_KIND = ("ALTER", "DROP")
#: words a query control takes besides a query ID
CONTROL_WORDS = ("ALL",)
#: the clauses of a SELECT and a CREATE ... AS SELECT, offered with the columns inside one
CLAUSE_WORDS = (
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "HAVING",
    "WINDOW",
    "TUMBLING",
    "HOPPING",
    "SESSION",
    "EMIT",
    "CHANGES",
    "FINAL",
    "LIMIT",
    "AS",
    "AND",
    "OR",
    "NOT",
    "JOIN",
    "ON",
    "WITHIN",
    "WITH",
    "PARTITION",
    "SELECT",
)


def candidates(before: str, prefix: str, names: Names, after: str = "") -> list[str]:
    """The words that may complete ``prefix``, the word being typed, where ``before`` is the
    text of the open request before it (earlier statements ended by ``;`` included) and
    ``after`` the rest of the line (a source named after the cursor gives its columns too)."""
    words = _words(before)
    offered = _next_words(words)
    if not offered and words:
        offered = _names_after(words, names)
    if not offered and words:
        named = [names.sources[w] for w in sorted(set(_words(f"{before} {after}"))) if w in names.sources]
        offered = [c for columns in named for c in columns] + list(names.sources) + list(CLAUSE_WORDS)
    return sorted({_as_typed(w, prefix) for w in offered if w.upper().startswith(prefix.upper())})


def _words(text: str) -> tuple[str, ...]:
    """The words of the statement ``text`` ends in, upper-cased (none while a quote is open)."""
    piece = cut(text).open
    return tuple(w.upper() for w in piece.words) if piece is not None else ()


def _next_words(words: tuple[str, ...]) -> list[str]:
    """The next word of each statement form that starts with ``words``."""
    return [form[len(words)] for form in FORMS if len(form) > len(words) and form[: len(words)] == words]


def _names_after(words: tuple[str, ...], names: Names) -> list[str]:
    last = words[-1]
    kind = NAME_AFTER.get(last)
    if last in ("STREAM", "TABLE") and len(words) == 2 and words[0] in SOURCE_AFTER_KIND:
        kind = Named.SOURCE
    if kind is None:
        return []
    sources = list(names.sources) if kind in (Named.SOURCE, Named.EITHER) else []
    queries = list(names.queries) if kind in (Named.QUERY, Named.EITHER) else []
    controls = list(CONTROL_WORDS) if last in ("PAUSE", "RESUME", "TERMINATE") else []
    return sources + queries + controls


def _as_typed(word: str, prefix: str) -> str:
    """A keyword or name in the case the user types it in: lower case after a lower-case
    start (names are case-insensitive, resolved once by the engine)."""
    return word.lower() if prefix and prefix.islower() else word
