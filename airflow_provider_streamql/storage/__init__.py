"""What streamql keeps on disk: the layout of a home (:mod:`.layout`)."""

from .layout import Layout, MovedAside

__all__ = ["Layout", "MovedAside"]
