"""``shoal stats``: how much each commit rewrote, and how the table's files are sized.

What an operator tunes file sizing and the index by, as Hudi's CLI shows them (``stats wa``,
``stats filesizes``):

* per completed commit on the active timeline, the records it wrote against the records it
  updated. Write amplification is their ratio: copy-on-write rewrites whole files for a few
  updated records, merge-on-read appends only the updates;
* per partition, the sizes of the latest base files (small files are what
  ``hoodie.parquet.small.file.limit`` fills) and how many log files and bytes wait for
  compaction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.fs.view import FileSlice
from shoal.timeline.timeline import Timeline


@dataclass(frozen=True)
class CommitWrites:
    """What one commit wrote, from its write stats."""

    instant: str
    action: str
    operation: str
    written: int
    updated: int
    inserted: int
    deleted: int
    bytes: int

    @property
    def amplification(self) -> float | None:
        """Records written per record updated; None for a commit that updated none."""
        return self.written / self.updated if self.updated else None


def commit_writes(timeline: Timeline) -> list[CommitWrites]:
    """Every completed data instant of ``timeline``, oldest first."""
    out = []
    for inst in timeline.completed_data_instants():
        metadata = timeline.commit_metadata(inst)
        stats = metadata.write_stats()
        out.append(
            CommitWrites(
                inst.requested_time,
                inst.action.value,
                metadata.operation_type or "-",
                sum(s.numWrites for s in stats),
                sum(s.numUpdateWrites for s in stats),
                sum(s.numInserts for s in stats),
                sum(s.numDeletes for s in stats),
                sum(s.totalWriteBytes for s in stats),
            )
        )
    return out


@dataclass(frozen=True)
class PartitionFiles:
    """The latest file slices of one partition (or of the whole table: ``partition`` None)."""

    partition: str | None
    base_sizes: tuple[int, ...]
    log_files: int
    log_bytes: int

    def percentile(self, q: float) -> int:
        return int(np.percentile(self.base_sizes, q)) if self.base_sizes else 0


def partition_files(slices: list[FileSlice]) -> list[PartitionFiles]:
    """Per partition (sorted), then for the whole table: base file sizes and log files."""
    by_partition: dict[str, list[FileSlice]] = {}
    for sl in slices:
        by_partition.setdefault(sl.partition_path, []).append(sl)
    groups: list[tuple[str | None, list[FileSlice]]] = [(p, by_partition[p]) for p in sorted(by_partition)]
    groups.append((None, slices))
    return [
        PartitionFiles(
            partition,
            tuple(sorted(sl.base_file.size for sl in group if sl.base_file is not None)),
            sum(len(sl.log_files) for sl in group),
            sum(lf.size for sl in group for lf in sl.log_files),
        )
        for partition, group in groups
    ]
