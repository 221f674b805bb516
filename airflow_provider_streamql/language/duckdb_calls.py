"""Spark calls rendered for DuckDB, where sqlglot's own translation would change a value:
pull and push queries (and INSERT VALUES) run on DuckDB, persistent queries on Spark.

:data:`RENDER` holds one row per Spark function that needs it: how DuckDB computes the same
value, or why a pull query cannot (:data:`REFUSED`). The datetime functions take their
pattern through :mod:`.datetime_patterns` (a pattern must be a literal, and is never handed
to DuckDB untranslated); the persistent path keeps Spark's call with the pattern as written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ..errors import ValidationError
from . import datetime_patterns as patterns

Args = list[exp.Expr]


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    """A DuckDB function by name (sqlglot keeps it, and its arguments, as they are)."""
    return exp.Anonymous(this=name, expressions=list(args))


def _pattern(name: str, args: Args) -> str:
    pattern = args[1] if len(args) > 1 else None
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        shown = pattern.sql(dialect="spark") if pattern is not None else "missing"
        raise ValidationError(
            f"pull queries read a datetime pattern only as a string literal: the pattern of {name}() is {shown}"
        )
    return pattern.this


@dataclass(frozen=True)
class Parse:
    """Spark's ``to_timestamp``/``to_date`` (``lenient``: their ``try_`` forms, NULL on
    text that does not match; else an error, as Spark's in ANSI mode, its default)."""

    to: str
    lenient: bool

    def __call__(self, name: str, args: Args) -> exp.Expr:
        pattern = _pattern(name, args)
        reading = patterns.reading(pattern)
        value = args[0]
        text = exp.DPipe(this=value.copy(), expression=exp.Literal.string(reading.suffix), safe=True)
        parsed = _call(
            "try_strptime" if self.lenient else "strptime",
            text if reading.suffix else value.copy(),
            exp.Literal.string(reading.fmt),
        )
        # an offset makes a TIMESTAMPTZ: as TIMESTAMP it is the UTC time (DuckDB's zone is UTC)
        result = exp.cast(exp.cast(parsed, "TIMESTAMP") if reading.offset else parsed, self.to)
        matches = _call("regexp_full_match", value.copy(), exp.Literal.string(reading.regex))
        if self.lenient:
            return exp.Case(ifs=[exp.If(this=matches, true=result)])
        message = exp.DPipe(
            this=exp.DPipe(this=exp.Literal.string(f"{name}: text '"), expression=value.copy(), safe=True),
            expression=exp.Literal.string(
                f"' does not match datetime pattern {pattern!r} (Spark fails on it too; try_{name} gives NULL)"
            ),
            safe=True,
        )
        return exp.Case(ifs=[exp.If(this=exp.Not(this=matches), true=_call("error", message))], default=result)


def _format(name: str, args: Args) -> exp.Expr:
    return patterns.formatted(_pattern(name, args), exp.cast(args[0].copy(), "TIMESTAMP"))


def _from_utc(name: str, args: Args) -> exp.Expr:
    """Spark's from_utc_timestamp: the UTC time as wall time in a zone (DuckDB's timezone()
    of an instant gives that wall time)."""
    return _call("timezone", args[1], exp.cast(args[0], "TIMESTAMPTZ"))


def _to_utc(name: str, args: Args) -> exp.Expr:
    """Spark's to_utc_timestamp: wall time in a zone as the UTC time (DuckDB's timezone() of
    a wall time gives the instant; as TIMESTAMP it is UTC, DuckDB's zone)."""
    return exp.cast(_call("timezone", args[1], exp.cast(args[0], "TIMESTAMP")), "TIMESTAMP")


def _url_encode(name: str, args: Args) -> exp.Expr:
    """Spark's url_encode is Java's form encoding: a space is '+', '*' is kept and '~' is
    escaped, where DuckDB's (RFC 3986) writes %20, %2A and '~'."""
    return patterns.template("replace(replace(replace(url_encode(a), '%20', '+'), '~', '%7E'), '%2A', '*')", a=args[0])


def _same(duckdb_name: str) -> Callable[[str, Args], exp.Expr]:
    """Spark's function under DuckDB's name (the same value for the same arguments)."""
    return lambda name, args: _call(duckdb_name, *args)


