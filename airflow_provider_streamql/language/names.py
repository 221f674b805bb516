"""The grammar of names: what a stream, table, column, property or query ID may be.

Names reach streamql from SQL text, operator arguments, Airflow params and UI routes; each
is checked here before it is used, and never formatted into SQL text to be parsed again.
"""

from __future__ import annotations

import re

from ..errors import ParseError

#: letters, digits and underscores, not starting with a digit (ASCII only: a name becomes a
#: folder name and a Spark query name)
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: longest name: a query ID (``CSAS_<name>_<seq>``) and its checkpoint folders
#: (``<ID>.dead_letters``, ``<ID>.snapshots``) must stay within a file name's 255 bytes
MAX_NAME_LENGTH = 128
#: the same grammar as a JSON-schema ``pattern`` (an Airflow ``Param``), read alike by Python
#: and the browser's form: ``(?![\s\S])`` ends the text where ``$`` would let a trailing
#: newline through
PARAM_PATTERN = rf"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_LENGTH - 1}}}(?![\s\S])"


#: names of streamql's own columns (a changelog row's file, a HAVING result, a record's
#: position) start so, and Spark's corrupt-record column is named so: no user column may be
#: either, or a query would read or drop the wrong one
RESERVED_PREFIX = "__"
RESERVED_NAMES = frozenset({"_corrupt_record"})


def reserved_name_problem(text: str) -> str | None:
    """Why a column may not be named ``text`` (None when it may)."""
    if text.startswith(RESERVED_PREFIX) or text.lower() in RESERVED_NAMES:
        others = ", ".join(sorted(RESERVED_NAMES))
        return f"names starting with {RESERVED_PREFIX!r} and {others} are reserved for streamql's own columns"
    return None


def is_plain_name(text: str) -> bool:
    """True when ``text`` is a plain SQL name streamql accepts."""
    return isinstance(text, str) and len(text) <= MAX_NAME_LENGTH and PLAIN_NAME.fullmatch(text) is not None


def name_problem(text: str) -> str | None:
    """Why ``text`` is not a plain name (None when it is)."""
    if not isinstance(text, str) or not text:
        return "a name cannot be empty"
    if len(text) > MAX_NAME_LENGTH:
        return f"a name has at most {MAX_NAME_LENGTH} characters; this one has {len(text)}"
    if PLAIN_NAME.fullmatch(text) is None:
        return "a name has letters, digits and _ only, and does not start with a digit"
    return reserved_name_problem(text)


def check_name(text: object, what: str = "name") -> str:
    """``text`` as a plain name, or :class:`ParseError` naming the value and the rule.

    For names that come from outside SQL text (operator arguments, params, UI routes)."""
    if not isinstance(text, str):
        raise ParseError(f"{what} must be a string, not {type(text).__name__} {text!r}")
    problem = name_problem(text)
    if problem:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ParseError(f"{what} {shown!r} is not a plain SQL name: {problem}")
    return text


def check_object_name(text: object, what: str = "name") -> str:
    """A stream, table or query name: checked, and upper-case as ksqlDB keeps them."""
    return check_name(text, what).upper()
