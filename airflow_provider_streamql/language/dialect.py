"""The StreamQL dialect: Spark SQL expressions, so SELECT bodies run on Spark unchanged, plus
ksqlDB's function names (mapped onto Spark's by :mod:`.functions`) and the result types of
Spark functions sqlglot does not type (:attr:`StreamQL.FUNCTION_TYPES`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from . import functions, shapes

T = exp.DType
#: the call's arguments (typed) -> the result type (a rule of :attr:`StreamQL.FUNCTION_TYPES`)
Rule = Callable[[list[exp.Expr]], "exp.DataType | exp.DType | str"]


def _type(node: exp.Expr) -> exp.DataType:
    return node.type or exp.DataType.build("UNKNOWN")


def _arg(i: int) -> Rule:
    return lambda args: _type(args[i])


def _element(i: int) -> Rule:
    """The element type of argument ``i`` (an ARRAY)."""

    def rule(args: list[exp.Expr]) -> exp.DataType | exp.DType:
        array = _type(args[i])
        return array.expressions[0] if array.is_type(T.ARRAY) and array.expressions else T.UNKNOWN

    return rule


def _array_of(i: int) -> Rule:
    def rule(args: list[exp.Expr]) -> exp.DataType | exp.DType:
        element = _type(args[i])
        return (
            T.UNKNOWN if element.is_type(T.UNKNOWN) else exp.DataType(this=T.ARRAY, expressions=[element], nested=True)
        )

    return rule


def _map_of(keys: int, values: int) -> Rule:
    def rule(args: list[exp.Expr]) -> exp.DataType | exp.DType:
        k, v = _element(keys)(args), _element(values)(args)
        if not isinstance(k, exp.DataType) or not isinstance(v, exp.DataType):
            return T.UNKNOWN
        return exp.DataType(this=T.MAP, expressions=[k, v], nested=True)

    return rule


def _map_part(i: int) -> Rule:
    """Keys (0) or values (1) of a MAP argument, as an ARRAY."""

    def rule(args: list[exp.Expr]) -> exp.DataType | exp.DType:
        m = _type(args[0])
        if not m.is_type(T.MAP) or len(m.expressions) != 2:
            return T.UNKNOWN
        return exp.DataType(this=T.ARRAY, expressions=[m.expressions[i]], nested=True)

    return rule


def _concat(args: list[exp.Expr]) -> exp.DataType | exp.DType | str:
    """concat() of arrays is an array; of anything else a string (the StreamQL parser turns a
    written CONCAT into ksqlDB's concat_ws, so this one comes from a mapping)."""
    first = _type(args[0]) if args else exp.DataType.build("UNKNOWN")
    return first if first.is_type(T.ARRAY) else "STRING"


def _date_part(args: list[exp.Expr]) -> str:
    """date_part('SECOND', ts) has the fraction of a second; the other fields are INT."""
    unit = args[0].name.upper() if isinstance(args[0], exp.Literal) else ""
    return "DECIMAL(8, 6)" if unit in ("S", "SEC", "SECS", "SECOND", "SECONDS") else "INT"


#: Spark functions taking a datetime pattern: with one, the call is kept as written, so Spark
#: gets the pattern exactly as the user wrote it (sqlglot's translation of patterns alters
#: quoted text and fractions) and a pull query reads it through .datetime_patterns
PATTERN_CALLS = ("to_timestamp", "to_date", "date_format")


def _as_written(name: str, spark_builder: Callable) -> Callable:
    def build(args: list, dialect) -> exp.Expr:  # sqlglot hands the dialect to a builder taking it
        return exp.Anonymous(this=name, expressions=args) if len(args) > 1 else spark_builder(args, dialect)

    return build


class StreamQL(Spark):
    """Spark's dialect; StreamQL statement shapes are recognised by :mod:`.parser` around it."""

    #: Spark functions sqlglot leaves untyped (an unknown call) -> the type Spark gives
    #: them: a type, or a rule over the arguments' types. A function in neither this table
    #: nor sqlglot's stays untyped and the planner asks for a CAST.
    FUNCTION_TYPES: dict[str, str | Rule] = {
        **dict.fromkeys(("timestamp_millis", "timestamp_seconds", "timestamp_micros"), "TIMESTAMP"),
        **dict.fromkeys(("to_timestamp", "try_to_timestamp", "to_utc_timestamp", "from_utc_timestamp"), "TIMESTAMP"),
        "make_timestamp": "TIMESTAMP",
        **dict.fromkeys(("to_date", "try_to_date", "make_date"), "DATE"),
        **dict.fromkeys(("date_format", "btrim", "conv", "format_number", "url_encode", "url_decode"), "STRING"),
        **dict.fromkeys(
            ("parse_url", "try_parse_url", "mask", "split_part", "substring_index", "regexp_substr", "uuid"), "STRING"
        ),
        **dict.fromkeys(("unix_date", "cardinality", "octet_length", "json_array_length", "find_in_set"), "INT"),
        **dict.fromkeys(("array_size", "regexp_count", "regexp_instr"), "INT"),
        **dict.fromkeys(("date_part", "datepart"), _date_part),
        **dict.fromkeys(("isnull", "isnotnull", "json_valid"), "BOOLEAN"),
        "e": "DOUBLE",
        "array_position": "BIGINT",
        "concat": _concat,
        "bround": _arg(0),
        "pmod": _arg(0),
        "array_union": _arg(0),
        "array_remove": _arg(0),
        "array_sort": _arg(0),
        "array_max": _element(0),
        "array_min": _element(0),
        "regexp_extract_all": "ARRAY<STRING>",
        "json_object_keys": "ARRAY<STRING>",
        "sentences": "ARRAY<ARRAY<STRING>>",
        "sequence": _array_of(0),
        "map_from_arrays": _map_of(0, 1),
        "map_keys": _map_part(0),
        "map_values": _map_part(1),
        "max_by": _arg(0),
        "min_by": _arg(0),
        "try_parse_json": "VARIANT",
    }
    #: sqlglot nodes whose type sqlglot gets wrong or leaves unknown for Spark -> the same
    #: kind of entry, over the node's ``this`` and ``expression`` arguments.
    NODE_TYPES: dict[type[exp.Expr], str | Rule] = {
        exp.Year: "INT",
        exp.WeekOfYear: "INT",
        exp.ArrayPosition: "BIGINT",
        exp.TimestampTrunc: "TIMESTAMP",
        exp.SplitPart: "STRING",
        exp.SubstringIndex: "STRING",
        exp.ParseUrl: "STRING",
        exp.Uuid: "STRING",
        exp.FromTimeZone: "TIMESTAMP",
        exp.ArgMax: _arg(0),
        exp.ArgMin: _arg(0),
        exp.ArrayRemove: _arg(0),
        exp.ArrayMax: _element(0),
        exp.ArrayMin: _element(0),
        exp.ArrayUniqueAgg: _array_of(0),
        exp.MapKeys: _map_part(0),
        exp.Nvl2: _arg(1),
    }

    EXPRESSION_METADATA = {
        **Spark.EXPRESSION_METADATA,
        exp.Anonymous: {"annotator": lambda self, e: StreamQL._annotate_call(self, e)},
        exp.Bracket: {"annotator": shapes.annotate_element},  # m['k'] has the MAP's value type
        **{node: {"annotator": lambda self, e: StreamQL._annotate_node(self, e)} for node in NODE_TYPES},
    }

    @staticmethod
    def _annotate_call(annotator, call: exp.Anonymous) -> exp.Expr:
        entry = StreamQL.FUNCTION_TYPES.get(call.name.lower())
        if entry is None:
            return annotator._set_type(call, annotator.schema.get_udf_type(call))
        return annotator._set_type(call, _resolve(entry, call.expressions))

    @staticmethod
    def _annotate_node(annotator, node: exp.Expr) -> exp.Expr:
        values = [node.args.get(key) for key in node.arg_types]  # in the order of the node's arguments
        args = [a for v in values for a in (v if isinstance(v, list) else [v]) if isinstance(a, exp.Expr)]
        return annotator._set_type(node, _resolve(StreamQL.NODE_TYPES[type(node)], args))

    class Tokenizer(Spark.Tokenizer):
        # Spark swallows the rest of SHOW/EXECUTE/... into one raw token; StreamQL parses them.
        COMMANDS: ClassVar[set] = set()
        # '' inside a string is a quote, as in ksqlDB and standard SQL ('yyyy-MM-dd''T''HH'),
        # not the end of one literal and the start of another that Spark glues to it
        STRING_ESCAPES = ["\\", "'"]

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]  # sqlglot types it as a variable
        FUNCTIONS = {
            **Spark.Parser.FUNCTIONS,
            **functions.builders(Spark.Parser.FUNCTIONS),
            **{name.upper(): _as_written(name, Spark.Parser.FUNCTIONS[name.upper()]) for name in PATTERN_CALLS},
        }
        # ksqlDB's s->f is a STRUCT field (Spark's s.f), not JSON extraction (see .shapes)
        COLUMN_OPERATORS = {**Spark.Parser.COLUMN_OPERATORS, TokenType.ARROW: shapes.field_access}

    class Generator(Spark.Generator):  # type: ignore[misc,valid-type]  # as Parser
        # ksqlDB's 1-based a[i] and m['k'] as Spark's try_element_at (see .shapes)
        TRANSFORMS = {**Spark.Generator.TRANSFORMS, exp.Bracket: shapes.element_sql}


def _resolve(entry: str | Rule, args: list[exp.Expr]) -> exp.DataType | exp.DType:
    """The result type an entry of the tables gives for ``args`` (UNKNOWN when an argument's
    type is unknown and the rule needs it)."""
    if isinstance(entry, str):
        return exp.DataType.build(entry, dialect="spark")
    try:
        result = entry(args)
    except IndexError:
        return T.UNKNOWN
    if isinstance(result, str):
        return exp.DataType.build(result, dialect="spark")
    return result


DIALECT = StreamQL()
