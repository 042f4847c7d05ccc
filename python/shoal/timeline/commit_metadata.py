"""Commit metadata and write stats: JSON in table version 6, Avro in version 8 (HUDI_FORMAT §3)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from shoal import _native
from shoal.errors import CorruptTableError

# HoodieWriteStat.NULL_COMMIT: the prevCommit of a record that had no previous version.
NULL_COMMIT = "null"


AVRO_CONTAINER_MAGIC = b"Obj\x01"


def decode_instant_content(data: bytes) -> Any:
    """What an instant file holds, as Python values: the first record of an Avro container file
    (table version 8; None when it holds none) or the JSON document (version 6). Bad JSON raises
    ValueError, a bad container CorruptDataError."""
    if data[:4] == AVRO_CONTAINER_MAGIC:
        records = json.loads(_native.avro_container_decode(data))
        return records[0] if records else None
    return json.loads(data)


@dataclass
class WriteStat:
    """One file written (or appended to) by an instant; field order is Java's emission order."""

    fileId: str = ""
    path: str | None = None
    cdcStats: dict[str, int] | None = None
    prevCommit: str = NULL_COMMIT
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    totalWriteErrors: int = 0
    tempPath: str | None = None
    partitionPath: str | None = None
    totalLogRecords: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogBlocks: int = 0
    totalCorruptLogBlock: int = 0
    totalRollbackBlocks: int = 0
    fileSizeInBytes: int = 0
    minEventTime: int | None = None
    maxEventTime: int | None = None
    runtimeStats: dict[str, int] | None = None
    # HoodieDeltaWriteStat (log writes) only; None means "not a delta stat".
    logVersion: int | None = None
    logOffset: int | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("logVersion", "logOffset", "baseFile", "logFiles") and value is None:
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WriteStat:
        kwargs = {k: v for k, v in d.items() if k in _WRITE_STAT_FIELDS}
        stat = cls(**kwargs)
        for name in (
            "numWrites",
            "numDeletes",
            "numUpdateWrites",
            "numInserts",
            "totalWriteBytes",
            "fileSizeInBytes",
            "totalLogBlocks",
            "totalLogRecords",
        ):
            if getattr(stat, name) is None:
                setattr(stat, name, 0)
        if stat.prevCommit is None:
            stat.prevCommit = NULL_COMMIT
        return stat


# Looked up once: commits carry a stat per file written, and every write reads many commits.
_WRITE_STAT_FIELDS = frozenset(f.name for f in fields(WriteStat))


@dataclass
class CommitMetadata:
    """``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    compacted: bool = False
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    def add_stat(self, stat: WriteStat) -> None:
        self.partition_to_write_stats.setdefault(stat.partitionPath or "", []).append(stat)

    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    @property
    def schema(self) -> str | None:
        """The Avro schema (without meta fields) the instant wrote, if recorded."""
        return self.extra_metadata.get("schema") or None

    def replaced_file_ids(self) -> dict[str, list[str]]:
        return self.partition_to_replace_file_ids or {}

    def total_records_written(self) -> int:
        return sum(s.numWrites for s in self.write_stats())

    def total_bytes_written(self) -> int:
        return sum(s.totalWriteBytes for s in self.write_stats())

    def to_json(self) -> bytes:
        """Jackson-compatible JSON, keys in Java's order."""
        doc: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_dict() for s in stats] for p, stats in self.partition_to_write_stats.items()
            },
        }
        if self.partition_to_replace_file_ids is not None:
            doc["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        doc["compacted"] = self.compacted
        doc["extraMetadata"] = self.extra_metadata
        doc["operationType"] = self.operation_type
        return json.dumps(doc, indent=2).encode()

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> CommitMetadata:
        stats = {
            p: [WriteStat.from_dict(s) for s in (lst or [])]
            for p, lst in (doc.get("partitionToWriteStats") or {}).items()
        }
        return cls(
            partition_to_write_stats=stats,
            compacted=bool(doc.get("compacted") or False),
            extra_metadata=dict(doc.get("extraMetadata") or {}),
            operation_type=doc.get("operationType") or "UNKNOWN",
            partition_to_replace_file_ids=doc.get("partitionToReplaceFileIds"),
        )

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "commit metadata") -> CommitMetadata:
        """Decodes either form: JSON (v6) or an Avro container file (v8)."""
        if not data.strip():
            return cls()
        if data[:4] == AVRO_CONTAINER_MAGIC:
            value = decode_instant_content(data)
            return cls() if value is None else cls.from_dict(value)
        try:
            return cls.from_dict(decode_instant_content(data))
        except (ValueError, TypeError, AttributeError) as e:
            raise CorruptTableError(f"cannot parse {what}: {e}") from e
