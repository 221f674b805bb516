"""Column types as typed values from a closed table: a type name and its integer
parameters (``DECIMAL(10, 2)``), element types (``ARRAY<INT>``, ``MAP<STRING, INT>``) and
named fields (``STRUCT<a: INT>``).

A type is read once, from the grammar (a declared column, a CAST in a SELECT) or from what
sqlglot infers for an expression, into a :class:`SqlType`; a type outside the table, or a
parameter out of range, is refused there with the reason. Everything that hands a type to
another system renders it from the typed value: Spark SQL's spelling (:meth:`SqlType.spark`,
also how streamql shows it), DuckDB's (:meth:`SqlType.duckdb`), a sqlglot tree
(:meth:`SqlType.to_sqlglot`), and the runtime's Spark ``DataType`` objects. No type text a
statement holds is ever passed on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from .dialect import StreamQL
from .names import name_problem

DType = exp.DType


class TypeName(enum.Enum):
    """The types a stream or table column may have (Spark SQL's names)."""

    BOOLEAN = "BOOLEAN"
    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    STRING = "STRING"
    VARCHAR = "VARCHAR"
    CHAR = "CHAR"
    BINARY = "BINARY"
    DATE = "DATE"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMP_NTZ = "TIMESTAMP_NTZ"
    ARRAY = "ARRAY"
    MAP = "MAP"
    STRUCT = "STRUCT"


N = TypeName
INTEGERS = (N.TINYINT, N.SMALLINT, N.INT, N.BIGINT)
FLOATS = (N.FLOAT, N.DOUBLE)
TEXTS = (N.STRING, N.VARCHAR, N.CHAR)
TIMESTAMPS = (N.TIMESTAMP, N.TIMESTAMP_NTZ)

#: sqlglot's type (as its Spark dialect reads a declared type, or infers an expression's)
#: -> the type it is here. Spark's TIMESTAMP is an instant (sqlglot: TIMESTAMPTZ, and
#: TIMESTAMP_LTZ is its other name); DATETIME and TEXT are sqlglot's names for what Spark
#: spells TIMESTAMP and STRING; ksqlDB's BYTES is read as VARBINARY.
FROM_SQLGLOT: dict[DType, TypeName] = {
    DType.BOOLEAN: N.BOOLEAN,
    DType.TINYINT: N.TINYINT,
    DType.SMALLINT: N.SMALLINT,
    DType.INT: N.INT,
    DType.BIGINT: N.BIGINT,
    DType.FLOAT: N.FLOAT,
    DType.DOUBLE: N.DOUBLE,
    DType.DECIMAL: N.DECIMAL,
    DType.TEXT: N.STRING,
    DType.VARCHAR: N.VARCHAR,
    DType.CHAR: N.CHAR,
    DType.BINARY: N.BINARY,
    DType.VARBINARY: N.BINARY,
    DType.DATE: N.DATE,
    DType.TIMESTAMP: N.TIMESTAMP,
    DType.TIMESTAMPTZ: N.TIMESTAMP,
    DType.TIMESTAMPLTZ: N.TIMESTAMP,
    DType.DATETIME: N.TIMESTAMP,
    DType.TIMESTAMPNTZ: N.TIMESTAMP_NTZ,
    DType.ARRAY: N.ARRAY,
    DType.MAP: N.MAP,
    DType.STRUCT: N.STRUCT,
}
#: the way back, for :meth:`SqlType.to_sqlglot`
TO_SQLGLOT: dict[TypeName, DType] = {
    **{name: dtype for dtype, name in FROM_SQLGLOT.items() if dtype.name == name.name},
    N.STRING: DType.TEXT,
    N.TIMESTAMP: DType.TIMESTAMPTZ,
    N.TIMESTAMP_NTZ: DType.TIMESTAMPNTZ,
}

#: Spark's widest DECIMAL
MAX_PRECISION = 38
#: a bare DECIMAL is Spark's DECIMAL(10, 0)
DEFAULT_DECIMAL = (10, 0)
#: the longest VARCHAR(n) (a Java string's length) and CHAR(n): Spark pads every CHAR value
#: to its length, so a huge one would make every record that size
MAX_VARCHAR, MAX_CHAR = 2**31 - 1, 255
#: deepest nesting of ARRAY, MAP and STRUCT, and most fields of one STRUCT
MAX_DEPTH, MAX_FIELDS = 16, 1000

#: DuckDB's name of each type without parameters or elements (pull queries, INSERT VALUES)
DUCKDB: dict[TypeName, str] = {
    N.BOOLEAN: "BOOLEAN",
    N.TINYINT: "TINYINT",
    N.SMALLINT: "SMALLINT",
    N.INT: "INTEGER",
    N.BIGINT: "BIGINT",
    N.FLOAT: "FLOAT",
    N.DOUBLE: "DOUBLE",
    N.STRING: "VARCHAR",
    N.VARCHAR: "VARCHAR",
    N.CHAR: "VARCHAR",
    N.BINARY: "BLOB",
    N.DATE: "DATE",
    N.TIMESTAMP: "TIMESTAMP",
    N.TIMESTAMP_NTZ: "TIMESTAMP",
}


class TypeProblem(ValueError):
    """A type that is not in the table, or a parameter out of range: the reason."""


class _DeclaredTypes(StreamQL):
    """Spark's type names, and ksqlDB's ``BYTES`` (Spark's BINARY), for declared columns."""

    class Tokenizer(StreamQL.Tokenizer):
        KEYWORDS = {**StreamQL.Tokenizer.KEYWORDS, "BYTES": TokenType.VARBINARY}


_DECLARED_TYPES = _DeclaredTypes()
#: types Spark cannot hold in a stream, and why (sqlglot would read TIME as TIMESTAMP)
UNSUPPORTED = {
    DType.TIME: "Spark 4.3 does not support the TIME type (UNSUPPORTED_TIME_TYPE)",
    DType.TIMETZ: "Spark has no TIME WITH TIME ZONE type",
}
#: what to declare instead
TIME_INSTEAD = "declare the column INT (milliseconds since midnight, as ksqlDB writes TIME in JSON) or STRING"


def parse_type(text: str) -> SqlType:
    """The type ``text`` declares (``BIGINT``, ``DECIMAL(10, 2)``, ``STRUCT<a INT>``, ksqlDB's
    ``BYTES``), or :class:`TypeProblem` saying why it is none."""
    try:
        data_type = exp.DataType.build(text, dialect=_DECLARED_TYPES)
    except (SqlglotError, ValueError, RecursionError):
        raise TypeProblem(f"unknown type {text!r}") from None
    for node in data_type.find_all(exp.DataType):
        if node.this in UNSUPPORTED:
            raise TypeProblem(f"{UNSUPPORTED[node.this]}; {TIME_INSTEAD}")
    return SqlType.from_sqlglot(data_type)


@dataclass(frozen=True)
class SqlType:
    """A column type: ``name`` and its parameters, checked when made.

    - ``params``: DECIMAL's (precision, scale), always both; VARCHAR's and CHAR's length.
    - ``elements``: ARRAY's element type; MAP's key and value types.
    - ``fields``: STRUCT's (field name, type) pairs, names plain and distinct in any case.
    """

    name: TypeName
    params: tuple[int, ...] = ()
    elements: tuple[SqlType, ...] = ()
    fields: tuple[tuple[str, SqlType], ...] = ()

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise TypeProblem(problem)

    # -- making one -----------------------------------------------------------------------
    @classmethod
    def of(cls, name: TypeName | str, *params: int) -> SqlType:
        """A type without elements: ``SqlType.of("DECIMAL", 10, 2)``, ``SqlType.of(TypeName.INT)``."""
        kind = name if isinstance(name, TypeName) else _name(name)
        if kind is N.DECIMAL:
            params = _decimal(params)
        return cls(kind, tuple(params))

    @classmethod
    def array(cls, element: SqlType) -> SqlType:
        return cls(N.ARRAY, elements=(element,))

    @classmethod
    def map(cls, key: SqlType, value: SqlType) -> SqlType:
        return cls(N.MAP, elements=(key, value))

    @classmethod
    def struct(cls, fields: list[tuple[str, SqlType]] | tuple[tuple[str, SqlType], ...]) -> SqlType:
        return cls(N.STRUCT, fields=tuple(fields))

    @classmethod
    def from_sqlglot(cls, data_type: exp.DataType) -> SqlType:
        """The type a sqlglot tree stands for; :class:`TypeProblem` for one outside the table
        (``INTERVAL``, ``VARIANT``, ``INT UNSIGNED``, ...) or a parameter that is not a
        whole number in range."""
        return _from_sqlglot(data_type, 0)

    # -- what it is ---------------------------------------------------------------------
    @property
    def is_integer(self) -> bool:
        return self.name in INTEGERS

    @property
    def is_float(self) -> bool:
        return self.name in FLOATS

    @property
    def is_decimal(self) -> bool:
        return self.name is N.DECIMAL

    @property
    def is_number(self) -> bool:
        return self.is_integer or self.is_float or self.is_decimal

    @property
    def is_text(self) -> bool:
        return self.name in TEXTS

    @property
    def is_timestamp(self) -> bool:
        """TIMESTAMP (an instant) or TIMESTAMP_NTZ (a wall-clock time)."""
        return self.name in TIMESTAMPS

    @property
    def precision(self) -> int:
        return self.params[0]

    @property
    def scale(self) -> int:
        return self.params[1]

    # -- rendered for others ---------------------------------------------------------------
    def spark(self) -> str:
        """Spark SQL's spelling (``DECIMAL(10, 2)``, ``STRUCT<a: INT>``): how streamql shows
        and records a type."""
        if self.name is N.ARRAY:
            return f"ARRAY<{self.elements[0].spark()}>"
        if self.name is N.MAP:
            return f"MAP<{self.elements[0].spark()}, {self.elements[1].spark()}>"
        if self.name is N.STRUCT:
            return "STRUCT<" + ", ".join(f"{name}: {t.spark()}" for name, t in self.fields) + ">"
        return self.name.value + (f"({', '.join(map(str, self.params))})" if self.params else "")

    def duckdb(self) -> str:
        """DuckDB's spelling, every STRUCT field name quoted."""
        if self.name is N.ARRAY:
            return f"{self.elements[0].duckdb()}[]"
        if self.name is N.MAP:
            return f"MAP({self.elements[0].duckdb()}, {self.elements[1].duckdb()})"
        if self.name is N.STRUCT:
            return "STRUCT(" + ", ".join(f"{quote_duckdb(name)} {t.duckdb()}" for name, t in self.fields) + ")"
        if self.name is N.DECIMAL:
            return f"DECIMAL({self.precision}, {self.scale})"
        return DUCKDB[self.name]

    def to_sqlglot(self) -> exp.DataType:
        """The type as a sqlglot tree (for sqlglot's type inference and generated SQL)."""
        if self.name is N.STRUCT:
            columns = [exp.ColumnDef(this=exp.to_identifier(n), kind=t.to_sqlglot()) for n, t in self.fields]
            return exp.DataType(this=DType.STRUCT, expressions=columns, nested=True)
        if self.elements:
            elements = [t.to_sqlglot() for t in self.elements]
            return exp.DataType(this=TO_SQLGLOT[self.name], expressions=elements, nested=True)
        params = [exp.DataTypeParam(this=exp.Literal.number(p)) for p in self.params]
        return exp.DataType(this=TO_SQLGLOT[self.name], expressions=params or None, nested=False)

    def __str__(self) -> str:
        return self.spark()


def quote_duckdb(name: str) -> str:
    """A DuckDB identifier, quoted (a doubled ``"`` inside)."""
    return '"' + name.replace('"', '""') + '"'


def _name(text: str) -> TypeName:
    try:
        return TypeName(text.upper())
    except ValueError:
        raise TypeProblem(f"{text!r} is not a type ({', '.join(n.value for n in TypeName)})") from None


def _decimal(params: tuple[int, ...]) -> tuple[int, ...]:
    """DECIMAL's parameters with Spark's defaults: (10, 0) bare, (p, 0) with a precision."""
    if not params:
        return DEFAULT_DECIMAL
    return (params[0], 0) if len(params) == 1 else params


def _problem(t: SqlType) -> str | None:
    """What is wrong with ``t`` as made (None when it is a type of the table)."""
    for p in t.params:
        if isinstance(p, bool) or not isinstance(p, int):
            return f"{t.name.value} takes whole-number parameters, not {p!r}"
    if t.name is N.DECIMAL:
        if len(t.params) != 2:
            return f"DECIMAL takes a precision and a scale, not {len(t.params)} parameters"
        precision, scale = t.params
        if not 1 <= precision <= MAX_PRECISION:
            return f"DECIMAL precision must be from 1 to {MAX_PRECISION} (Spark's widest), not {precision}"
        if not 0 <= scale <= precision:
            return f"DECIMAL scale must be from 0 to the precision ({precision}), not {scale}"
    elif t.name in (N.VARCHAR, N.CHAR):
        longest = MAX_VARCHAR if t.name is N.VARCHAR else MAX_CHAR
        if len(t.params) != 1 or not 1 <= t.params[0] <= longest:
            return f"{t.name.value} takes one length from 1 to {longest}, not {_shown(t.params)}"
    elif t.params:
        return f"{t.name.value} takes no parameters, not {_shown(t.params)}"
    wanted = {N.ARRAY: 1, N.MAP: 2}.get(t.name, 0)
    if len(t.elements) != wanted:
        return f"{t.name.value} takes {wanted or 'no'} element type{'s' if wanted != 1 else ''}"
    if (t.name is N.STRUCT) != bool(t.fields):
        return "a STRUCT has at least one field" if t.name is N.STRUCT else f"{t.name.value} has no fields"
    if len(t.fields) > MAX_FIELDS:
        return f"a STRUCT has at most {MAX_FIELDS} fields, not {len(t.fields)}"
    seen: set[str] = set()
    for name, _type in t.fields:
        problem = name_problem(name) if isinstance(name, str) else "a field name is text"
        if problem:
            return f"STRUCT field {name!r}: {problem}"
        if name.lower() in seen:
            return f"STRUCT field {name!r} is given twice (names are matched case-insensitively)"
        seen.add(name.lower())
    return None


def _shown(params: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, params)) + ")" if params else "none"


