"""The Spark executor: the planner's task specs run as Spark tasks (DESIGN §3).

``SparkExecutor.map(fn, items)`` runs one Spark task per work item, so everything planned as a
list of task specs (snapshot and incremental reads: one task per file slice; compaction: one
task per operation; the write tasks of ``Table(path, executor=SparkExecutor(spark))``) runs on
the cluster unchanged. DataFrame writes (``shoal.spark.write``) run the same task functions
inside ``mapInArrow``.

A Spark task can run more than once: after a failure (``spark.task.maxFailures``) or as a
speculative copy. Task specs that write files carry ``stage_id`` and ``attempt``; each attempt
fills them in from its ``TaskContext`` (:func:`name_attempt`), so every attempt writes files of
its own, and the commit keeps only the files of the results Spark returned.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from pyspark import Broadcast, SparkContext, TaskContext
from pyspark.sql import SparkSession

from shoal import errors
from shoal.errors import CommitConflictError

R = TypeVar("R")
T = TypeVar("T")

# How long the driver waits, after a job returned, for its leftover task attempts (speculative
# copies being killed) to end before it commits.
SETTLE_TIMEOUT_SECONDS = 60.0

_TASK_ERROR = re.compile(r"^shoal\.errors\.(\w+): (.*)$", re.MULTILINE)


class SparkExecutor:
    """Runs task functions as Spark tasks, one task per work item, results in order.

    Items and results travel pickled: task specs are plain data by design (DESIGN §3), and
    Arrow tables pickle as their buffers. Errors a task raises as :class:`shoal.errors.ShoalError`
    come back to the caller as the same error type.
    """

    retries_tasks = True

    def __init__(self, spark: SparkSession, settle_timeout: float = SETTLE_TIMEOUT_SECONDS) -> None:
        self.spark = spark
        self.settle_timeout = settle_timeout

    @property
    def parallelism(self) -> int:
        return int(self.spark.sparkContext.defaultParallelism)

    @contextmanager
    def share(self, value: T) -> Iterator[Broadcast[T]]:
        """``value`` as a Spark broadcast: each executor fetches it once, whatever the number of
        tasks reading it. Destroyed after the block (``map`` returns once its tasks ended)."""
        broadcast = self.spark.sparkContext.broadcast(value)
        try:
            yield broadcast
        finally:
            broadcast.destroy()

    def map(self, fn: Callable[..., R], items: Sequence[tuple[Any, ...]]) -> list[R]:
        if not items:
            return []
        sc = self.spark.sparkContext
        name = getattr(fn, "__name__", "task")
        rdd = sc.parallelize(list(enumerate(items)), len(items))
        with spark_job(sc, f"shoal {name} x{len(items)}", self.settle_timeout):
            results = rdd.mapPartitions(functools.partial(_run_items, fn)).collect()
        by_index = dict(results)
        return [by_index[i] for i in range(len(items))]


def _run_items(fn: Callable[..., R], items: Iterator[tuple[int, tuple[Any, ...]]]) -> Iterator[tuple[int, R]]:
    for index, item in items:
        spec, *rest = item
        yield index, fn(name_attempt(spec), *rest)


def name_attempt(spec: T) -> T:
    """``spec`` with the running task attempt's stage id and attempt id, when it is a task spec
    that names its attempt in the files it writes (fields ``stage_id`` and ``attempt``).

    The attempt id is Spark's ``taskAttemptId``, unique within the application, as in Hudi's
    write tokens ``<partition>-<stage>-<attempt>``: retries and speculative copies of a task never
    write the same file."""
    context = TaskContext.get()
    if context is None or not dataclasses.is_dataclass(spec) or isinstance(spec, type):
        return spec
    names = {f.name for f in dataclasses.fields(spec)}
    if not {"stage_id", "attempt"} <= names:
        return spec
    return dataclasses.replace(spec, stage_id=context.stageId(), attempt=context.taskAttemptId())


@contextmanager
def spark_job(
    sc: SparkContext, description: str, settle_timeout: float = SETTLE_TIMEOUT_SECONDS
) -> Iterator[None]:
    """Runs the Spark jobs of the block in a job group of their own. Errors a task raised as a
    ShoalError are raised again as that type. On exit, waits until no attempt of the group's
    stages is still running (a speculative copy is killed only after its job returned), so no
    late attempt writes a file after the files to commit were decided."""
    group = f"shoal-{uuid.uuid4().hex}"
    previous = sc.getLocalProperty("spark.jobGroup.id")
    previous_description = sc.getLocalProperty("spark.job.description")
    sc.setJobGroup(group, description)
    try:
        yield
    except Exception as exc:
        _settle(sc, group, settle_timeout, fail=False)
        typed = task_error(exc)
        if typed is None:
            raise
        raise typed from exc
    else:
        _settle(sc, group, settle_timeout, fail=True)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", previous)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", previous_description)  # type: ignore[arg-type]


def task_error(exc: BaseException) -> errors.ShoalError | None:
    """The ShoalError a Spark task raised, rebuilt from the failure ``exc`` reports; None when
    the failure was something else."""
    matches = _TASK_ERROR.findall(str(exc))
    if not matches:
        return None
    name, message = matches[-1]
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.ShoalError)):
        return None
    return cls(message)


def _settle(sc: SparkContext, group: str, timeout: float, fail: bool) -> None:
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        running = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                running += stage.numActiveTasks if stage is not None else 0
        if running == 0:
            return
        if time.monotonic() > deadline:
            if not fail:
                return
            raise CommitConflictError(
                f"{running} task attempt(s) of a finished Spark job still running after {timeout:.0f} s; "
                "not committing: the next write rolls this one back"
            )
        time.sleep(0.05)
