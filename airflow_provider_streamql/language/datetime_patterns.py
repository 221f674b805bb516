"""Spark's datetime patterns (Java's DateTimeFormatter letters) read for DuckDB, for pull
and push queries, which run on DuckDB while a persistent query hands the pattern to Spark
as written.

A pattern is tokenised once (:func:`tokens`: runs of one letter with their count, quoted
literal text with ``''`` as a quote, other characters) and each letter run is looked up in
a table of what DuckDB does exactly as Spark does (checked against Spark 4, session time
zone UTC, in tests/test_pull_parity.py):

- formatting (``date_format``): :data:`FORMAT` renders each run as a DuckDB expression over
  the timestamp (``year(t)``, ``strftime(t, '%b')``, zero padding as Spark pads), joined
  with the literal text; a zone or offset letter is the UTC constant Spark shows.
- parsing (``to_timestamp``, ``try_to_date``, ...): :data:`PARSE` gives each run DuckDB's
  ``strptime`` specifier and a regular expression of the text Spark accepts for it (``MM``
  exactly two digits, ``M`` one or two, ``SSS`` one to three); the value must match the
  whole expression before ``strptime`` reads it, so DuckDB's looser reading never turns
  text Spark refuses into a value. A pattern without a year reads year 1970 (Spark's).

A letter or count that has no exact DuckDB form is refused with a :class:`~..errors.
ValidationError` naming it and the pattern, never passed on.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from ..errors import ValidationError


class Use(Enum):
    """What a pattern is for."""

    FORMAT = "format"
    PARSE = "parse"


@dataclass(frozen=True)
class Token:
    """A run of one pattern letter (``letter`` and ``count``), or literal ``text``."""

    letter: str = ""
    count: int = 0
    text: str = ""
    quoted: bool = False


#: characters Java's formatter reserves (optional sections, and letters Spark refuses)
RESERVED = "[]{}#"


def tokens(pattern: str) -> list[Token]:
    """``pattern`` as letter runs and literal text ('...' quotes text, '' is a quote)."""
    out: list[Token] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            if pattern.startswith("''", i):
                out.append(Token(text="'"))
                i += 2
                continue
            end = i + 1
            text = []
            while True:
                if end >= len(pattern):
                    raise ValidationError(f"datetime pattern {pattern!r} has a quote that is not closed")
                if pattern.startswith("''", end):
                    text.append("'")
                    end += 2
                elif pattern[end] == "'":
                    break
                else:
                    text.append(pattern[end])
                    end += 1
            out.append(Token(text="".join(text), quoted=True))
            i = end + 1
        elif c.isascii() and c.isalpha():
            end = i
            while end < len(pattern) and pattern[end] == c:
                end += 1
            out.append(Token(letter=c, count=end - i))
            i = end
        else:
            out.append(Token(text=c))
            i += 1
    return out


# -- formatting -------------------------------------------------------------------------
def _number(sql: str, width: int) -> str:
    """DuckDB SQL of ``sql`` (over ``t``) as digits zero-padded to ``width`` (Spark pads,
    never cuts; DuckDB's lpad cuts)."""
    text = f"CAST({sql} AS VARCHAR)"
    return text if width <= 1 else f"CASE WHEN len({text}) >= {width} THEN {text} ELSE lpad({text}, {width}, '0') END"


def _numeric(sql: str, widths: tuple[int, ...]) -> dict[int, str]:
    return {n: _number(sql, n) for n in widths}


#: letter -> count -> DuckDB SQL over ``t`` (a TIMESTAMP in UTC) giving Spark's text
FORMAT: dict[str, dict[int, str]] = {
    "y": {1: "CAST(year(t) AS VARCHAR)", 2: _number("year(t) % 100", 2), **_numeric("year(t)", (3, 4, 5, 6))},
    "M": {**_numeric("month(t)", (1, 2)), 3: "strftime(t, '%b')", 4: "strftime(t, '%B')"},
    "L": {**_numeric("month(t)", (1, 2)), 3: "strftime(t, '%b')", 4: "strftime(t, '%B')"},
    "d": _numeric("day(t)", (1, 2)),
    "D": _numeric("dayofyear(t)", (1, 2, 3)),
    "Q": _numeric("quarter(t)", (1, 2)),
    "q": _numeric("quarter(t)", (1, 2)),
    "H": _numeric("hour(t)", (1, 2)),
    "k": _numeric("CASE WHEN hour(t) = 0 THEN 24 ELSE hour(t) END", (1, 2)),
    "K": _numeric("hour(t) % 12", (1, 2)),
    "h": _numeric("(hour(t) + 11) % 12 + 1", (1, 2)),
    "m": _numeric("minute(t)", (1, 2)),
    "s": _numeric("second(t)", (1, 2)),
    # the first n digits of the fraction (microseconds, then zeros: Spark keeps microseconds)
    "S": {n: f"left({_number('microsecond(t) % 1000000', 6)} || '000', {n})" for n in range(1, 10)},
    "a": {1: "CASE WHEN hour(t) < 12 THEN 'AM' ELSE 'PM' END"},
    "E": {1: "strftime(t, '%a')", 2: "strftime(t, '%a')", 3: "strftime(t, '%a')", 4: "strftime(t, '%A')"},
    "G": {1: "'AD'", 2: "'AD'", 3: "'AD'"},
    # zones and offsets: times are UTC (Spark's session time zone, and DuckDB's)
    "X": {1: "'Z'", 2: "'Z'", 3: "'Z'"},
    "x": {1: "'+00'", 2: "'+0000'", 3: "'+00:00'"},
    "Z": {1: "'+0000'", 2: "'+0000'", 3: "'+0000'", 4: "'GMT'", 5: "'Z'"},
    "z": {1: "'UTC'", 2: "'UTC'", 3: "'UTC'", 4: "'Coordinated Universal Time'"},
    "V": {2: "'UTC'"},
    "O": {1: "'GMT'"},
}

# -- parsing ----------------------------------------------------------------------------
_MONTHS = "january february march april may june july august september october november december".split()


def _digits(low: int, high: int | None = None) -> str:
    return f"[0-9]{{{low}}}" if high is None or high == low else f"[0-9]{{{low},{high}}}"


def _one_or_two(spec: str) -> dict[int, tuple[str, str]]:
    return {1: (spec, _digits(1, 2)), 2: (spec, _digits(2))}


#: letter -> count -> (DuckDB strptime specifier, RE2 expression of the text Spark accepts)
PARSE: dict[str, dict[int, tuple[str, str]]] = {
    # 'y' reads up to four digits here (DuckDB's %Y; Spark reads more); 'yy' is refused:
    # Spark reads it as 20yy, DuckDB as 19yy from 69
    "y": {1: ("%Y", _digits(1, 4)), 4: ("%Y", _digits(4))},
    "M": {
        **_one_or_two("%m"),
        3: ("%b", "(?i:" + "|".join(m[:3] for m in _MONTHS) + ")"),
        4: ("%B", "(?i:" + "|".join(_MONTHS) + ")"),
    },
    "d": _one_or_two("%d"),
    "D": {1: ("%j", _digits(1, 3)), 3: ("%j", _digits(3))},
    "H": _one_or_two("%H"),
    "h": _one_or_two("%I"),
    "m": _one_or_two("%M"),
    "s": _one_or_two("%S"),
    # a fraction of n letters reads one to n digits (Spark's), up to microseconds
    "S": {n: ("%f", _digits(1, n)) for n in range(1, 7)},
    "a": {1: ("%p", "(?i:am|pm)")},
    # offsets of a fixed form (DuckDB's %z reads them; 'X' also reads 'Z', which %z does not)
    "x": {2: ("%z", "[+-][0-9]{4}"), 3: ("%z", "[+-][0-9]{2}:[0-9]{2}")},
    "Z": {n: ("%z", "[+-][0-9]{4}") for n in (1, 2, 3)},
}
#: letters Spark itself refuses in a pattern (week-based fields, and some it never had)
SPARK_REFUSES = {
    "Y": "week-based year",
    "w": "week of year",
    "W": "week of month",
    "u": "day number of week",
    "e": "localized day of week",
    "c": "localized day of week",
}
#: why a letter Spark takes has no exact form in a pull query
WHY = {
    "E": "Spark reads no day-of-week name (it only writes one)",
    "F": "Spark's aligned week of month has no DuckDB form",
    "z": "zone names cannot be read exactly by DuckDB",
    "V": "zone IDs cannot be read exactly by DuckDB",
    "O": "localized offsets cannot be read exactly by DuckDB",
    "X": "DuckDB's %z does not read 'Z' for UTC",
    "G": "eras cannot be read exactly by DuckDB",
    "k": "DuckDB has no 1-24 hour field to read",
    "K": "DuckDB has no 0-11 hour field to read",
    "Q": "quarters cannot be read by DuckDB",
    "q": "quarters cannot be read by DuckDB",
    "L": "write M for a month",
}


def _refused(token: Token, pattern: str, use: Use) -> ValidationError:
    run = token.letter * token.count
    if token.letter in SPARK_REFUSES:
        why = f"Spark refuses it ({SPARK_REFUSES[token.letter]})"
    elif token.letter == "y" and token.count == 2 and use is Use.PARSE:
        why = "Spark reads two-digit years as 20yy, DuckDB as 19yy from 69: write yyyy"
    elif token.letter == "S" and use is Use.PARSE:
        why = "DuckDB reads at most six digits of a fraction (microseconds)"
    elif token.letter in WHY and use is Use.PARSE:
        why = WHY[token.letter]
    else:
        why = f"{run!r} is not a count of {token.letter!r} with an exact DuckDB form"
    verb = "read" if use is Use.PARSE else "write"
    return ValidationError(
        f"pull queries cannot {verb} pattern letter {token.letter!r} ({run}) of datetime pattern {pattern!r}: {why}"
    )


def _checked(pattern: str, use: Use) -> list[Token]:
    table = FORMAT if use is Use.FORMAT else PARSE
    found = tokens(pattern)
    for token in found:
        if token.letter and token.count not in table.get(token.letter, {}):
            raise _refused(token, pattern, use)
        if not token.quoted and token.text and token.text in RESERVED:
            raise ValidationError(
                f"pull queries cannot read datetime pattern {pattern!r}: {token.text!r} is reserved "
                f"(optional sections and '#', '{{', '}}'); quote it as literal text ('{token.text}')"
            )
    return found


# -- what the pull-query renderer uses ---------------------------------------------------
def template(sql: str, **args: exp.Expr) -> exp.Expr:
    """DuckDB SQL (streamql's own) with the columns named as ``args`` replaced by copies of
    those trees."""
    tree: exp.Expr = exp.maybe_parse(sql, dialect="duckdb")
    for column in [c for c in tree.find_all(exp.Column) if c.name in args]:
        if column is tree:
            return args[column.name].copy()
        column.replace(args[column.name].copy())
    return tree


def formatted(pattern: str, t: exp.Expr) -> exp.Expr:
    """DuckDB's expression writing timestamp ``t`` as Spark's ``date_format(t, pattern)``
    does (NULL for NULL)."""
    pieces: list[exp.Expr] = []
    for token in _checked(pattern, Use.FORMAT):
        if token.letter:
            piece = template(FORMAT[token.letter][token.count], t=t)
            pieces.append(piece)
        else:
            pieces.append(exp.Literal.string(token.text))
    text: exp.Expr = pieces[0] if pieces else exp.Literal.string("")
    for piece in pieces[1:]:
        text = exp.DPipe(this=text, expression=piece, safe=True)
    return exp.Case(ifs=[exp.If(this=exp.Is(this=t.copy(), expression=exp.null()), true=exp.null())], default=text)


@dataclass(frozen=True)
class Reading:
    """How DuckDB reads text written in a pattern: the text must match ``regex`` whole
    (what Spark accepts), then ``strptime(value || suffix, fmt)`` reads it; ``offset``: it
    reads an offset (a TIMESTAMPTZ)."""

    fmt: str
    regex: str
    suffix: str
    offset: bool


def reading(pattern: str) -> Reading:
    """How DuckDB reads text as Spark's ``to_timestamp(text, pattern)`` does."""
    fmt, regex = [], []
    found = _checked(pattern, Use.PARSE)
    for token in found:
        if token.letter:
            spec, accepted = PARSE[token.letter][token.count]
            fmt.append(spec)
            regex.append(accepted)
        else:
            fmt.append(token.text.replace("%", "%%"))
            regex.append("".join(c if c.isalnum() and c.isascii() else f"\\x{{{ord(c):x}}}" for c in token.text))
    letters = {t.letter for t in found}
    # Spark's missing year is 1970 (DuckDB's 1900): the value is read with one appended
    suffix = "" if "y" in letters else " 1970"
    return Reading("".join(fmt) + (" %Y" if suffix else ""), "".join(regex), suffix, bool(letters & {"x", "Z"}))
