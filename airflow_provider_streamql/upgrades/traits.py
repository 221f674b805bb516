"""ksqlDB's query traits (KLIP-28), read off a query's recorded shape."""

from __future__ import annotations

from collections.abc import Callable

from ..language.query_shape import QueryShape

# trait -> test on a shape. A query can have several.
TRAITS: dict[str, Callable[[QueryShape], bool]] = {
    "simple": lambda s: not s.aggregates and not s.group_by and not s.joins,
    "stateful": lambda s: s.stateful,
    "windowed": lambda s: s.window is not None,
    "joined": lambda s: bool(s.joins),
    "multistage": lambda s: s.subqueries or (bool(s.joins) and bool(s.group_by)),
    "nondeterministic": lambda s: bool(s.nondeterministic),
}


def traits_of(shape: QueryShape) -> list[str]:
    return [name for name, test in TRAITS.items() if test(shape)]
