"""The StreamQL language: text -> typed statements (:func:`parse`), checked against a catalog
model (:mod:`.analyzer`); names from outside SQL text checked against its grammar
(:func:`check_object_name`)."""

from .names import check_object_name
from .parser import parse, parse_one
from .rates import RateLimit, RateLimits
from .statements import *  # noqa: F401,F403

__all__ = ["parse", "parse_one", "check_object_name", "RateLimit", "RateLimits"]
