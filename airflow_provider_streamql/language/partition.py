"""ksqlDB's ``PARTITION BY`` on ``CREATE STREAM ... AS SELECT``: the named output columns
become the output stream's KEY, listed first (ksqlDB lists key columns first).

A file topic has no partitions: re-keying decides which columns are the stream's key (what
DESCRIBE shows, the message key of a Kafka sink), nothing is moved between partitions.
"""

from __future__ import annotations

from sqlglot import exp

from .analyzer import SelectAnalysis
from .statements import Column


def keyed_select(select: exp.Select, names: tuple[str, ...], schemas: dict[str, list[Column]]) -> exp.Select:
    """``select`` with the projections named in ``names`` moved first, in that order; a ``*``
    over one source is expanded to its columns first. Projections without a plain name (an
    unaliased expression) keep the order as written."""
    tree = select.copy()
    tables = [t for t in tree.find_all(exp.Table) if t.name.upper() in schemas]
    projections: list[exp.Expr] = []
    for projection in tree.expressions:
        if isinstance(projection, exp.Star) and len(tables) == 1 and not tree.args.get("joins"):
            projections += [exp.column(c.name, quoted=True) for c in schemas[tables[0].name.upper()]]
        else:
            projections.append(projection)
    named: dict[str, exp.Expr] = {}
    for projection in projections:
        if isinstance(projection, (exp.Column, exp.Alias)) and not isinstance(projection.this, exp.Star):
            named.setdefault(projection.alias_or_name.lower(), projection)
    first = [named[n.lower()] for n in names if n.lower() in named]
    tree.set("expressions", first + [p for p in projections if all(p is not f for f in first)])
    return tree


def rekey_problem(analysis: SelectAnalysis, names: tuple[str, ...]) -> str | None:
    """Why ``names`` cannot be the KEY columns of ``analysis``'s output (None when they can:
    then :func:`.tables.keyed_by` makes them so)."""
    outputs = {c.name.lower(): c.name for c in analysis.columns}
    for name in names:
        if name.lower() not in outputs:
            return (
                f"PARTITION BY {name}: the key must be a column of the output (select it, as in "
                f"ksqlDB); the output has {', '.join(c.name for c in analysis.columns)}"
            )
    if len({n.lower() for n in names}) != len(names):
        return f"PARTITION BY names a column twice: {', '.join(names)}"
    return None
