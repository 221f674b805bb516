"""Planning: statements -> checked changes to the catalog (:class:`Planner`) and deploy files
(:mod:`.deploy`). The tables SHOW, DESCRIBE and EXPLAIN return are the read model's
(:mod:`..views.describe`).

The planner's modules: :mod:`.planner` (the :class:`Planner` and its handler table),
:mod:`.planning` (the state a script is planned in, with the lookups and checks the families
share), :mod:`.step` (what planning a statement returns, and its file effects), one module
per statement family (:mod:`.sources`, :mod:`.queries`, :mod:`.shadows`, :mod:`.control`,
:mod:`.reads`, :mod:`.snapshots`) and :mod:`.feasibility` (what Structured Streaming can
run, as a table of rules)."""

from .planner import Planner
from .planning import Planning
from .step import Step

__all__ = ["Planner", "Planning", "Step"]
