"""The exceptions shoal raises, all rooted at :class:`ShoalError`.

The Rust core raises these same classes (it looks them up here), so callers catch one hierarchy
whether an error came from Python planning code or from native decoding.
"""

from __future__ import annotations


class ShoalError(Exception):
    """Base class of every error raised by shoal."""


class TableNotFoundError(ShoalError):
    """No Hudi table (no readable ``.hoodie/hoodie.properties``) exists at the path."""


class TableExistsError(ShoalError):
    """``Table.create`` was asked to create a table where one already exists."""


class SchemaMismatchError(ShoalError):
    """Incoming data cannot be reconciled with the table schema."""


class InvalidRecordKeyError(ShoalError, ValueError):
    """A record key (or a partition field) is missing, null or empty."""


class InvalidOptionError(ShoalError, ValueError):
    """An option key or value is unknown, malformed or inconsistent with the table."""


class InvalidArgumentError(ShoalError, ValueError):
    """A call received an argument outside its domain."""


class DuplicateKeyError(ShoalError):
    """An insert under ``hoodie.datasource.insert.dup.policy=fail`` has records of keys the
    table holds."""


class CorruptDataError(ShoalError):
    """Bytes that do not follow the format: a damaged file, footer, log block or timeline file."""


class CorruptTableError(CorruptDataError):
    """Table metadata (properties, timeline, file names) is inconsistent or unreadable."""


class UnsupportedError(ShoalError):
    """A valid construct of the format that shoal does not implement (yet)."""


class CommitConflictError(ShoalError):
    """Another writer committed or holds an instant that conflicts with this one."""


class InstantNotFoundError(ShoalError):
    """A requested instant is not on the (active or archived) timeline."""


class CleanedInstantError(InstantNotFoundError):
    """A read as of an instant needs file slices that the cleaner removed."""


class RolledBackInstantError(InstantNotFoundError):
    """An incremental read starts after an instant (a consumer's checkpoint) that a rollback or
    a restore undid: what was read up to it is no longer all in the table."""


__all__ = [
    "CommitConflictError",
    "CorruptDataError",
    "CorruptTableError",
    "InstantNotFoundError",
    "InvalidArgumentError",
    "InvalidOptionError",
    "InvalidRecordKeyError",
    "RolledBackInstantError",
    "SchemaMismatchError",
    "ShoalError",
    "TableExistsError",
    "TableNotFoundError",
    "UnsupportedError",
]
