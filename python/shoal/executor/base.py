"""What the planner needs from an executor (DESIGN §3: one planner, two executors)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

R = TypeVar("R")


class Executor(Protocol):
    """Runs task functions over plain-data work items and returns their results in order.

    ``retries_tasks`` is True when one item may run more than once, possibly at the same time
    (Spark's task retries and speculative attempts). Task specs then name the attempt in their
    files (the write token) and never append in place, and the commit keeps only the files of
    the results it got back (``fs.markers.reconcile_against_markers``).
    """

    retries_tasks: bool

    def map(self, fn: Callable[..., R], items: Sequence[tuple[Any, ...]]) -> list[R]:
        """``[fn(*item) for item in items]``, run by the executor's workers."""
        ...
