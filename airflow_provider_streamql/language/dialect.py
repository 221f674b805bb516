"""The StreamQL dialect: Spark SQL expressions, so SELECT bodies run on Spark unchanged."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from . import shapes


class StreamQL(Spark):
    """Spark's dialect; StreamQL statement shapes are recognised by :mod:`.parser` around it."""

    class Tokenizer(Spark.Tokenizer):
        # Spark swallows the rest of SHOW/EXECUTE/... into one raw token; StreamQL parses them.
        COMMANDS: set = set()

    EXPRESSION_METADATA = {
        **Spark.EXPRESSION_METADATA,
        exp.Bracket: {"annotator": shapes.annotate_element},  # m['k'] has the MAP's value type
    }

    class Parser(Spark.Parser):
        # ksqlDB's s->f is a STRUCT field (Spark's s.f), not JSON extraction (see .shapes)
        COLUMN_OPERATORS = {**Spark.Parser.COLUMN_OPERATORS, TokenType.ARROW: shapes.field_access}

    class Generator(Spark.Generator):
        # ksqlDB's 1-based a[i] and m['k'] as Spark's try_element_at (see .shapes)
        TRANSFORMS = {**Spark.Generator.TRANSFORMS, exp.Bracket: shapes.element_sql}


DIALECT = StreamQL()
