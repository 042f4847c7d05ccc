"""The table's lock across processes: a lock file, as Hudi's ``FileSystemBasedLockProvider``.

Holding the lock means having created ``<lock dir>/lock`` exclusively (``.hoodie/lock`` by
default, the file Hudi's provider uses, so a Hudi writer with that provider and shoal exclude each
other). Optimistic concurrency takes it around the step from checking for conflicts to
publishing the completed instant, and around rolling back a failed write, so that one writer
never completes an instant another is rolling back. A writer that dies holding it leaves the
file behind: it is broken after ``hoodie.write.lock.filesystem.expire`` minutes (0, the default,
never), or deleted by hand.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import pyarrow.fs as pafs

from shoal.errors import CommitConflictError
from shoal.fs.storage import Storage

LOCK_FILE_NAME = "lock"


class FileLock:
    """The lock file ``lock`` in ``directory`` (relative to the table, or absolute)."""

    def __init__(
        self, storage: Storage, directory: str | None, expire_minutes: int, wait_ms: int, retry_ms: int
    ) -> None:
        if directory and (directory.startswith("/") or "://" in directory):
            self.storage = Storage(directory)
            self.path = LOCK_FILE_NAME
        else:
            self.storage = storage
            self.path = f"{(directory or '.hoodie').rstrip('/')}/{LOCK_FILE_NAME}"
        self.expire_minutes = expire_minutes
        self.wait_s = wait_ms / 1000.0
        self.retry_s = retry_ms / 1000.0
        self._content: bytes | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        """Holds the lock for the block; CommitConflictError when it stays taken for the wait time."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while True:
            if self._try_acquire():
                return
            if time.monotonic() >= deadline:
                raise CommitConflictError(
                    f"the table's lock {self.storage.full_path(self.path)} stayed taken for "
                    f"{self.wait_s:g} s (held by {self._owner()}); if that writer died, delete the file "
                    "or set hoodie.write.lock.filesystem.expire"
                )
            time.sleep(min(self.retry_s, max(deadline - time.monotonic(), 0.0)))

    def release(self) -> None:
        """Deletes the lock file if it is still this holder's: one broken as expired and taken
        by another writer since is theirs."""
        try:
            current = self.storage.read_bytes(self.path)
        except FileNotFoundError:
            return
        if current == self._content:
            self.storage.delete(self.path, missing_ok=True)

    def _try_acquire(self) -> bool:
        if self._expired():
            self.storage.delete(self.path, missing_ok=True)
        owner = {
            # Informational, on the machine's local time as Hudi's provider writes it
            # (SimpleDateFormat in the JVM's zone); expiry goes by the file's modification time.
            "lockCreateTime": datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            "lockThreadName": threading.current_thread().name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "holder": uuid.uuid4().hex,
        }
        content = json.dumps(owner).encode()
        try:
            self.storage.create_exclusive(self.path, content)
        except CommitConflictError:
            return False
        self._content = content
        return True

    def _expired(self) -> bool:
        if self.expire_minutes == 0:
            return False
        info = self.storage.fs.get_file_info(self.storage.full_path(self.path))
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return False
        return time.time() - info.mtime.timestamp() > self.expire_minutes * 60

    def holder(self) -> str | None:
        """What the lock file says about its holder; None when the lock is free."""
        try:
            return self.storage.read_bytes(self.path).decode(errors="replace")
        except FileNotFoundError:
            return None

    def _owner(self) -> str:
        return self.holder() or "a writer that has since released it"
