"""Write markers under ``.hoodie/.temp/<instant>/`` (DIRECT style, HUDI_FORMAT §2.6): one empty
file per data file an instant creates, merges or appends to, so failed writes can be rolled back."""

from __future__ import annotations

from shoal.fs.storage import Storage

MARKER_DIR = ".hoodie/.temp"


def marker_dir(instant: str) -> str:
    return f"{MARKER_DIR}/{instant}"


def create_marker(
    storage: Storage, instant: str, data_file_path: str, io_type: str, append_offset: int | None = None
) -> None:
    """Records that ``instant`` is about to write ``data_file_path`` (CREATE, MERGE or APPEND).

    An APPEND marker holds the log file's size before the append (Java ignores marker
    contents), so a rollback can cut a torn or uncommitted tail off and restore the file. Like
    Hudi's append handle, it is created only if absent: when one instant appends to the same log
    file more than once (the streaming writer flushing a bucket again), the marker keeps the
    size before the first append, and a rollback restores the file as it was before the instant.
    """
    marker = f"{marker_dir(instant)}/{data_file_path}.marker.{io_type}"
    if io_type == "APPEND" and storage.exists(marker):
        return
    content = b"" if append_offset is None else str(append_offset).encode()
    storage.write_bytes(marker, content)


def append_offset(storage: Storage, instant: str, data_file_path: str) -> int | None:
    """The pre-append size an APPEND marker recorded, or None when it recorded none."""
    try:
        text = storage.read_bytes(f"{marker_dir(instant)}/{data_file_path}.marker.APPEND").strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


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


def reconcile_against_markers(storage: Storage, instant: str, written: list[str]) -> list[str]:
    """Deletes every data file ``instant`` marked but did not report in ``written`` (the paths
    of its successful tasks' write stats), and returns their paths.

    A task that ran more than once (a retry after a failure, a speculative attempt) leaves the
    files of its other attempts behind, under names of their own; they must go before the
    commit, or readers would see two versions of the same file group. Hudi's
    ``reconcileAgainstMarkers``. Files appended to in place are in ``written``, so kept."""
    keep = set(written)
    removed = []
    for path, _io_type in list_marked_files(storage, instant):
        if path not in keep and storage.exists(path):
            storage.delete(path, missing_ok=True)
            removed.append(path)
    return removed
