"""Write markers under ``.hoodie/.temp/<instant>/`` (DIRECT style, HUDI_FORMAT §2.6): one empty
file per data file an instant creates, merges or appends to, so failed writes can be rolled back."""

from __future__ import annotations

from shoal.fs.storage import Storage

MARKER_DIR = ".hoodie/.temp"


def marker_dir(instant: str) -> str:
    return f"{MARKER_DIR}/{instant}"


def create_marker(storage: Storage, instant: str, data_file_path: str, io_type: str) -> None:
    """Records that ``instant`` is about to write ``data_file_path`` (CREATE, MERGE or APPEND)."""
    storage.write_bytes(f"{marker_dir(instant)}/{data_file_path}.marker.{io_type}", b"")


def list_marked_files(storage: Storage, instant: str) -> list[tuple[str, str]]:
    """``(data file path, io type)`` of every marker of ``instant``."""
    prefix = marker_dir(instant) + "/"
    out = []
    for f in storage.list_files(marker_dir(instant), recursive=True):
        rel = f.path[len(prefix) :] if f.path.startswith(prefix) else f.path
        if ".marker." not in rel:
            continue
        data_path, _, io_type = rel.rpartition(".marker.")
        out.append((data_path, io_type))
    return out


def delete_markers(storage: Storage, instant: str) -> None:
    storage.delete_dir(marker_dir(instant))
