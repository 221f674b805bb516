"""ksqlDB's functions on Spark: one row per ksqlDB name, saying what it becomes.

Each :class:`KsqlFunction` either builds the Spark expression a ksqlDB call means (a sqlglot
tree: the StreamQL dialect's parser calls it in place of the name, see :mod:`.dialect`), is
the same as Spark's function of that name (``same``), or is refused with the reason
(``refused``). Where a ksqlDB name is also a Spark function with another meaning, the
ksqlDB meaning wins and the notes say how to reach Spark's. docs/ksqldb.md section 7 is
generated from :data:`KSQL_FUNCTIONS` (``markdown_table``) and a test keeps them equal.

A call the table cannot take (wrong number of arguments, a value that must be a literal) is
left as an unknown function call; the analyzer refuses it with :func:`problem`'s reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

# long module: one table row per ksqlDB function, and the small builders they share

Args = list[exp.Expr]

#: ksqlDB's time units (either number) -> Spark's TIMESTAMPADD unit.
UNITS = {
    f"{u}{s}": u
    for u in ("MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
    for s in ("", "S")
}
MASK_DEFAULTS = ("X", "x", "n", "-")  # ksqlDB's upper, lower, digit and other replacements


@dataclass(frozen=True)
class KsqlFunction:
    """One ksqlDB function. ``call``: how it is written (shown in the docs); ``spark``: what
    it becomes; ``arity``: (fewest, most) arguments, most None for any number; ``build``:
    the Spark tree from the arguments (None: ``same`` as Spark's, or ``refused``);
    ``check``: a reason this call cannot be mapped (a value that must be a literal)."""

    name: str
    call: str
    spark: str
    notes: str = ""
    arity: tuple[int, int | None] = (1, 1)
    build: Callable[[Args], exp.Expr] | None = None
    check: Callable[[Args], str | None] | None = None
    refused: str | None = None
    #: a call that does not fit ksqlDB's form is Spark's function of the same name
    spark_form: bool = False

    @property
    def same(self) -> bool:
        return self.build is None and self.refused is None

    def problem(self, args: Args) -> str | None:
        """Why this call cannot run, or None (a name ``same`` as Spark's is Spark's to check)."""
        if self.same:
            return None
        if self.refused:
            return f"{self.name} is not supported: {self.refused}"
        low, high = self.arity
        if len(args) < low or (high is not None and len(args) > high):
            count = str(low) if low == high else f"{low} to {high}" if high is not None else f"at least {low}"
            return f"{self.name} takes {count} argument{'s' * (count != '1')} ({self.call}), not {len(args)}"
        reason = self.check(args) if self.check else None
        return f"{self.name}: {reason}" if reason else None


# -- building blocks --------------------------------------------------------------------
def fn(name: str, *args: exp.Expr) -> exp.Expr:
    """A Spark function call kept exactly as written (its type comes from the dialect's
    table of Spark function types): used for format-taking functions, whose pattern
    sqlglot would otherwise translate."""
    return exp.Anonymous(this=name, expressions=list(args))


def spark(name: str, *args: exp.Expr) -> exp.Expr:
    """A Spark function call as Spark's own dialect parses it (a typed sqlglot node)."""
    return exp.func(name, *args, dialect="spark")


def string(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def arg(args: Args, i: int, default: exp.Expr) -> exp.Expr:
    return args[i] if len(args) > i else default


def optional(args: Args, i: int) -> exp.Expr | None:
    """Argument ``i``, or None when the call leaves it out."""
    return args[i] if len(args) > i else None


def in_zone(ts: exp.Expr, zone: exp.Expr | None) -> exp.Expr:
    """A UTC timestamp shown as wall time in ``zone`` (ksqlDB's optional time zone)."""
    return ts if zone is None else fn("from_utc_timestamp", ts, zone)


def from_zone(ts: exp.Expr, zone: exp.Expr | None) -> exp.Expr:
    """Wall time in ``zone`` read back as the UTC instant."""
    return ts if zone is None else fn("to_utc_timestamp", ts, zone)


def literal_text(node: exp.Expr) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def literal_int(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Neg):
        inner = literal_int(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


def needs_literal(i: int, what: str, valid: Callable[[exp.Expr], bool]) -> Callable[[Args], str | None]:
    def check(args: Args) -> str | None:
        if len(args) > i and not valid(args[i]):
            return f"argument {i + 1} must be {what}, not {args[i].sql(dialect='spark')!r}"
        return None

    return check


def _unit(node: exp.Expr) -> str | None:
    word = node.name.upper() if isinstance(node, (exp.Column, exp.Var, exp.Identifier)) else None
    return UNITS.get(word or "")


def timestamp_add(unit: exp.Expr, amount: exp.Expr, ts: exp.Expr) -> exp.Expr:
    return spark("timestampadd", exp.var(_unit(unit) or "DAY"), amount, ts)


def negate(node: exp.Expr) -> exp.Expr:
    return exp.Neg(this=exp.paren(node.copy(), copy=False))


def mask(value: exp.Expr, args: Args, first: int) -> exp.Expr:
    """Spark's mask() with ksqlDB's defaults for the replacements given from ``first`` on."""
    chars = [arg(args, first + i, string(d)) for i, d in enumerate(MASK_DEFAULTS)]
    return fn("mask", value, *chars)


def rest(s: exp.Expr, n: exp.Expr) -> exp.Expr:
    """The characters of ``s`` after the first ``n``."""
    return spark("substring", s, exp.Add(this=n, expression=exp.Literal.number(1)))


def head_but(s: exp.Expr, n: exp.Expr) -> exp.Expr:
    """The characters of ``s`` before its last ``n``."""
    keep = spark("greatest", exp.Sub(this=spark("length", s.copy()), expression=n), exp.Literal.number(0))
    return spark("left", s, keep)


def regex_escaped(delimiter: str) -> str:
    """``delimiter`` as a Java regular expression matching exactly it."""
    return "".join(c if c.isalnum() or c == "_" else "\\" + c for c in delimiter)


def split(args: Args) -> exp.Expr:
    return spark("split", args[0], string(regex_escaped(literal_text(args[1]) or "")))


def slice_(args: Args) -> exp.Expr:
    length = exp.Add(this=exp.Sub(this=args[2], expression=args[1].copy()), expression=exp.Literal.number(1))
    return spark("slice", args[0], args[1], length)


def array_sort(args: Args) -> exp.Expr:
    descending = len(args) > 1 and (literal_text(args[1]) or "").upper() == "DESC"
    if descending:  # sort_array(a, false): NULLs last, as ksqlDB
        return spark("sort_array", args[0], exp.false())
    return fn("array_sort", args[0])  # ascending with NULLs last


def array_concat(args: Args) -> exp.Expr:
    a, b = args
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=a.copy(), expression=exp.null()), true=b.copy()),
            exp.If(this=exp.Is(this=b.copy(), expression=exp.null()), true=a.copy()),
        ],
        default=fn("concat", a, b),
    )


