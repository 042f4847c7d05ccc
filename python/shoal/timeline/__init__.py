"""The Hudi timeline: instants, their states and metadata, and the active timeline."""

from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.timeline import Timeline

__all__ = ["Action", "Instant", "State", "Timeline"]
