"""Process-wide table locks.

Writers in different processes coordinate through the file lock and heartbeats of optimistic
concurrency (shoal.write.concurrency); within one process, a writer and table services may run on
several threads. Two critical sections must not interleave within a process:

* ``WRITE``: a write (timeline load, planning, commit) and the scheduling of a compaction. A
  compaction plan is built from a file listing; a write that plans without seeing it could
  append to a log file the plan compacts, and the compacted base file would hide those records.
* ``COMPACTION``: executing a compaction plan. A second runner would take the first one's
  inflight instant for a failed attempt and roll its files back.

The locks are re-entrant (inline compaction schedules under the write lock its writer holds)
and keyed by the table's base path. Processes do not see each other's locks: run writes and
compaction scheduling in one process, compaction execution anywhere (Hudi's async model).
"""

from __future__ import annotations

import threading

from shoal.fs.storage import Storage

WRITE = "write"
COMPACTION = "compaction"

_registry_lock = threading.Lock()
_locks: dict[tuple[str, str], threading.RLock] = {}


def table_lock(storage: Storage, purpose: str) -> threading.RLock:
    """The lock guarding ``purpose`` (``WRITE`` or ``COMPACTION``) on the table at ``storage``."""
    key = (storage.full_path(""), purpose)
    with _registry_lock:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock
