"""Planning: statements -> checked changes to the catalog (:class:`Planner`) and deploy files
(:mod:`.deploy`). The tables SHOW, DESCRIBE and EXPLAIN return are the read model's
(:mod:`..views.describe`).

The planner's modules: :mod:`.planner` (the :class:`Planner` and its handler table),
:mod:`.base` (state, errors, lookups, the source builder, :class:`Step`), one module per
statement family (:mod:`.sources`, :mod:`.queries`, :mod:`.control`, :mod:`.reads`) and
:mod:`.feasibility` (what Structured Streaming can run, as a table of rules)."""

from .base import Step
from .planner import Planner

__all__ = ["Planner", "Step"]
