"""Scratch directories of Spark writes in the table's temp directory (``.hoodie/.temp``): files
the tasks of one write hand to the driver or to later tasks, deleted when the write ends.

They live in the table's storage because every executor of a cluster reaches it (the reason a
table can be written from a cluster at all), and a file there outlives the executor that wrote
it. A directory is named after the time it was made, so a later write deletes those that a
crashed driver left behind.
"""

from __future__ import annotations

import time
import uuid

from shoal.fs.markers import MARKER_DIR
from shoal.fs.storage import Storage

# A scratch directory older than this is left from a crashed write.
STALE_SCRATCH_SECONDS = 24 * 3600


def scratch_dir(storage: Storage, prefix: str) -> str:
    """A new scratch directory ``.hoodie/.temp/<prefix><unix time>-<uuid>``; deletes those of
    ``prefix`` made more than STALE_SCRATCH_SECONDS ago."""
    now = time.time()
    for name in storage.list_dirs(MARKER_DIR):
        if name.startswith(prefix):
            made = name[len(prefix) :].split("-", 1)[0]
            if made.isdigit() and now - int(made) > STALE_SCRATCH_SECONDS:
                storage.delete_dir(f"{MARKER_DIR}/{name}")
    return f"{MARKER_DIR}/{prefix}{int(now)}-{uuid.uuid4().hex}"