def _from_sqlglot(data_type: exp.DataType, depth: int) -> SqlType:
    if depth > MAX_DEPTH:
        raise TypeProblem(f"types nest at most {MAX_DEPTH} levels deep (ARRAY, MAP, STRUCT)")
    if not isinstance(data_type, exp.DataType):
        raise TypeProblem(f"{data_type.sql()!r} is not a type")
    name = FROM_SQLGLOT.get(data_type.this)
    if name is None:
        shown = data_type.this.value if isinstance(data_type.this, DType) else str(data_type.this)
        raise TypeProblem(f"{shown} is not a type a stream or table column can have ({_known()})")
    parts = data_type.expressions or []
    if name is N.STRUCT:
        fields = []
        for part in parts:
            if not isinstance(part, exp.ColumnDef) or not isinstance(part.args.get("kind"), exp.DataType):
                raise TypeProblem(f"a STRUCT field is a name and a type, not {part.sql()!r}")
            fields.append((part.name, _from_sqlglot(part.args["kind"], depth + 1)))
        return SqlType.struct(fields)
    if name in (N.ARRAY, N.MAP):
        if not all(isinstance(p, exp.DataType) for p in parts):
            raise TypeProblem(f"{name.value} takes element types, not {', '.join(p.sql() for p in parts)!r}")
        return SqlType(name, elements=tuple(_from_sqlglot(p, depth + 1) for p in parts))
    params = tuple(_param(p, name) for p in parts)
    if name in (N.VARCHAR, N.CHAR) and not params:
        name = N.STRING  # VARCHAR without a length is a STRING (sqlglot types text literals so)
    return SqlType.of(name, *params)


def _param(node: exp.Expr, name: TypeName) -> int:
    """A type parameter: a whole-number literal, never anything else."""
    value = node.this if isinstance(node, exp.DataTypeParam) else node
    if isinstance(value, exp.Literal) and not value.is_string and value.is_int:
        return int(value.to_py())
    raise TypeProblem(f"{name.value} takes whole-number parameters, not {value.sql()!r}")


def _known() -> str:
    return "known: " + ", ".join(n.value for n in TypeName)