def regexp_extract(args: Args) -> exp.Expr:
    pattern, s = args[0], args[1]
    extract = spark("regexp_extract", s.copy(), pattern.copy(), arg(args, 2, exp.Literal.number(0)))
    return spark("if", exp.RegexpLike(this=s, expression=pattern), extract, exp.null())


def instr(args: Args) -> exp.Expr:
    if len(args) == 2:
        return spark("instr", args[0], args[1])
    return spark("locate", args[1], args[0], args[2])


def top(collect: str) -> Callable[[Args], exp.Expr]:
    def build(args: Args) -> exp.Expr:
        ordered = spark("sort_array", spark(collect, args[0]), exp.false())
        return spark("slice", ordered, exp.Literal.number(1), args[1])

    return build


def positive_int(node: exp.Expr) -> bool:
    return (literal_int(node) or 0) > 0


def is_unit(node: exp.Expr) -> bool:
    return _unit(node) is not None


def is_direction(node: exp.Expr) -> bool:
    return (literal_text(node) or "").upper() in ("ASC", "DESC")


def url_part(part: str) -> Callable[[Args], exp.Expr]:
    return lambda args: fn("try_parse_url", args[0], string(part))


def _time_type(name: str, call: str) -> KsqlFunction:
    return KsqlFunction(
        name, call, "-", refused="ksqlDB's TIME type: Spark has no time-of-day type (see section 10)", arity=(0, None)
    )


