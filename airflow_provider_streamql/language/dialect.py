"""The StreamQL dialect: Spark SQL expressions, so SELECT bodies run on Spark unchanged."""

from __future__ import annotations

from sqlglot.dialects.spark import Spark


class StreamQL(Spark):
    """Spark's dialect; StreamQL statement shapes are recognised by :mod:`.parser` around it."""

    class Tokenizer(Spark.Tokenizer):
        # Spark swallows the rest of SHOW/EXECUTE/... into one raw token; StreamQL parses them.
        COMMANDS: set = set()


DIALECT = StreamQL()
