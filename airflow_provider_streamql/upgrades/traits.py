"""ksqlDB's query traits (KLIP-28), read off a query's recorded shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# trait -> test on a shape. A query can have several.
TRAITS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "simple": lambda s: not s["aggregates"] and not s["group_by"] and not s["joins"],
    "stateful": lambda s: bool(s["aggregates"] or s["group_by"] or s["within"]),
    "windowed": lambda s: s["window"] is not None,
    "joined": lambda s: bool(s["joins"]),
    "multistage": lambda s: s["subqueries"] or (bool(s["joins"]) and bool(s["group_by"])),
    "nondeterministic": lambda s: bool(s["nondeterministic"]),
}


def traits_of(shape: dict[str, Any]) -> list[str]:
    return [name for name, test in TRAITS.items() if test(shape)]
