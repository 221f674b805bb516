"""Planning: statements -> checked changes to the catalog (:class:`Planner`), deploy files
(:mod:`.deploy`) and the tables SHOW, DESCRIBE and EXPLAIN return (:mod:`.introspection`)."""
from .core import Planner, Step

__all__ = ["Planner", "Step"]
