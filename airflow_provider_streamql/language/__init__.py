"""The StreamQL language: text -> typed statements (:func:`parse`), checked against a catalog
model (:mod:`.analyzer`)."""

from .parser import parse, parse_one
from .statements import *  # noqa: F401,F403

__all__ = ["parse", "parse_one"]
