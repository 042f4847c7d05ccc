"""The LSM timeline: the archived timeline of table version 8 (HUDI_FORMAT §2.7).

Hudi 1.x archives completed instants into ``.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>``
(``.hoodie/timeline/history`` by default). The format is defined by these Java classes of
apache/hudi (1.x):

* ``org.apache.hudi.common.table.timeline.LSMTimeline``: the layout, the ``_version_`` file, the
  ``manifest_<N>`` names and the data file pattern ``^(\\d+)_(\\d+)_(\\d)\\.parquet``, and the reader
  workflow (latest version, then its manifest, then the files it lists);
* ``org.apache.hudi.client.timeline.versioning.v2.LSMTimelineWriter``: data files
  ``<min instant>_<max instant>_<layer>.parquet`` written by Hudi's Avro parquet writer with the
  ``HoodieLSMTimelineInstant`` schema; each new file or compaction writes ``manifest_<N+1>`` (the
  previous file list, minus the compacted files, plus the new one) and then rewrites ``_version_``
  with ``N+1``; cleaning keeps the files of the last few manifests only;
* ``org.apache.hudi.common.model.HoodieLSMTimelineManifest``: the manifest, Jackson JSON
  ``{"files": [{"fileName": ..., "fileLen": ...}]}`` (unknown keys ignored, empty content = no files);
* ``hudi-common/src/main/avro/HoodieLSMTimelineInstant.avsc``: one row per archived instant with
  ``instantTime``, ``completionTime``, ``action`` (nullable strings), ``metadata``, ``plan``
  (nullable bytes) and ``version`` (int, default 1);
* ``MetadataConversionUtils.createLSMTimelineInstant``: ``action`` is the completed action (a
  compaction is a ``commit``, a log compaction a ``deltacommit``, a clustering a ``replacecommit``),
  ``metadata`` the bytes of the completed instant file (null when that file was empty) and ``plan``
  the bytes of the requested plan of a compaction, log compaction, clean, clustering or replace;
* ``ArchivedTimelineV2`` / ``ArchivedTimelineLoaderV2``: readers take only the files the manifest
  of the latest snapshot lists and the first record of each instant time.

Files the latest manifest does not list (left by a crashed writer, or compacted and not cleaned yet)
are ignored, as Java's reader ignores them. Only completed instants are ever archived.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from shoal.config.table_config import TableConfig
from shoal.errors import CorruptTableError
from shoal.fs.storage import Storage

log = logging.getLogger(__name__)

HISTORY_PATH = "hoodie.timeline.history.path"
HISTORY_PATH_DEFAULT = "history"
VERSION_FILE_NAME = "_version_"
MANIFEST_FILE_PREFIX = "manifest_"
# The record version LSMTimelineWriter stamps on every row (LSM_TIMELINE_INSTANT_VERSION_1).
INSTANT_VERSION_1 = 1
_MANIFEST_NAME = re.compile(r"^manifest_(\d+)$")
_DATA_FILE_NAME = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
_STRING_FIELDS = ("instantTime", "completionTime", "action")
_BYTES_FIELDS = ("metadata", "plan")


def history_dir(config: TableConfig) -> str:
    """The LSM timeline directory relative to the base path (``.hoodie/timeline/history``)."""
    return f"{config.timeline_dir}/{config.props.get(HISTORY_PATH) or HISTORY_PATH_DEFAULT}"


def data_file_name(min_instant: str, max_instant: str, layer: int) -> str:
    """``<min>_<max>_<layer>.parquet``, the name of an LSM timeline data file."""
    return f"{min_instant}_{max_instant}_{layer}.parquet"


def manifest_file_name(version: int) -> str:
    return f"{MANIFEST_FILE_PREFIX}{version}"


@dataclass(frozen=True)
class LSMFile:
    """A data file listed by a manifest: its instant range (from the name), layer and length."""

    name: str
    min_instant: str
    max_instant: str
    layer: int
    length: int


@dataclass(frozen=True)
class LSMTimelineInstant:
    """One ``HoodieLSMTimelineInstant`` row: an archived completed instant."""

    instant_time: str
    completion_time: str
    action: str
    metadata: bytes | None
    plan: bytes | None
    version: int = INSTANT_VERSION_1

    def to_record(self) -> dict[str, Any]:
        """The row as a dict keyed by the Avro field names."""
        return {
            "instantTime": self.instant_time,
            "completionTime": self.completion_time,
            "action": self.action,
            "metadata": self.metadata,
            "plan": self.plan,
            "version": self.version,
        }


# ---- snapshots --------------------------------------------------------------------------------


def snapshot_versions(storage: Storage, directory: str) -> list[int]:
    """The versions of every ``manifest_<N>`` present, ascending."""
    out = []
    for f in storage.list_files(directory):
        m = _MANIFEST_NAME.match(f.name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def latest_snapshot_version(storage: Storage, directory: str) -> int:
    """The version ``_version_`` names, or the highest manifest version when that file is missing
    or unreadable (a writer that crashed between the manifest and the version file, as
    ``LSMTimeline.latestSnapshotVersion`` falls back); -1 when there is no snapshot."""
    path = f"{directory}/{VERSION_FILE_NAME}"
    if storage.exists(path):
        try:
            return int(storage.read_bytes(path).decode("utf-8").strip())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            log.warning("unreadable %s (%s); using the highest manifest version", path, e)
    versions = snapshot_versions(storage, directory)
    return versions[-1] if versions else -1


def parse_manifest(content: bytes, what: str) -> list[LSMFile]:
    """The data files a manifest lists, in manifest order."""
    if not content.strip():
        # HoodieLSMTimelineManifest.fromJsonString: empty content is an empty manifest.
        return []
    try:
        doc = json.loads(content)
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptTableError(f"{what}: cannot parse the manifest: {e}") from e
    if not isinstance(doc, dict):
        raise CorruptTableError(f"{what}: the manifest is not a JSON object")
    entries = doc.get("files") or []
    if not isinstance(entries, list):
        raise CorruptTableError(f"{what}: 'files' is not a list")
    files = []
    for entry in entries:
        name = entry.get("fileName") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise CorruptTableError(f"{what}: a file entry without a fileName: {entry!r}")
        m = _DATA_FILE_NAME.match(name)
        if m is None:
            raise CorruptTableError(f"{what}: unexpected LSM timeline file name {name!r}")
        length = entry.get("fileLen", 0)
        if not isinstance(length, int) or isinstance(length, bool):
            raise CorruptTableError(f"{what}: bad fileLen of {name}: {length!r}")
        files.append(LSMFile(name, m.group(1), m.group(2), int(m.group(3)), length))
    return files


def snapshot_files(storage: Storage, directory: str, version: int) -> list[LSMFile]:
    """The data files of snapshot ``version`` (none for version -1: an empty timeline)."""
    if version < 0:
        return []
    path = f"{directory}/{manifest_file_name(version)}"
    content = _read_listed(storage, path, "the latest LSM timeline manifest is missing")
    return parse_manifest(content, path)


# ---- data files -------------------------------------------------------------------------------


def decode_data_file(data: bytes, what: str) -> list[LSMTimelineInstant]:
    """The rows of one LSM timeline parquet file, in file order.

    Columns are matched by name as Avro schema resolution does: a missing nullable field reads as
    null and a missing ``version`` as 1; a row without an instant time, completion time or action
    cannot be an archived instant.
    """
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptTableError(f"{what}: not a readable parquet file: {e}") from e
    columns: dict[str, list[Any]] = {}
    for name in (*_STRING_FIELDS, *_BYTES_FIELDS, "version"):
        if name not in table.column_names:
            continue
        col = table.column(name)
        if name in _STRING_FIELDS:
            ok = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
        elif name in _BYTES_FIELDS:
            ok = pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)
        else:
            ok = pa.types.is_integer(col.type)
        if not ok:
            raise CorruptTableError(f"{what}: column {name} has type {col.type}")
        columns[name] = col.to_pylist()
    missing = [n for n in _STRING_FIELDS if n not in columns]
    if missing:
        raise CorruptTableError(f"{what}: no column {', '.join(missing)}")
    out = []
    for i in range(table.num_rows):
        time, completion, action = (columns[n][i] for n in _STRING_FIELDS)
        if not time or not completion or not action:
            raise CorruptTableError(f"{what}: row {i} lacks an instant time, completion time or action")
        version = columns["version"][i] if "version" in columns else None
        out.append(
            LSMTimelineInstant(
                instant_time=time,
                completion_time=completion,
                action=action,
                metadata=columns["metadata"][i] if "metadata" in columns else None,
                plan=columns["plan"][i] if "plan" in columns else None,
                version=INSTANT_VERSION_1 if version is None else int(version),
            )
        )
    return out


def read_data_file(storage: Storage, path: str) -> list[LSMTimelineInstant]:
    data = _read_listed(storage, path, "listed by the LSM timeline manifest but missing")
    return decode_data_file(data, path)


def _read_listed(storage: Storage, path: str, missing: str) -> bytes:
    """The bytes of a file the timeline names; CorruptTableError when it is gone or unreadable."""
    try:
        return storage.read_bytes(path)
    except FileNotFoundError:
        raise CorruptTableError(f"{path}: {missing}") from None
    except OSError as e:
        raise CorruptTableError(f"{path}: cannot read: {e}") from e


def load_lsm_timeline(storage: Storage, config: TableConfig) -> list[LSMTimelineInstant]:
    """Every archived instant of the latest LSM timeline snapshot, one per (time, action), in
    instant time order; empty when the history directory is empty or missing."""
    directory = history_dir(config)
    files = snapshot_files(storage, directory, latest_snapshot_version(storage, directory))
    paths = [f"{directory}/{f.name}" for f in sorted(files, key=lambda f: f.name)]
    return dedupe(row for path in paths for row in read_data_file(storage, path))


def dedupe(rows: Iterable[LSMTimelineInstant]) -> list[LSMTimelineInstant]:
    """The first row of each (instant time, action), sorted by instant time.

    Java keeps the first record it meets per instant time; keying by the action as well keeps a
    savepoint apart from the commit it pins, which shares its time."""
    unique: dict[tuple[str, str], LSMTimelineInstant] = {}
    for row in rows:
        unique.setdefault((row.instant_time, row.action), row)
    return sorted(unique.values(), key=lambda r: (r.instant_time, r.action))