TIME_ZONE = "the optional time zone is a Java zone ID ('UTC', 'Europe/Paris')"
PATTERN = "the pattern is Java's DateTimeFormatter, as Spark's (a quote inside it is written '')"

F = KsqlFunction
# fmt: off
KSQL_FUNCTIONS: list[KsqlFunction] = [
    # -- strings --
    F("LCASE", "LCASE(s)", "lower(s)", build=lambda a: exp.Lower(this=a[0])),
    F("UCASE", "UCASE(s)", "upper(s)", build=lambda a: exp.Upper(this=a[0])),
    F("LEN", "LEN(s)", "length(s)", build=lambda a: exp.Length(this=a[0])),
    F("CONCAT", "CONCAT(a, b, ...)", "concat_ws('', a, b, ...)", arity=(1, None),
      build=lambda a: spark("concat_ws", string(""), *a),
      notes="a NULL argument counts as '' (ksqlDB); Spark's concat, NULL when any argument is, is `a || b`"),
    F("CONCAT_WS", "CONCAT_WS(sep, a, ...)", "concat_ws(sep, a, ...)", arity=(2, None), notes="NULLs are skipped"),
    F("INSTR", "INSTR(s, sub[, position])", "instr(s, sub) / locate(sub, s, position)", arity=(2, 3),
      build=instr, check=needs_literal(2, "a positive whole number", positive_int),
      notes="1-based; 0 when not found; a negative position and the occurrence argument have no Spark form"),
    F("SUBSTRING", "SUBSTRING(s, pos[, len])", "substring(s, pos[, len])", arity=(2, 3),
      notes="1-based; a negative pos counts from the end, as in ksqlDB"),
    F("TRIM", "TRIM(s)", "trim(s)"),
    F("LPAD", "LPAD(s, len, pad)", "lpad(s, len, pad)", arity=(3, 3)),
    F("RPAD", "RPAD(s, len, pad)", "rpad(s, len, pad)", arity=(3, 3)),
    F("REPLACE", "REPLACE(s, old, new)", "replace(s, old, new)", arity=(3, 3)),
    F("INITCAP", "INITCAP(s)", "initcap(s)"),
    F("CHR", "CHR(n)", "chr(n)"),
    F("UUID", "UUID()", "uuid()", arity=(0, 0), notes="nondeterministic (the upgrade validator knows)"),
    F("MASK", "MASK(s[, upper, lower, digit, other])", "mask(s, 'X', 'x', 'n', '-')", arity=(1, 5),
      build=lambda a: mask(a[0], a, 1),
      notes="ksqlDB's defaults: other characters become '-' (Spark's mask keeps them); NULL keeps a class"),
    F("MASK_LEFT", "MASK_LEFT(s, n[, upper, lower, digit, other])", "concat(mask(left(s, n)), substring(s, n + 1))",
      arity=(2, 6),
      build=lambda a: spark("concat", mask(spark("left", a[0], a[1]), a, 2), rest(a[0].copy(), a[1].copy()))),
    F("MASK_RIGHT", "MASK_RIGHT(s, n[, ...])", "concat(left(s, length(s) - n), mask(right(s, n)))", arity=(2, 6),
      build=lambda a: spark("concat", head_but(a[0], a[1]), mask(spark("right", a[0].copy(), a[1].copy()), a, 2))),
    F("MASK_KEEP_LEFT", "MASK_KEEP_LEFT(s, n[, ...])", "concat(left(s, n), mask(substring(s, n + 1)))", arity=(2, 6),
      build=lambda a: spark("concat", spark("left", a[0], a[1]), mask(rest(a[0].copy(), a[1].copy()), a, 2))),
    F("MASK_KEEP_RIGHT", "MASK_KEEP_RIGHT(s, n[, ...])", "concat(mask(left(s, length(s) - n)), right(s, n))",
      arity=(2, 6),
      build=lambda a: spark("concat", mask(head_but(a[0], a[1]), a, 2), spark("right", a[0].copy(), a[1].copy()))),
    F("SPLIT", "SPLIT(s, delimiter)", "split(s, <delimiter as a regex>)", arity=(2, 2), build=split,
      check=needs_literal(1, "a string literal (Spark splits by a regular expression)",
                          lambda n: literal_text(n) is not None),
      notes="the delimiter is text, as in ksqlDB (escaped into Spark's regular expression); "
            "'' splits into characters"),
    F("REGEXP_SPLIT_TO_ARRAY", "REGEXP_SPLIT_TO_ARRAY(s, regex)", "split(s, regex)", arity=(2, 2),
      build=lambda a: spark("split", a[0], a[1])),
    F("REGEXP_EXTRACT", "REGEXP_EXTRACT(regex, s[, group])", "if(s rlike regex, regexp_extract(s, regex, group), NULL)",
      arity=(2, 3), build=regexp_extract,
      notes="ksqlDB's argument order; group 0 (the whole match) by default; NULL when nothing matches"),
    F("REGEXP_EXTRACT_ALL", "REGEXP_EXTRACT_ALL(regex, s[, group])", "regexp_extract_all(s, regex, group)",
      arity=(2, 3),
      build=lambda a: fn("regexp_extract_all", a[1], a[0], arg(a, 2, exp.Literal.number(0))),
      notes="ksqlDB's argument order; group 0 by default"),
    F("REGEXP_REPLACE", "REGEXP_REPLACE(s, regex, replacement)", "regexp_replace(s, regex, replacement)", arity=(3, 3)),
    F("EXTRACTJSONFIELD", "EXTRACTJSONFIELD(json, path)", "get_json_object(json, path)", arity=(2, 2),
      build=lambda a: spark("get_json_object", a[0], a[1]),
      notes="a JSONPath such as '$.a.b'; an object or array comes back as JSON text"),
    F("JSON_ARRAY_LENGTH", "JSON_ARRAY_LENGTH(json)", "json_array_length(json)"),
    F("JSON_KEYS", "JSON_KEYS(json)", "json_object_keys(json)", build=lambda a: fn("json_object_keys", a[0])),
    F("IS_JSON_STRING", "IS_JSON_STRING(s)", "try_parse_json(s) IS NOT NULL",
      build=lambda a: exp.Not(this=exp.Is(this=fn("try_parse_json", a[0]), expression=exp.null()))),
    F("ENCODE", "ENCODE(s, from, to)", "-", arity=(0, None),
      refused="Spark's encode() is a charset conversion to bytes; write hex(s), base64(s) or unbase64(s)"),
    F("TO_BYTES", "TO_BYTES(s, encoding)", "-", arity=(0, None), refused="BYTES values: see section 10"),
    F("FROM_BYTES", "FROM_BYTES(b, encoding)", "-", arity=(0, None), refused="BYTES values: see section 10"),
    # -- nulls --
    F("IFNULL", "IFNULL(a, b)", "coalesce(a, b)", arity=(2, 2),
      build=lambda a: exp.Coalesce(this=a[0], expressions=[a[1]])),
    F("COALESCE", "COALESCE(a, ...)", "coalesce(a, ...)", arity=(1, None)),
    F("NULLIF", "NULLIF(a, b)", "nullif(a, b)", arity=(2, 2)),
    # -- numbers --
    F("ABS", "ABS(x)", "abs(x)"),
    F("CEIL", "CEIL(x)", "ceil(x)", notes="BIGINT for a DOUBLE, as Spark"),
    F("FLOOR", "FLOOR(x)", "floor(x)", notes="BIGINT for a DOUBLE, as Spark"),
    F("ROUND", "ROUND(x[, digits])", "round(x[, digits])", arity=(1, 2),
      notes="half up; round(DOUBLE) stays DOUBLE (ksqlDB gives BIGINT): CAST it"),
    F("EXP", "EXP(x)", "exp(x)"),
    F("LN", "LN(x)", "ln(x)"),
    F("SQRT", "SQRT(x)", "sqrt(x)"),
    F("SIGN", "SIGN(x)", "sign(x)", notes="DOUBLE"),
    F("RANDOM", "RANDOM()", "rand()", arity=(0, 0), build=lambda a: exp.Rand(), notes="nondeterministic"),
    F("GREATEST", "GREATEST(a, ...)", "greatest(a, ...)", arity=(1, None)),
    F("LEAST", "LEAST(a, ...)", "least(a, ...)", arity=(1, None)),
    F("GEO_DISTANCE", "GEO_DISTANCE(lat1, lon1, lat2, lon2[, unit])", "-", arity=(0, None),
      refused="Spark has no geographic distance function"),
    # -- dates and times --
    F("UNIX_TIMESTAMP", "UNIX_TIMESTAMP([ts])", "unix_millis(ts), unix_millis(current_timestamp())", arity=(0, 1),
      build=lambda a: exp.UnixMillis(this=a[0] if a else exp.CurrentTimestamp()),
      notes="epoch milliseconds (ksqlDB); Spark's unix_timestamp (seconds) is unix_seconds(ts)"),
    F("UNIX_DATE", "UNIX_DATE([date])", "unix_date(date), unix_date(current_date())", arity=(0, 1),
      build=lambda a: fn("unix_date", a[0] if a else exp.CurrentDate()), notes="days since 1970-01-01"),
    F("FROM_UNIXTIME", "FROM_UNIXTIME(ms)", "timestamp_millis(ms)", build=lambda a: fn("timestamp_millis", a[0]),
      notes="epoch milliseconds to TIMESTAMP (ksqlDB); Spark's from_unixtime(seconds, pattern) is "
            "date_format(timestamp_seconds(s), pattern)"),
    F("FROM_DAYS", "FROM_DAYS(n)", "date_from_unix_date(n)", build=lambda a: exp.DateFromUnixDate(this=a[0])),
    F("STRINGTOTIMESTAMP", "STRINGTOTIMESTAMP(s, pattern[, zone])", "unix_millis(try_to_timestamp(s, pattern))",
      arity=(2, 3), build=lambda a: exp.UnixMillis(this=from_zone(fn("try_to_timestamp", a[0], a[1]), optional(a, 2))),
      notes=f"BIGINT epoch milliseconds; NULL when s does not match; {PATTERN}; {TIME_ZONE}"),
    F("TIMESTAMPTOSTRING", "TIMESTAMPTOSTRING(ms, pattern[, zone])", "date_format(timestamp_millis(ms), pattern)",
      arity=(2, 3), build=lambda a: fn("date_format", in_zone(fn("timestamp_millis", a[0]), optional(a, 2)), a[1]),
      notes="from BIGINT epoch milliseconds; same pattern and zone rules"),
    F("STRINGTODATE", "STRINGTODATE(s, pattern)", "unix_date(try_to_date(s, pattern))", arity=(2, 2),
      build=lambda a: fn("unix_date", fn("try_to_date", a[0], a[1])), notes="INT days since 1970-01-01"),
    F("DATETOSTRING", "DATETOSTRING(days, pattern)", "date_format(date_from_unix_date(days), pattern)", arity=(2, 2),
      build=lambda a: fn("date_format", exp.DateFromUnixDate(this=a[0]), a[1])),
    F("PARSE_TIMESTAMP", "PARSE_TIMESTAMP(s, pattern[, zone])", "try_to_timestamp(s, pattern)", arity=(2, 3),
      build=lambda a: from_zone(fn("try_to_timestamp", a[0], a[1]), optional(a, 2)),
      notes="NULL when s does not match (ksqlDB logs the error and gives NULL); with a zone: "
            "to_utc_timestamp(try_to_timestamp(s, pattern), zone)"),
    F("FORMAT_TIMESTAMP", "FORMAT_TIMESTAMP(ts, pattern[, zone])", "date_format(ts, pattern)", arity=(2, 3),
      build=lambda a: fn("date_format", in_zone(a[0], optional(a, 2)), a[1]),
      notes="with a zone: date_format(from_utc_timestamp(ts, zone), pattern); times are UTC otherwise"),
    F("PARSE_DATE", "PARSE_DATE(s, pattern)", "try_to_date(s, pattern)", arity=(2, 2),
      build=lambda a: fn("try_to_date", a[0], a[1])),
    F("FORMAT_DATE", "FORMAT_DATE(date, pattern)", "date_format(date, pattern)", arity=(2, 2),
      build=lambda a: fn("date_format", a[0], a[1])),
    F("CONVERT_TZ", "CONVERT_TZ(ts, from, to)", "from_utc_timestamp(to_utc_timestamp(ts, from), to)", arity=(3, 3),
      build=lambda a: fn("from_utc_timestamp", fn("to_utc_timestamp", a[0], a[1]), a[2])),
    F("TIMESTAMPADD", "TIMESTAMPADD(unit, n, ts)", "timestampadd(unit, n, ts)", arity=(3, 3),
      build=lambda a: timestamp_add(*a), check=needs_literal(0, "a time unit such as SECONDS", is_unit),
      spark_form=True, notes="units MILLISECONDS to YEARS, singular or plural"),
    F("TIMESTAMPSUB", "TIMESTAMPSUB(unit, n, ts)", "timestampadd(unit, -n, ts)", arity=(3, 3),
      build=lambda a: timestamp_add(a[0], negate(a[1]), a[2]), check=needs_literal(0, "a time unit", is_unit)),
    F("DATEADD", "DATEADD(unit, n, date)", "CAST(timestampadd(unit, n, date) AS DATE)", arity=(3, 3),
      build=lambda a: exp.cast(timestamp_add(*a), "DATE"), check=needs_literal(0, "a time unit such as DAYS", is_unit),
      notes="a DATE, as ksqlDB (Spark's dateadd(unit, ...) gives a TIMESTAMP)"),
    F("DATESUB", "DATESUB(unit, n, date)", "CAST(timestampadd(unit, -n, date) AS DATE)", arity=(3, 3),
      build=lambda a: exp.cast(timestamp_add(a[0], negate(a[1]), a[2]), "DATE"),
      check=needs_literal(0, "a time unit", is_unit)),
    _time_type("PARSE_TIME", "PARSE_TIME(s, pattern)"),
    _time_type("FORMAT_TIME", "FORMAT_TIME(t, pattern)"),
    _time_type("TIMEADD", "TIMEADD(unit, n, t)"),
    _time_type("TIMESUB", "TIMESUB(unit, n, t)"),
    # -- arrays and maps --
    F("ARRAY_CONTAINS", "ARRAY_CONTAINS(a, x)", "array_contains(a, x)", arity=(2, 2)),
    F("ARRAY_LENGTH", "ARRAY_LENGTH(a)", "array_size(a)", build=lambda a: fn("array_size", a[0]),
      notes="NULL for a NULL array (Spark's size() gives -1)"),
    F("ARRAY_DISTINCT", "ARRAY_DISTINCT(a)", "array_distinct(a)"),
    F("ARRAY_EXCEPT", "ARRAY_EXCEPT(a, b)", "array_except(a, b)", arity=(2, 2)),
    F("ARRAY_INTERSECT", "ARRAY_INTERSECT(a, b)", "array_intersect(a, b)", arity=(2, 2)),
    F("ARRAY_UNION", "ARRAY_UNION(a, b)", "array_union(a, b)", arity=(2, 2)),
    F("ARRAY_REMOVE", "ARRAY_REMOVE(a, x)", "array_remove(a, x)", arity=(2, 2)),
    F("ARRAY_MAX", "ARRAY_MAX(a)", "array_max(a)"),
    F("ARRAY_MIN", "ARRAY_MIN(a)", "array_min(a)"),
    F("ARRAY_CONCAT", "ARRAY_CONCAT(a, b)", "concat(a, b)", arity=(2, 2), build=array_concat,
      notes="a NULL array counts as empty unless both are NULL (ksqlDB)"),
    F("ARRAY_JOIN", "ARRAY_JOIN(a[, delimiter])", "array_join(CAST(a AS ARRAY<STRING>), delimiter)", arity=(1, 2),
      build=lambda a: spark("array_join", exp.cast(a[0], "ARRAY<STRING>"), arg(a, 1, string(","))),
      notes="delimiter ',' by default; NULL elements are left out"),
    F("ARRAY_SORT", "ARRAY_SORT(a[, 'ASC'|'DESC'])", "array_sort(a) / sort_array(a, false)", arity=(1, 2),
      build=array_sort, check=needs_literal(1, "'ASC' or 'DESC'", is_direction), spark_form=True,
      notes="NULLs last either way; with a comparator lambda it is Spark's array_sort"),
    F("SLICE", "SLICE(a, from, to)", "slice(a, from, to - from + 1)", arity=(3, 3), build=slice_,
      notes="1-based and inclusive of `to` (ksqlDB); Spark's slice takes a length"),
    F("ARRAY", "ARRAY(x, ...)", "array(x, ...)", arity=(0, None)),
    F("AS_MAP", "AS_MAP(keys, values)", "map_from_arrays(keys, values)", arity=(2, 2),
      build=lambda a: fn("map_from_arrays", a[0], a[1])),
    F("MAP_KEYS", "MAP_KEYS(m)", "map_keys(m)"),
    F("MAP_VALUES", "MAP_VALUES(m)", "map_values(m)"),
    F("ELT", "ELT(n, s, ...)", "elt(n, s, ...)", arity=(2, None), notes="1-based"),
    F("FIELD", "FIELD(s, a, ...)", "CAST(array_position(array(a, ...), s) AS INT)", arity=(2, None),
      build=lambda a: exp.cast(spark("array_position", spark("array", *a[1:]), a[0]), "INT"),
      notes="1-based; 0 when absent"),
    F("GENERATE_SERIES", "GENERATE_SERIES(start, end[, step])", "explode(sequence(start, end[, step]))",
      arity=(2, 3), build=lambda a: exp.Explode(this=fn("sequence", *a)), notes="one row per value, as ksqlDB"),
    F("EXPLODE", "EXPLODE(a)", "explode(a)", notes="one row per element"),
    # -- URLs --
    F("URL_EXTRACT_HOST", "URL_EXTRACT_HOST(url)", "try_parse_url(url, 'HOST')", build=url_part("HOST"),
      notes="NULL for text that is not a URL"),
    F("URL_EXTRACT_PATH", "URL_EXTRACT_PATH(url)", "try_parse_url(url, 'PATH')", build=url_part("PATH")),
    F("URL_EXTRACT_PROTOCOL", "URL_EXTRACT_PROTOCOL(url)", "try_parse_url(url, 'PROTOCOL')",
      build=url_part("PROTOCOL")),
    F("URL_EXTRACT_QUERY", "URL_EXTRACT_QUERY(url)", "try_parse_url(url, 'QUERY')", build=url_part("QUERY")),
    F("URL_EXTRACT_FRAGMENT", "URL_EXTRACT_FRAGMENT(url)", "try_parse_url(url, 'REF')", build=url_part("REF")),
    F("URL_EXTRACT_PARAMETER", "URL_EXTRACT_PARAMETER(url, name)", "try_parse_url(url, 'QUERY', name)", arity=(2, 2),
      build=lambda a: fn("try_parse_url", a[0], string("QUERY"), a[1])),
    F("URL_EXTRACT_PORT", "URL_EXTRACT_PORT(url)", "-", arity=(0, None),
      refused="Spark's parse_url has no PORT part"),
    F("URL_ENCODE_PARAM", "URL_ENCODE_PARAM(s)", "url_encode(s)", build=lambda a: fn("url_encode", a[0])),
    F("URL_DECODE_PARAM", "URL_DECODE_PARAM(s)", "url_decode(s)", build=lambda a: fn("url_decode", a[0])),
    # -- aggregates --
    F("COUNT", "COUNT() / COUNT(*) / COUNT(x)", "count(*) / count(x)", arity=(0, None),
      build=lambda a: exp.Count(this=a[0] if a else exp.Star(), expressions=a[1:], big_int=True),
      notes="COUNT() means COUNT(*)"),
    F("SUM", "SUM(x)", "sum(x)"),
    F("AVG", "AVG(x)", "avg(x)"),
    F("MIN", "MIN(x)", "min(x)"),
    F("MAX", "MAX(x)", "max(x)"),
    F("COUNT_DISTINCT", "COUNT_DISTINCT(x)", "CAST(size(collect_set(x)) AS BIGINT)",
      build=lambda a: exp.cast(spark("size", spark("collect_set", a[0])), "BIGINT"),
      notes="exact (ksqlDB estimates); Spark streaming has no DISTINCT aggregates; "
            "the state holds the distinct values"),
    F("COLLECT_LIST", "COLLECT_LIST(x)", "collect_list(x)",
      notes="NULLs are left out; the order of values is not defined across micro-batch partitions"),
    F("COLLECT_SET", "COLLECT_SET(x)", "collect_set(x)", notes="order not defined"),
    F("TOPK", "TOPK(x, k)", "slice(sort_array(collect_list(x), false), 1, k)", arity=(2, 2),
      build=top("collect_list"), check=needs_literal(1, "a positive whole number", positive_int),
      notes="the k greatest values, greatest first; the state holds every value of the group"),
    F("TOPKDISTINCT", "TOPKDISTINCT(x, k)", "slice(sort_array(collect_set(x), false), 1, k)", arity=(2, 2),
      build=top("collect_set"), check=needs_literal(1, "a positive whole number", positive_int),
      notes="the state holds the distinct values of the group"),
    F("STDDEV_SAMPLE", "STDDEV_SAMPLE(x)", "stddev_samp(x)", build=lambda a: spark("stddev_samp", a[0])),
    F("CORRELATION", "CORRELATION(x, y)", "corr(x, y)", arity=(2, 2),
      build=lambda a: spark("corr", a[0], a[1])),
    F("EARLIEST_BY_OFFSET", "EARLIEST_BY_OFFSET(x[, n])", "-", arity=(0, None),
      refused="Spark's sources give no offset order an aggregation can follow deterministically "
              "(first() depends on partitioning); for the earliest by event time write MIN_BY(x, ts)"),
    F("LATEST_BY_OFFSET", "LATEST_BY_OFFSET(x[, n])", "-", arity=(0, None),
      refused="Spark's sources give no offset order an aggregation can follow deterministically "
              "(last() depends on partitioning); for the latest by event time write MAX_BY(x, ts)"),
    F("HISTOGRAM", "HISTOGRAM(x)", "-", arity=(0, None),
      refused="Spark has no aggregate counting each value into a map"),
]
# fmt: on
BY_NAME = {f.name: f for f in KSQL_FUNCTIONS}


