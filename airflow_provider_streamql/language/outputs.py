"""The names of a query's output columns, as ksqlDB gives them: ``*`` over a join as
``<ALIAS>_<COLUMN>`` with the join key once, colliding qualified columns the same way, and
``KSQL_COL_<n>`` for expressions without ``AS``; and each name's one spelling
(:func:`output_names`: a source's column as its catalog spells it), checked against quoted
names (:func:`check_quoted`: case-sensitive, as in ksqlDB). The analyzer and the streaming
plan both take the SELECT list from :func:`output_projections`, so the sink's columns, the
Spark SQL and the upgrade validator's shape agree."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..errors import ValidationError
from .statements import Column

#: the names ksqlDB gives unaliased expressions, numbered in SELECT order: KSQL_COL_0, ...
GENERATED_NAME = "KSQL_COL_{}"


def output_projections(select: exp.Select, schemas: dict[str, list[Column]]) -> list[exp.Expr]:
    """The SELECT list of ``select`` under the names ksqlDB gives its output (new nodes; a
    name made up here is an alias on its projection, so Spark, DuckDB and the sink agree).

    - ``*`` is expanded to the sources' columns as they are now. Over a join every column is
      named ``<ALIAS>_<COLUMN>`` (``O_OID``), and a column the ON clause equates with one of
      an earlier source (the join key) is left out: the key appears once, from the left side
      of an INNER or LEFT join, from the right side of a RIGHT join (a FULL join keeps both).
      ``o.*`` over a join gives all of ``o``'s columns, named the same way.
    - A qualified column of a join whose name more than one of the joined sources has is
      named ``<ALIAS>_<COLUMN>``; any other column keeps its own name (ksqlDB's rule).
    - An expression without ``AS`` is named ``KSQL_COL_<n>``, ``n`` counting from 0 in
      SELECT order and skipping names the sources' columns or the other outputs have.

    - ``*`` over a subquery (or ``x.*`` over one named ``x``) is the subquery's output
      columns; over a ``UNION ALL``, its first branch's, which name the columns. Otherwise,
      when the FROM clause is not plain sources, ``*`` is left as written.
    """
    tables = joined_tables(select, schemas)
    columns = {i: schemas[t.name.upper()] for i, t in enumerate(tables or [])}
    join = tables is not None and len(tables) > 1
    owners: dict[str, int] = {}
    for cols in columns.values():
        for lower in {c.name.lower() for c in cols}:
            owners[lower] = owners.get(lower, 0) + 1
    keys = _equated_keys(select, tables, columns) if join and tables is not None else set()
    named: list[tuple[exp.Expr, str | None]] = []  # (projection, its name; None: to make up)
    for projection in select.expressions:
        star = isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        )
        if star and tables is not None:
            chosen = [
                i
                for i, t in enumerate(tables)
                if isinstance(projection, exp.Star) or t.alias_or_name.lower() == projection.table.lower()
            ]
            for i in chosen:
                label = tables[i].alias_or_name
                for c in columns[i]:
                    if not join:
                        named.append((exp.column(c.name, quoted=True), c.name))
                    elif not (isinstance(projection, exp.Star) and (i, c.name.lower()) in keys):
                        joined_name = f"{label}_{c.name}".upper()
                        column = exp.column(c.name, table=label, quoted=True)
                        named.append((exp.alias_(column, joined_name, quoted=True), joined_name))
            if chosen:
                continue
        inner = subquery_outputs(select, projection, schemas) if star and tables is None else None
        if inner is not None:
            named += [(exp.column(name, quoted=True), name) for name in inner]
        elif star and any(isinstance(t, exp.Subquery) for t in from_items(select)):
            raise ValidationError(
                f"{projection.sql()} over a join with a subquery: name the columns it should select instead"
            )
        elif star:
            named.append((projection.copy(), "*"))
        elif isinstance(projection, exp.Alias):
            named.append((projection.copy(), projection.alias))
        elif isinstance(projection, exp.Column):
            if join and projection.table and owners.get(projection.name.lower(), 0) > 1:
                name = f"{projection.table}_{projection.name}".upper()
                named.append((exp.alias_(projection.copy(), name, quoted=True), name))
            else:
                named.append((projection.copy(), projection.name))
        else:
            named.append((projection.copy(), None))
    used = {c.name.upper() for cols in columns.values() for c in cols}
    used |= {name.upper() for _, name in named if name}
    result, n = [], 0
    for projection, given in named:
        if given is None:
            while GENERATED_NAME.format(n) in used:
                n += 1
            projection = exp.alias_(projection, GENERATED_NAME.format(n), quoted=True)
            used.add(GENERATED_NAME.format(n))
        result.append(projection)
    return result


def output_names(named: exp.Select, tree: exp.Select, schemas: dict[str, list[Column]]) -> list[str]:
    """The one spelling of each output column, resolved once: an alias as written (quoted or
    not); a column of a source as that source's catalog spells it (``SELECT id`` over a
    stream declared with ``ID`` outputs ``ID``); anything else as written. ``named`` is the
    SELECT under its output names (:func:`output_projections`), ``tree`` the same qualified
    by sqlglot (which lower-cases names, so spellings are taken from ``named`` and the
    catalog). Every writer writes these names and every reader reads them."""
    owners = {t.alias_or_name.lower(): t.name.upper() for t in tree.find_all(exp.Table)}
    originals = list(named.expressions) if len(named.expressions) == len(tree.selects) else [None] * len(tree.selects)
    names = []
    for original, projection in zip(originals, tree.selects, strict=True):
        if isinstance(original, exp.Alias):
            names.append(original.alias)
            continue
        inner = projection.unalias()
        source = owners.get(inner.table.lower()) if isinstance(inner, exp.Column) else None
        spelled = {c.name.lower(): c.name for c in schemas.get(source or "", [])}
        if isinstance(inner, exp.Column) and inner.name.lower() in spelled:
            names.append(spelled[inner.name.lower()])
        else:
            names.append((original if original is not None else projection).alias_or_name)
    return names


def check_quoted(select: exp.Select, schemas: list[list[Column]], error: Callable[[str, exp.Expr], Exception]) -> None:
    """A quoted name is case-sensitive, as in ksqlDB: `ID` names a column spelled ID, never
    one spelled id. Spark resolves names case-insensitively, so a quoted name that matches a
    column only in another case is refused (it would read that column), saying how it is
    spelled."""
    spellings = {c.name for cols in schemas for c in cols} | {a.alias for a in select.find_all(exp.Alias)}
    by_lower: dict[str, list[str]] = {}
    for spelling in spellings:
        by_lower.setdefault(spelling.lower(), []).append(spelling)
    for column in select.find_all(exp.Column):
        identifier = column.this
        if not isinstance(identifier, exp.Identifier) or not identifier.quoted or identifier.name in spellings:
            continue
        others = by_lower.get(identifier.name.lower())
        if others:
            raise error(
                f"`{identifier.name}` names no column: a quoted name is case-sensitive, as in ksqlDB, and the "
                f"column is spelled {' or '.join(sorted(others))} (write it so, or unquoted)",
                column,
            )


def subquery_outputs(select: exp.Select, star: exp.Expr, schemas: dict[str, list[Column]]) -> list[str] | None:
    """The names of the columns ``star`` stands for when ``select`` reads one subquery (no
    joins), or None when it does not or they cannot be named here."""
    items = from_items(select)
    sub = items[0]
    if not isinstance(sub, exp.Subquery) or len(items) > 1:
        return None
    if isinstance(star, exp.Column) and star.table.lower() != sub.alias_or_name.lower():
        return None
    query = sub.this
    while isinstance(query, (exp.Subquery, exp.Union)):  # a UNION's first branch names its columns
        query = query.this
    if not isinstance(query, exp.Select):
        return None
    unnamed = [p for p in query.expressions if not isinstance(p, (exp.Column, exp.Alias, exp.Star))]
    if unnamed:
        raise ValidationError(
            f"{star.sql()} reads a subquery whose {unnamed[0].sql()} has no name: give it one with AS"
        )
    names: list[str] = []
    for projection in output_projections(query, schemas):
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            return None  # left as written by output_projections: nothing to name it by
        names.append(projection.alias_or_name)
    return names


def from_items(select: exp.Select) -> list[exp.Expr | None]:
    """What the FROM clause and its JOINs read, in order (None: no FROM)."""
    first = select.args.get("from_") or select.args.get("from")
    return [first.this if first else None] + [j.this for j in select.args.get("joins") or []]


def from_item(select: exp.Select) -> exp.Expr:
    """What the FROM clause reads (the analyzer refuses a SELECT without one)."""
    first = from_items(select)[0]
    if first is None:
        raise ValidationError("a SELECT needs FROM <stream or table>")
    return first


def joined_tables(select: exp.Select, schemas: dict[str, list[Column]]) -> list[exp.Table] | None:
    """The sources of the FROM clause and its JOINs in order, or None when one of them is
    not a plain source (a subquery, a name that is not a stream or table)."""
    items = from_items(select)
    tables = [t for t in items if isinstance(t, exp.Table) and t.name.upper() in schemas]
    return tables if len(tables) == len(items) else None


def _equated_keys(select: exp.Select, tables: list[exp.Table], columns: dict) -> set[tuple[int, str]]:
    """(source index, lower-case column) of the join keys ``*`` leaves out: in each JOIN's
    ``ON a = b`` (or USING) between a column of the joined source and one of an earlier
    source, the joined source's column (INNER, LEFT), the earlier one's (RIGHT), none (FULL)."""
    labels = [t.alias_or_name.lower() for t in tables]

    def owner(column: exp.Column) -> int | None:
        if column.table:
            return labels.index(column.table.lower()) if column.table.lower() in labels else None
        having = [i for i, cols in columns.items() if column.name.lower() in {c.name.lower() for c in cols}]
        return having[0] if len(having) == 1 else None

    keys = set()
    for joined, join in enumerate(select.args.get("joins") or [], start=1):
        side = (join.args.get("side") or "").upper()
        if side == "FULL" or (join.args.get("kind") or "").upper() == "CROSS":
            continue
        pairs = []
        for condition in _conjuncts(join.args.get("on")):
            a, b = (condition.this, condition.expression) if isinstance(condition, exp.EQ) else (None, None)
            if isinstance(a, exp.Column) and isinstance(b, exp.Column):
                sides = {owner(a): a, owner(b): b}
                earlier = [i for i in sides if i is not None and i < joined]
                if joined in sides and len(earlier) == 1:
                    pairs.append(((joined, sides[joined].name), (earlier[0], sides[earlier[0]].name)))
        for using in join.args.get("using") or []:
            earlier = [i for i in range(joined) if using.name.lower() in {c.name.lower() for c in columns[i]}]
            if earlier:
                pairs.append(((joined, using.name), (earlier[0], using.name)))
        for right, left in pairs:
            index, name = left if side == "RIGHT" else right
            keys.add((index, name.lower()))
    return keys


def _conjuncts(condition: exp.Expr | None):
    if isinstance(condition, exp.Paren):
        yield from _conjuncts(condition.this)
    elif isinstance(condition, exp.And):
        yield from _conjuncts(condition.left)
        yield from _conjuncts(condition.right)
    elif condition is not None:
        yield condition
