"""A small storage adapter over ``pyarrow.fs`` with the one primitive a timeline needs:
atomic create-if-absent.

Paths given to :class:`Storage` methods are relative to the table's base path and use ``/``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow.fs as pafs

from shoal.errors import CommitConflictError

# Directories listed at once on a remote file system, unless hoodie.file.listing.parallelism
# says otherwise: an object store answers each listing in tens of milliseconds, and a write
# touching hundreds of partitions would otherwise wait for them one after another.
LISTING_PARALLELISM = 16


@dataclass(frozen=True)
class FileInfo:
    """A listed file: path relative to the base path, size in bytes, and modification time in
    nanoseconds when the file system reports one."""

    path: str
    size: int
    mtime_ns: int | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class Storage:
    """Reads and writes the files of one table through a ``pyarrow.fs.FileSystem``."""

    def __init__(self, base_uri: str, filesystem: pafs.FileSystem | None = None) -> None:
        if filesystem is None:
            filesystem, base_path = pafs.FileSystem.from_uri(_as_uri(base_uri))
        else:
            base_path = base_uri
        self.fs: pafs.FileSystem = filesystem
        self.base_path = base_path.rstrip("/") or "/"
        self.base_uri = base_uri
        self.is_local = isinstance(filesystem, pafs.LocalFileSystem)
        self.listing_parallelism = LISTING_PARALLELISM

    def full_path(self, rel: str) -> str:
        return f"{self.base_path}/{rel}" if rel else self.base_path

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full_path(rel)).type != pafs.FileType.NotFound

    def is_dir(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full_path(rel)).type == pafs.FileType.Directory

    def is_file(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full_path(rel)).type == pafs.FileType.File

    def size(self, rel: str) -> int:
        info = self.fs.get_file_info(self.full_path(rel))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(self.full_path(rel))
        return int(info.size or 0)

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.full_path(rel)) as f:
            return bytes(f.read())

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Overwrites ``rel``; for local storage through a rename so readers never see half a file."""
        self.makedirs(_parent(rel))
        if self.is_local:
            full = self.full_path(rel)
            os.replace(_write_temp(full, data), full)
            return
        with self.fs.open_output_stream(self.full_path(rel)) as f:
            f.write(data)

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Creates ``rel`` with ``data`` only if it does not exist; the commit point of an instant.

        Locally the content is written to a temp file first and published with ``link``, which is
        atomic and fails if the target exists: readers see either nothing or the whole file.
        """
        self.makedirs(_parent(rel))
        if self.is_local:
            full = self.full_path(rel)
            tmp = _write_temp(full, data)
            try:
                os.link(tmp, full)
            except FileExistsError:
                raise CommitConflictError(f"{rel} already exists") from None
            finally:
                os.unlink(tmp)
            return
        # Object stores offer no portable conditional put through pyarrow; check-then-write is the
        # best available and is documented as single-writer only.
        if self.exists(rel):
            raise CommitConflictError(f"{rel} already exists")
        with self.fs.open_output_stream(self.full_path(rel)) as f:
            f.write(data)

    def delete(self, rel: str, missing_ok: bool = False) -> None:
        try:
            self.fs.delete_file(self.full_path(rel))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.delete_dir(self.full_path(rel))

    def remove_empty_dir(self, rel: str) -> bool:
        """Removes the directory ``rel`` if it is empty; returns whether it is gone. Never
        removes what it holds: a file written meanwhile keeps it."""
        full = self.full_path(rel)
        if self.is_local:
            try:
                os.rmdir(full)
            except FileNotFoundError:
                return True
            except OSError:
                return False
            return True
        # Object stores have no directories, only keys: an empty prefix is gone already, but
        # for a marker object some stores keep.
        if self.fs.get_file_info(pafs.FileSelector(full, allow_not_found=True)):
            return False
        with contextlib.suppress(OSError):
            self.fs.delete_dir(full)
        return True

    def makedirs(self, rel: str) -> None:
        if rel:
            self.fs.create_dir(self.full_path(rel), recursive=True)
        else:
            self.fs.create_dir(self.base_path, recursive=True)

    def list_files(self, rel: str, recursive: bool = False) -> list[FileInfo]:
        """Files (not directories) under ``rel``; empty when ``rel`` does not exist."""
        return [f for f in self._list(rel, recursive) if f is not None]

    def list_files_of(self, rels: Sequence[str]) -> list[FileInfo]:
        """The files directly under each of ``rels``, in that order (none for one that does not
        exist). A remote file system lists up to ``listing_parallelism`` of them at once."""
        if self.is_local or len(rels) < 2 or self.listing_parallelism < 2:
            return [f for rel in rels for f in self.list_files(rel)]
        workers = min(self.listing_parallelism, len(rels))
        with ThreadPoolExecutor(workers, thread_name_prefix="shoal-list") as pool:
            return [f for files in pool.map(self.list_files, rels) for f in files]

    def list_dirs(self, rel: str) -> list[str]:
        """Immediate subdirectory names of ``rel``."""
        sel = pafs.FileSelector(self.full_path(rel), allow_not_found=True, recursive=False)
        return [info.base_name for info in self.fs.get_file_info(sel) if info.type == pafs.FileType.Directory]

    def _list(self, rel: str, recursive: bool) -> Iterator[FileInfo | None]:
        sel = pafs.FileSelector(self.full_path(rel), allow_not_found=True, recursive=recursive)
        prefix = self.base_path.rstrip("/") + "/"
        for info in self.fs.get_file_info(sel):
            # ``is_file`` rather than ``type``, which builds an enum per file: a timeline load
            # lists every instant file, thousands of them when archival is off.
            if not info.is_file:
                continue
            path = info.path
            yield FileInfo(
                path[len(prefix) :] if path.startswith(prefix) else path, int(info.size or 0), info.mtime_ns
            )

    def open_input_file(self, rel: str) -> pafs.NativeFile:
        return self.fs.open_input_file(self.full_path(rel))

    def native_sources(self, rels: Sequence[str]) -> list[str | bytes]:
        """The files at ``rels`` as the Rust core takes them: local paths, which it opens
        itself, or the files' bytes, on a file system it cannot open (an object store)."""
        if self.is_local:
            return [self.full_path(rel) for rel in rels]
        return [self.read_bytes(rel) for rel in rels]

    def open_output_stream(self, rel: str, make_parents: bool = True) -> pafs.NativeFile:
        """A new file at ``rel``, written in place: for files whose readers know, by other
        means, when they are whole. ``make_parents``: its directory is created; without it, a
        file system with directories raises FileNotFoundError when it is gone."""
        if make_parents:
            self.makedirs(_parent(rel))
        return self.fs.open_output_stream(self.full_path(rel))


def _write_temp(full: str, data: bytes) -> str:
    """Writes ``data`` to a unique temp file beside ``full`` and returns its path."""
    tmp = f"{full}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    return tmp


def _parent(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def _as_uri(base: str) -> str:
    if "://" in base:
        return base
    if base.startswith("file:"):
        # Hadoop's spelling of a local path (``file:/data/t``), as Spark's catalog gives a
        # table's location: not a relative path named ``file:``.
        return "file://" + base[len("file:") :]
    return os.path.abspath(base)
