"""shoal: a lakehouse table engine with Apache Hudi's on-disk format.

>>> import shoal
>>> t = shoal.Table.create("/tmp/trips", name="trips", record_key="id", partition_by="city",
...                        ordering_field="ts")                                  # doctest: +SKIP
>>> t.upsert(batch)                                                              # doctest: +SKIP
>>> t.read(columns=["id", "fare"], filters=[("city", "=", "sf")])                 # doctest: +SKIP
"""

from shoal import _native
from shoal.errors import (
    CleanedInstantError,
    CommitConflictError,
    CorruptDataError,
    CorruptTableError,
    DuplicateKeyError,
    InstantNotFoundError,
    InvalidArgumentError,
    InvalidOptionError,
    InvalidRecordKeyError,
    RolledBackInstantError,
    SchemaMismatchError,
    ShoalError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedError,
)
from shoal.read.stream import Change, ChangeStream
from shoal.table import Table, TimelineEntry

__version__ = _native.__version__

__all__ = [
    "Change",
    "ChangeStream",
    "CleanedInstantError",
    "CommitConflictError",
    "CorruptDataError",
    "CorruptTableError",
    "DuplicateKeyError",
    "InstantNotFoundError",
    "InvalidArgumentError",
    "InvalidOptionError",
    "InvalidRecordKeyError",
    "RolledBackInstantError",
    "SchemaMismatchError",
    "ShoalError",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TimelineEntry",
    "UnsupportedError",
    "__version__",
]
