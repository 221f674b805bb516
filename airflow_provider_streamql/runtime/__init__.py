"""The Spark side: :class:`Runtime` reconciles a pipeline's queries on a SparkSession."""

from .driver import Runtime
from .session import build_session

__all__ = ["Runtime", "build_session"]
