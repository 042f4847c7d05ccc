"""Instant-time generation: ``yyyyMMddHHmmssSSS`` in UTC, strictly increasing (HUDI_FORMAT §2.1)."""

from __future__ import annotations

import datetime as _dt
import threading
import time

_lock = threading.Lock()
_last = ""


def format_instant(moment: _dt.datetime) -> str:
    """Formats a datetime as a 17-digit instant time (milliseconds)."""
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def parse_instant(instant: str) -> _dt.datetime:
    """Parses a 14- or 17-digit instant time as UTC; 14-digit values get 999 ms, as Java does."""
    if len(instant) == 14:
        instant += "999"
    base = _dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    return base.replace(microsecond=int(instant[14:17]) * 1000, tzinfo=_dt.timezone.utc)


def new_instant_time(after: str | None = None) -> str:
    """A new instant time greater than ``after`` and than any this process produced before."""
    global _last
    with _lock:
        floor = max(_last, after or "")
        while True:
            candidate = format_instant(_dt.datetime.now(_dt.timezone.utc))
            if candidate > floor:
                _last = candidate
                return candidate
            time.sleep(0.001)
