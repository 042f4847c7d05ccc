"""Hudi file names: base files, log files, write tokens and file ids (HUDI_FORMAT §4)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

BASE_FILE_EXTENSION = ".parquet"
LOG_FILE_EXTENSION = "log"
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
LOG_BASE_VERSION = 1
# Hudi's constant for writes that are not tied to a Spark task, e.g. rollback appends.
UNKNOWN_WRITE_TOKEN = "1-0-1"

_LOG_FILE_RE = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(\.cdc)?)?$")


def new_file_id() -> str:
    """A fresh file group id: ``<uuid4>-0`` (the suffix counts handle roll-overs in Hudi)."""
    return f"{uuid.uuid4()}-0"


def write_token(task_partition_id: int, stage_id: int, attempt_id: int) -> str:
    """``<taskPartitionId>-<stageId>-<taskAttemptId>``; distinct per write attempt of a file."""
    return f"{task_partition_id}-{stage_id}-{attempt_id}"


def base_file_name(file_id: str, token: str, instant_time: str) -> str:
    return f"{file_id}_{token}_{instant_time}{BASE_FILE_EXTENSION}"


def log_file_name(file_id: str, base_instant: str, version: int, token: str) -> str:
    return f".{file_id}_{base_instant}.{LOG_FILE_EXTENSION}.{version}_{token}"


@dataclass(frozen=True)
class BaseFileName:
    """The parts of a base file name ``<fileId>_<writeToken>_<instant>.parquet``."""

    name: str
    file_id: str
    write_token: str
    instant_time: str


@dataclass(frozen=True)
class LogFileName:
    """The parts of a log file name ``.<fileId>_<instant>.log.<version>_<writeToken>``."""

    name: str
    file_id: str
    instant_time: str
    version: int
    write_token: str

    def sort_key(self) -> tuple[str, int, str]:
        # Java's LogFileComparator: name timestamp, then version, then write token.
        return (self.instant_time, self.version, self.write_token)


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Parses a base file name, or None if ``name`` is not one."""
    if BASE_FILE_EXTENSION not in name or name.startswith("."):
        return None
    stem = name.split(".", 1)[0]
    parts = stem.split("_")
    if len(parts) < 3 or not parts[2].isdigit():
        return None
    return BaseFileName(name, parts[0], parts[1], parts[2])


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parses a log file name, or None if ``name`` is not one (CDC logs are not data logs)."""
    m = _LOG_FILE_RE.match(name)
    if not m or m.group(3) != LOG_FILE_EXTENSION or m.group(10):
        return None
    return LogFileName(name, m.group(1), m.group(2), int(m.group(4)), m.group(6) or "")


def in_meta_dir(path: str) -> bool:
    """Whether ``path`` (relative to the table's base) is under a ``.hoodie`` directory: the
    timeline's, or the metadata table's, never a data file of the table."""
    return path.startswith(".hoodie/") or "/.hoodie/" in path
