"""Running a test in another local time zone (``TZ``), as a machine elsewhere runs."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator


@contextlib.contextmanager
def local_zone(zone: str) -> Iterator[None]:
    """The process's local time zone is ``zone`` inside the block, and what it was after."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
