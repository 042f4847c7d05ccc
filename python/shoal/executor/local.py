"""The embedded executor: task functions on a thread pool (the Rust core and Arrow release the GIL)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from shoal.executor.base import InProcess

R = TypeVar("R")
T = TypeVar("T")


class LocalExecutor:
    """Runs ``fn(spec, data)`` for each work item on up to ``max_workers`` threads, in order."""

    # Each item runs exactly once, in this process.
    retries_tasks = False

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or max(1, min(8, os.cpu_count() or 1))

    @property
    def parallelism(self) -> int:
        return self.max_workers

    @contextmanager
    def share(self, value: T) -> Iterator[InProcess[T]]:
        yield InProcess(value)

    def map(self, fn: Callable[..., R], items: Sequence[tuple[Any, ...]]) -> list[R]:
        if len(items) <= 1 or self.max_workers == 1:
            return [fn(*item) for item in items]
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            return list(pool.map(lambda item: fn(*item), items))
