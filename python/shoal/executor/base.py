"""What the planner needs from an executor (DESIGN §3: one planner, two executors)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

R = TypeVar("R")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Shared(Protocol[T_co]):
    """A value every task of an executor reads (``.value``) without it travelling in each item."""

    @property
    def value(self) -> T_co: ...


class Executor(Protocol):
    """Runs task functions over plain-data work items and returns their results in order.

    ``retries_tasks`` is True when one item may run more than once, possibly at the same time
    (Spark's task retries and speculative attempts). Task specs then name the attempt in their
    files (the write token) and never append in place, and the commit keeps only the files of
    the results it got back (``fs.markers.reconcile_against_markers``).
    """

    retries_tasks: bool

    @property
    def parallelism(self) -> int:
        """How many items the executor runs at once: planners cut work into about this many."""
        ...

    def map(self, fn: Callable[..., R], items: Sequence[tuple[Any, ...]]) -> list[R]:
        """``[fn(*item) for item in items]``, run by the executor's workers."""
        ...

    def share(self, value: T) -> AbstractContextManager[Shared[T]]:
        """``value`` for the tasks of the block's ``map`` calls: sent to each worker once (a
        Spark broadcast), released at the end of the block."""
        ...


class InProcess(Generic[T]):
    """A shared value of an executor whose tasks run in this process: the value itself."""

    def __init__(self, value: T) -> None:
        self._value = value

    @property
    def value(self) -> T:
        return self._value


def balanced_groups(items: Sequence[T], weight: Callable[[T], int], most: int) -> list[list[T]]:
    """``items`` in at most ``most`` groups (none empty) of about equal total ``weight``: the
    heaviest first, each into the lightest group so far; each group keeps its items' order."""
    groups: list[list[tuple[int, T]]] = [[] for _ in range(max(1, min(most, len(items))))]
    loads = [0] * len(groups)
    for position in sorted(range(len(items)), key=lambda i: weight(items[i]), reverse=True):
        lightest = loads.index(min(loads))
        groups[lightest].append((position, items[position]))
        loads[lightest] += weight(items[position])
    return [[item for _, item in sorted(group, key=lambda pair: pair[0])] for group in groups if group]
