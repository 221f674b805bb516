"""ksqlDB's access to STRUCT, ARRAY and MAP values, on the sqlglot tree of a SELECT.

- ``s->f`` (a STRUCT's field; ``s->a->b`` nested) is Spark's ``s.f``: a Dot, named like
  ksqlDB names it when not aliased (the last field of the chain), see :func:`field_access`
  and :func:`name_fields`.
- ``a[i]`` is 1-based, as in ksqlDB (``a[1]`` the first element, ``a[-1]`` the last, NULL
  when there is no such element); ``m['k']`` looks a key up in a MAP (NULL when absent). The
  parser marks each subscript :data:`ONE_BASED`; on Spark it becomes ``try_element_at``
  (:func:`element_sql`); DuckDB (pull queries) indexes from 1 as ksqlDB does.

The dialect (:mod:`.dialect`) wires these in; they do not import it.
"""

from __future__ import annotations

from sqlglot import exp

#: ``offset`` of a subscript written in a StreamQL SELECT: ksqlDB's arrays are 1-based
ONE_BASED = 1


def field_access(parser, this: exp.Expr, path: exp.Expr) -> exp.Expr:
    """The parser's ``->`` operator: a STRUCT field access (exp.Dot), not JSON extraction."""
    field = path.this if isinstance(path, exp.Column) and not path.table else path
    if not isinstance(field, exp.Identifier):
        parser.raise_error("expected a field name after ->")
    return parser.expression(exp.Dot(this=this, expression=field))


def element_sql(generator, bracket: exp.Bracket) -> str:
    """A ksqlDB subscript on Spark: ``try_element_at``, which is 1-based with negative
    indexes from the end for an ARRAY, a key lookup for a MAP, and NULL (not an error, as
    Spark's ``a[i]`` is under ANSI mode) when there is no such element or key. ``a[0]`` names
    no element (NULL in ksqlDB); Spark's try_element_at refuses index 0, so a literal 0 is
    given as a NULL index."""
    if bracket.args.get("offset") != ONE_BASED or len(bracket.expressions) != 1:
        return generator.bracket_sql(bracket)
    (index,) = bracket.expressions
    if isinstance(index, exp.Literal) and not index.is_string and index.to_py() == 0:
        index = exp.cast(exp.null(), exp.DataType.build("INT"))
    return generator.sql(exp.Anonymous(this="try_element_at", expressions=[bracket.this, index]))


def annotate_element(annotator, bracket: exp.Bracket) -> exp.Bracket:
    """The type of ``m[k]`` on a MAP is its value type (sqlglot types only ARRAY elements)."""
    map_type = bracket.this.type
    if map_type is not None and map_type.is_type(exp.DataType.Type.MAP) and len(map_type.expressions) == 2:
        annotator._set_type(bracket, map_type.expressions[1])
        return bracket
    return annotator._annotate_bracket(bracket)


def mark_subscripts(tree: exp.Expr) -> None:
    """Every ``[...]`` subscript of ``tree`` is ksqlDB's (1-based)."""
    for bracket in tree.find_all(exp.Bracket):
        if not bracket.args.get("json_access"):
            bracket.set("offset", ONE_BASED)


def name_fields(select: exp.Select) -> None:
    """An unaliased ``s->a->b`` projection is named ``b``, as ksqlDB names it."""
    for projection in list(select.expressions):
        if isinstance(projection, exp.Dot) and isinstance(projection.expression, exp.Identifier):
            projection.replace(exp.alias_(projection.copy(), projection.expression.copy()))
