"""The Spark side: :class:`Runtime` reconciles a pipeline's queries on a SparkSession.

``Runtime`` and ``build_session`` are loaded when first asked for, so the parts of the
runtime that need no Spark (its command line, :mod:`.command`) load without pyspark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .driver import Runtime
    from .session import build_session

__all__ = ["Runtime", "build_session"]


def __getattr__(name: str) -> Any:
    if name == "Runtime":
        from .driver import Runtime

        return Runtime
    if name == "build_session":
        from .session import build_session

        return build_session
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