#: Spark function (lower case) -> how DuckDB computes the same value from its arguments
RENDER: dict[str, Callable[[str, Args], exp.Expr]] = {
    "to_timestamp": Parse("TIMESTAMP", lenient=False),
    "try_to_timestamp": Parse("TIMESTAMP", lenient=True),
    "to_date": Parse("DATE", lenient=False),
    "try_to_date": Parse("DATE", lenient=True),
    "date_format": _format,
    "from_utc_timestamp": _from_utc,
    "to_utc_timestamp": _to_utc,
    "timestamp_millis": _same("epoch_ms"),
    "timestamp_seconds": lambda name, a: _call(
        "epoch_ms", exp.Mul(this=exp.paren(a[0]), expression=exp.Literal.number(1000))
    ),
    "unix_date": lambda name, a: exp.cast(
        _call("datediff", exp.Literal.string("day"), exp.cast(exp.Literal.string("1970-01-01"), "DATE"), a[0]), "INT"
    ),
    "array_size": lambda name, a: exp.cast(_call("len", a[0]), "INT"),
    "map_from_arrays": _same("map"),
    "sequence": _same("generate_series"),
    "btrim": lambda name, a: exp.Trim(this=a[0]) if len(a) == 1 else _call("btrim", *a),
    "isnull": lambda name, a: exp.Is(this=a[0], expression=exp.null()),
    "url_encode": _url_encode,
    # Java's form decoding reads '+' as a space; DuckDB's keeps it
    "url_decode": lambda name, a: patterns.template("url_decode(replace(a, '+', '%20'))", a=a[0]),
}
#: sqlglot's nodes of Spark functions whose DuckDB SQL gives another value -> DuckDB's form
NODE_RENDER: dict[type[exp.Expr], Callable[[exp.Expr], exp.Expr]] = {
    # a DATE (sqlglot's DuckDB SQL makes a TIMESTAMP)
    exp.DateFromUnixDate: lambda n: patterns.template("CAST(DATE '1970-01-01' + CAST(d AS INT) AS DATE)", d=n.this),
    # NULL elements stay (DuckDB's list filter drops them); NULL for a NULL element to remove
    exp.ArrayRemove: lambda n: patterns.template(
        "CASE WHEN x IS NULL THEN NULL ELSE list_filter(a, lambda streamql_e: streamql_e IS NULL OR streamql_e <> x) "
        "END",
        a=n.this,
        x=n.expression,
    ),
}
_NO_DUCKDB = "DuckDB has no function that gives Spark's value"
#: Spark functions a pull query refuses: DuckDB would give another value, or has no such function
REFUSED: dict[str, str] = {
    "mask": f"{_NO_DUCKDB} (MASK and its forms: run it in a persistent query)",
    "json_object_keys": _NO_DUCKDB + " (JSON_KEYS)",
    "try_parse_json": _NO_DUCKDB + " (IS_JSON_STRING)",
    "try_parse_url": _NO_DUCKDB + " (URL_EXTRACT_*)",
    "array_union": "DuckDB's distinct lists drop NULL elements, which Spark keeps",
    "format_number": _NO_DUCKDB,
    "pmod": _NO_DUCKDB,
}
#: Spark functions sqlglot reads as its own nodes, refused as :data:`REFUSED`
REFUSED_NODES: dict[type[exp.Expr], tuple[str, str]] = {
    exp.SubstringIndex: ("substring_index", _NO_DUCKDB),
    exp.ParseUrl: ("parse_url", _NO_DUCKDB),
}


def _refusal(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous) and node.name.lower() in REFUSED:
        return f"pull queries cannot run {node.name.lower()}(): {REFUSED[node.name.lower()]}"
    if type(node) in REFUSED_NODES:
        name, why = REFUSED_NODES[type(node)]
        return f"pull queries cannot run {name}(): {why}"
    return None


def for_duckdb(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` (Spark dialect) with each call of :data:`RENDER` as DuckDB computes
    it; a call DuckDB cannot compute as Spark does raises :class:`ValidationError` naming it.
    Spark's meaning is kept where the translation would lose it (:func:`_strict`)."""
    tree = tree.copy().transform(_strict)
    if found := problem(tree):
        raise ValidationError(found[0])
    calls = [
        n
        for n in tree.walk(bfs=False)
        if type(n) in NODE_RENDER or (isinstance(n, exp.Anonymous) and n.name.lower() in RENDER)
    ]
    for call in reversed(calls):  # the innermost first: an argument is rendered before its call
        if type(call) in NODE_RENDER:
            rendered = NODE_RENDER[type(call)](call)
        else:
            rendered = RENDER[call.name.lower()](call.name.lower(), list(call.expressions))
        if call is tree:
            tree = rendered
        else:
            call.replace(rendered)
    return tree


def _strict(node: exp.Expr) -> exp.Expr:
    """Spark's CAST fails on a value it cannot convert (ANSI mode, Spark 4's default), where
    sqlglot reads it as TRY_CAST (only a written TRY_CAST, ``safe``, gives NULL); Spark's
    DATE_ADD gives a DATE, DuckDB's a TIMESTAMP."""
    if isinstance(node, exp.TryCast) and not node.args.get("safe"):
        return exp.Cast(this=node.this, to=node.args["to"])
    if isinstance(node, exp.TsOrDsAdd) and not isinstance(node.parent, exp.Cast):
        return exp.Cast(this=node, to=exp.DataType.build("DATE"))
    return node


def problem(tree: exp.Expr) -> tuple[str, exp.Expr] | None:
    """Why ``tree`` cannot run on DuckDB as on Spark, and the call at fault (None: it can)."""
    for call in tree.walk():
        if refusal := _refusal(call):
            return refusal, call
        name = call.name.lower() if isinstance(call, exp.Anonymous) else ""
        if name in RENDER:
            try:
                RENDER[name](name, [a.copy() for a in call.expressions])  # a dry run: the tree stays
            except ValidationError as e:
                return e.message, call
    return None
