"""How a Spark write lays its buckets out on write tasks: each bucket's weight, the number of
tasks, which task takes which bucket, and the order a task writes its buckets in.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from shoal.tasks.cow_write import CowWriteSpec
from shoal.tasks.mor_append import LogAppendSpec
from shoal.write.assigner import Assignment, Bucket

# Records a write task should handle at least before buckets get tasks of their own.
MIN_TASK_RECORDS = 200_000


def bucket_weight(bucket: Bucket, spec: CowWriteSpec | LogAppendSpec, avg_record_size: int) -> int:
    """The records a bucket's task handles: those routed to it and, for a rewrite of a file
    group, the stored ones it reads and writes again (estimated from the slice's size)."""
    work = bucket.inserts + bucket.updates
    rewrite = isinstance(spec, CowWriteSpec) and (
        spec.old_base_path is not None or spec.old_slice is not None
    )
    if rewrite and bucket.existing is not None:
        work += bucket.existing.total_size() // max(1, avg_record_size)
    return work


def write_task_count(weights: Sequence[int], parallelism: int) -> int:
    """Spark tasks for buckets of ``weights`` (records): at least two per core (so a slow one
    does not hold the job up alone) and as many as it takes to keep each at about
    MIN_TASK_RECORDS, rounded up to whole waves of ``parallelism`` tasks (the tasks are about
    equal, and a last wave of fewer leaves cores idle), never more than buckets. A bucket
    heavier than that has a task of its own: the Python task's own cost is then small beside
    its work."""
    if not weights:
        return 1
    cores = max(1, parallelism)
    by_work = -(-sum(weights) // MIN_TASK_RECORDS)
    waves = -(-max(2 * cores, by_work) // cores)
    return max(1, min(len(weights), waves * cores))


def pack_buckets(weights: Sequence[int], tasks: int) -> list[int]:
    """The task (``< tasks``) of each bucket, balancing the summed ``weights`` (records) of the
    tasks: heaviest bucket first, each to the least loaded task."""
    loads = [(0, t) for t in range(tasks)]  # a heap of (records, task)
    task_of = [0] * len(weights)
    for b in sorted(range(len(weights)), key=lambda i: -weights[i]):
        load, t = heapq.heappop(loads)
        task_of[b] = t
        heapq.heappush(loads, (load + weights[b] + 1, t))
    return task_of


def stray_targets(
    assignment: Assignment,
    specs: Sequence[CowWriteSpec | LogAppendSpec],
    weights: Sequence[int],
    tasks: int,
) -> list[int | None]:
    """For each merge-on-read log append that may get bloom false positives (a base file's
    footer admitted them), a bucket of its partition that writes a base file with inserts, to
    take those new records when the two run in one task (None: none). Each such bucket takes
    one log's; a pair heavier than both a task's share of the work and MIN_TASK_RECORDS stays
    apart, so pairing never costs the write its parallelism."""
    share = max(sum(weights) / max(1, tasks), MIN_TASK_RECORDS)
    free = {
        partition: [b for b, count in plan if count > 0 and isinstance(specs[b], CowWriteSpec)]
        for partition, plan in assignment.insert_plan.items()
    }
    targets: list[int | None] = [None] * len(specs)
    for b, spec in enumerate(specs):
        if not isinstance(spec, LogAppendSpec) or not spec.base_file_name:
            continue
        candidates = free.get(spec.partition_path, [])
        for i, target in enumerate(candidates):
            if weights[b] + weights[target] <= share:
                targets[b] = candidates.pop(i)
                break
    return targets


def pack_with_targets(
    weights: Sequence[int], targets: Sequence[int | None], tasks: int
) -> tuple[list[int], int]:
    """The task of each bucket (:func:`pack_buckets`), a bucket and its stray target always in
    one; and the number of tasks (no more than the units packed)."""
    unit_of = list(range(len(weights)))
    for b, target in enumerate(targets):
        if target is not None:
            unit_of[target] = b
    units = sorted(set(unit_of))
    index = {u: i for i, u in enumerate(units)}
    unit_weights = [0] * len(units)
    for b, w in enumerate(weights):
        unit_weights[index[unit_of[b]]] += w
    tasks = max(1, min(tasks, len(units)))
    task_of_unit = pack_buckets(unit_weights, tasks)
    return [task_of_unit[index[unit_of[b]]] for b in range(len(weights))], tasks


def write_order(targets: Sequence[int | None]) -> list[int]:
    """The order in which write tasks write their buckets: a log bucket before its stray target
    (the target takes the log's bloom false positives), targets after every other bucket."""
    taken = {t for t in targets if t is not None}
    return [b for b in range(len(targets)) if b not in taken] + sorted(taken)
