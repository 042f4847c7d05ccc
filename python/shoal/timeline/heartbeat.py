"""Heartbeats of pending writes: ``.hoodie/.heartbeat/<instant time>``, as Hudi keeps them.

A writer whose failed writes are cleaned lazily (``hoodie.cleaner.policy.failed.writes=LAZY``,
the default under optimistic concurrency) rewrites its instant's heartbeat file every interval
while the write is pending, and deletes it once the write is committed or abandoned. Other
writers take a pending write for failed, and roll it back, only when its heartbeat file is older
than ``interval x tolerable misses`` or missing: the file's modification time is the heartbeat,
so Hudi's writers and shoal's read each other's.
"""

from __future__ import annotations

import logging
import threading
import time

import pyarrow.fs as pafs

from shoal.fs.storage import Storage

HEARTBEAT_DIR = ".hoodie/.heartbeat"

log = logging.getLogger(__name__)


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant_time}"


class Heartbeat:
    """Keeps one pending instant's heartbeat file fresh from a daemon thread."""

    def __init__(self, storage: Storage, instant_time: str, interval_ms: int) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.interval_s = interval_ms / 1000.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        """Writes the first beat (before the instant exists, so no other writer ever sees the
        instant without one) and starts the thread."""
        self._beat()
        self._thread = threading.Thread(
            target=self._run, name=f"shoal-heartbeat-{self.instant_time}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops beating and deletes the file: the write is committed, or given up."""
        self.detach()
        self.storage.delete(heartbeat_path(self.instant_time), missing_ok=True)

    def detach(self) -> None:
        """Stops beating from this process and leaves the file: another process (a
        ``heartbeat_keeper``) beats from now on."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._beat()
            except OSError as exc:
                # A missed beat is tolerated (hoodie.client.heartbeat.tolerable.misses); the
                # next one may get through.
                log.warning("heartbeat of instant %s not written: %s", self.instant_time, exc)

    def _beat(self) -> None:
        self.storage.write_bytes(heartbeat_path(self.instant_time), b"")


def heartbeat_age(storage: Storage, instant_time: str) -> float | None:
    """Seconds since the last beat of ``instant_time``; None when it has no heartbeat file."""
    info = storage.fs.get_file_info(storage.full_path(heartbeat_path(instant_time)))
    if info.type == pafs.FileType.NotFound or info.mtime is None:
        return None
    return time.time() - info.mtime.timestamp()


def heartbeat_expired(storage: Storage, instant_time: str, interval_ms: int, tolerable_misses: int) -> bool:
    """Whether the pending write ``instant_time`` stopped beating: its heartbeat file is missing
    (a writer that keeps none, or one that died before its first beat) or older than
    ``interval_ms x tolerable_misses``."""
    age = heartbeat_age(storage, instant_time)
    return age is None or age * 1000.0 > interval_ms * tolerable_misses
