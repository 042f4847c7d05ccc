"""A writer that dies (``os._exit``) at a chosen step; run as a subprocess by test_crash_injection.

Usage: python crash_worker.py <table path> <operation> <crash point> [<batch.parquet>]

Operations: upsert, delete, insert_overwrite (the batch holds the rows or keys), compaction
(runs the pending compaction). Crash points:
  after_requested   the .requested file is published
  after_inflight    the .inflight file is published
  after_first_file  the first write task finished (tasks run one at a time)
  mid_file          the first data file is half written (a base file cut short, or a log append torn)
  before_complete   every file is written, the completed file is not
  during_complete   the completed file's content is written to its temp file, not yet published
  after_complete    the completed file is published, the markers are not yet deleted
"""

from __future__ import annotations

import os
import sys

import pyarrow.parquet as pq

import shoal
import shoal.fs.storage as storage_mod
import shoal.services.compaction as compaction_mod
import shoal.tasks.compact as compact_task_mod
import shoal.tasks.cow_write as cow_mod
import shoal.tasks.mor_append as mor_mod
import shoal.write.base_file as base_file_mod
import shoal.write.writer as writer_mod
from shoal.executor.local import LocalExecutor
from shoal.timeline.timeline import Timeline

CRASH_CODE = 17
_COMPLETED_SUFFIXES = (".commit", ".deltacommit", ".replacecommit")


def die() -> None:
    sys.stdout.flush()
    os._exit(CRASH_CODE)


def after(obj, name: str) -> None:
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        die()
        return result

    setattr(obj, name, wrapper)


def install(point: str) -> None:
    if point == "after_requested":
        after(Timeline, "create_requested")
    elif point == "after_inflight":
        after(Timeline, "transition_to_inflight")
    elif point == "after_first_file":
        for module, name in (
            (writer_mod, "run_cow_write"),
            (writer_mod, "run_log_append"),
            (compaction_mod, "run_compaction_task"),
        ):
            after(module, name)
    elif point == "mid_file":
        _install_torn_writes()
    elif point == "before_complete":

        def complete(self, instant, content):
            die()

        Timeline.complete = complete
    elif point == "during_complete":
        original = storage_mod._write_temp

        def write_temp(full: str, data: bytes) -> str:
            tmp = original(full, data)
            if full.endswith(_COMPLETED_SUFFIXES):
                die()
            return tmp

        storage_mod._write_temp = write_temp
    elif point == "after_complete":
        after(Timeline, "complete")
    else:
        raise SystemExit(f"unknown crash point {point}")


def _install_torn_writes() -> None:
    """The first base file is left half written; a log append is cut in the middle of its blocks."""

    def torn_base_file(storage, path, *args, **kwargs):
        size = base_file_mod.write_base_file(storage, path, *args, **kwargs)
        full = storage.full_path(path)
        with open(full, "r+b") as f:
            f.truncate(size // 2)
        die()
        return size

    def torn_spliced_file(storage, path, *args, **kwargs):
        size = base_file_mod.write_spliced_base_file(storage, path, *args, **kwargs)
        if size is None:
            return None
        with open(storage.full_path(path), "r+b") as f:
            f.truncate(size // 2)
        die()
        return size

    cow_mod.write_base_file = torn_base_file
    cow_mod.write_spliced_base_file = torn_spliced_file
    compact_task_mod.write_base_file = torn_base_file
    compact_task_mod.write_spliced_base_file = torn_spliced_file

    offsets: dict[str, int] = {}
    original_marker = mor_mod.create_marker

    def marker(storage, instant, path, io_type, append_offset=None):
        offsets[path] = append_offset or 0
        return original_marker(storage, instant, path, io_type, append_offset=append_offset)

    mor_mod.create_marker = marker
    original_size = storage_mod.Storage.size

    def size(self, rel):
        n = original_size(self, rel)
        if rel in offsets:
            start = offsets[rel]
            with open(self.full_path(rel), "r+b") as f:
                f.truncate(start + (n - start) // 2)
            die()
        return n

    storage_mod.Storage.size = size


def main() -> None:
    path, operation, point = sys.argv[1:4]
    install(point)
    table = shoal.Table(path, executor=LocalExecutor(max_workers=1))
    if operation == "compaction":
        (instant,) = table.pending_compactions()
        table.run_compaction(instant)
    else:
        batch = pq.read_table(sys.argv[4])
        getattr(table, operation)(batch)
    print("finished without crashing")


if __name__ == "__main__":
    main()