def problem(name: str, args: Args) -> str | None:
    """Why the ksqlDB function ``name`` cannot take ``args`` (None: not a ksqlDB name, or fine)."""
    spec = BY_NAME.get(name.upper())
    return spec.problem(args) if spec is not None else None


def builders(spark_functions: dict[str, Callable]) -> dict[str, Callable[[Args], exp.Expr]]:
    """Parser.FUNCTIONS entries for the mapped and refused ksqlDB names, over Spark's
    (``spark_functions``). A call the table cannot take is Spark's function when the entry
    says so (``spark_form``), else it stays an unknown function call the analyzer refuses."""

    def builder(spec: KsqlFunction) -> Callable[[Args], exp.Expr]:
        def build(args: Args) -> exp.Expr:
            if spec.problem(args) and spec.spark_form and spec.name in spark_functions:
                return spark_functions[spec.name](args)
            if spec.problem(args) or spec.build is None:
                return exp.Anonymous(this=spec.name, expressions=args)
            tree = spec.build(list(args))
            # sqlglot then checks the call's argument count against the top node's
            # arguments, which a mapping need not keep: the arguments are the tree's now
            args.clear()
            return tree

        return build

    return {f.name: builder(f) for f in KSQL_FUNCTIONS if not f.same}


def markdown_table() -> str:
    """The table of docs/ksqldb.md section 7."""
    lines = ["| ksqlDB | Spark | notes |", "|---|---|---|"]
    for f in KSQL_FUNCTIONS:
        status = "refused: " + f.refused if f.refused else ("same; " if f.same else "") + f.notes
        spark_side = "—" if f.refused else f"`{f.spark}`"
        lines.append(f"| `{f.call}` | {spark_side} | {status.rstrip('; ').replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"
