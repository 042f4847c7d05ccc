"""``.hoodie/hoodie.properties``: the table's persistent configuration (HUDI_FORMAT §1.2-1.5)."""

from __future__ import annotations

import enum
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from shoal.config import javaprops
from shoal.errors import CorruptTableError, InvalidOptionError, TableNotFoundError, UnsupportedError
from shoal.fs.storage import Storage

PROPERTIES_FILE = "hoodie.properties"
PROPERTIES_BACKUP_FILE = "hoodie.properties.backup"

TABLE_NAME = "hoodie.table.name"
DATABASE_NAME = "hoodie.database.name"
TABLE_TYPE = "hoodie.table.type"
TABLE_VERSION = "hoodie.table.version"
TIMELINE_LAYOUT_VERSION = "hoodie.timeline.layout.version"
RECORDKEY_FIELDS = "hoodie.table.recordkey.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
PARTITION_FIELDS = "hoodie.table.partition.fields"
KEYGENERATOR_CLASS = "hoodie.table.keygenerator.class"
KEYGENERATOR_TYPE = "hoodie.table.keygenerator.type"
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
CDC_ENABLED = "hoodie.table.cdc.enabled"
ARCHIVELOG_FOLDER = "hoodie.archivelog.folder"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
CREATE_SCHEMA = "hoodie.table.create.schema"
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
MERGER_STRATEGY = "hoodie.compaction.record.merger.strategy"
RECORD_MERGE_MODE = "hoodie.record.merge.mode"
RECORD_MERGE_STRATEGY_ID = "hoodie.record.merge.strategy.id"
TIMELINE_TIMEZONE = "hoodie.table.timeline.timezone"
TIMELINE_PATH = "hoodie.timeline.path"
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
CHECKSUM = "hoodie.table.checksum"

TABLE_VERSION_DEFAULT = 6
ARCHIVELOG_FOLDER_DEFAULT = "archived"
TIMELINE_PATH_DEFAULT = "timeline"

OVERWRITE_WITH_LATEST_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.EventTimeAvroPayload"
# Hudi 0.14's payload-based merger strategy id, written by Spark SQL into every v6 table.
DEFAULT_MERGER_STRATEGY_UUID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_MERGER_STRATEGY_UUID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"


class TableType(str, enum.Enum):
    """Hudi table types."""

    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"

    @classmethod
    def parse(cls, value: str) -> TableType:
        """Accepts Hudi's names and the Spark SQL short forms ``cow``/``mor``."""
        normalized = {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(value.upper(), value.upper())
        try:
            return cls(normalized)
        except ValueError:
            raise InvalidOptionError(
                f"unknown table type {value!r}; expected COPY_ON_WRITE or MERGE_ON_READ"
            ) from None


class MergeOrdering(str, enum.Enum):
    """How two versions of a record are ordered when merged (HUDI_FORMAT §9.5)."""

    EVENT_TIME = "EVENT_TIME_ORDERING"
    COMMIT_TIME = "COMMIT_TIME_ORDERING"


# The payload classes whose merge shoal implements, by the ordering they merge with.
PAYLOAD_ORDERING = {
    OVERWRITE_WITH_LATEST_PAYLOAD: MergeOrdering.COMMIT_TIME,
    DEFAULT_PAYLOAD: MergeOrdering.EVENT_TIME,
    EVENT_TIME_PAYLOAD: MergeOrdering.EVENT_TIME,
}


def payload_class_name(name: str) -> str:
    """A payload class as Hudi records it: short names are in ``org.apache.hudi.common.model``."""
    return name if "." in name else f"org.apache.hudi.common.model.{name}"


def requested_ordering(mode: str | None, payload: str | None) -> MergeOrdering | None:
    """The merge ordering that the write options ``hoodie.record.merge.mode`` and
    ``hoodie.datasource.write.payload.class`` ask for, or None when neither is given.

    Raises:
        UnsupportedError: a payload class whose merge shoal does not implement.
        InvalidOptionError: the two options ask for different orderings.
    """
    asked = []
    if mode:
        asked.append(("hoodie.record.merge.mode", MergeOrdering(mode)))
    if payload:
        ordering = PAYLOAD_ORDERING.get(payload_class_name(payload))
        if ordering is None:
            known = ", ".join(sorted(c.rsplit(".", 1)[1] for c in PAYLOAD_ORDERING))
            raise UnsupportedError(f"payload class {payload!r} is not supported; shoal merges with {known}")
        asked.append(("hoodie.datasource.write.payload.class", ordering))
    if len({o for _, o in asked}) > 1:
        raise InvalidOptionError(
            "hoodie.record.merge.mode and hoodie.datasource.write.payload.class ask for different orderings: "
            + ", ".join(f"{k} -> {o.value}" for k, o in asked)
        )
    return asked[0][1] if asked else None


def table_checksum(database: str | None, table: str) -> int:
    """CRC32 of ``"<database>.<table>"``, as ``HoodieTableConfig.generateChecksum`` computes it."""
    return zlib.crc32(f"{database or ''}.{table}".encode())


def _split_fields(value: str | None) -> list[str]:
    if not value:
        return []
    return [f.strip() for f in value.split(",") if f.strip()]


@dataclass
class TableConfig:
    """The parsed contents of ``hoodie.properties`` with typed accessors."""

    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, storage: Storage) -> TableConfig:
        """Reads ``hoodie.properties`` (falling back to the backup Java leaves mid-update)."""
        for name in (PROPERTIES_FILE, PROPERTIES_BACKUP_FILE):
            path = f".hoodie/{name}"
            if storage.exists(path):
                try:
                    text = storage.read_bytes(path).decode("latin-1")
                except OSError as e:
                    raise CorruptTableError(f"cannot read {path}: {e}") from e
                config = cls(javaprops.loads(text))
                config.validate()
                return config
        raise TableNotFoundError(f"no Hudi table at {storage.base_uri} (missing .hoodie/{PROPERTIES_FILE})")

    def validate(self) -> None:
        """Checks the keys every reader depends on, and the checksum when present."""
        if TABLE_NAME not in self.props:
            raise CorruptTableError(f"hoodie.properties lacks {TABLE_NAME}")
        if CHECKSUM in self.props:
            expected = table_checksum(self.props.get(DATABASE_NAME), self.props[TABLE_NAME])
            if self.props[CHECKSUM].strip() != str(expected):
                raise CorruptTableError(
                    f"hoodie.properties checksum {self.props[CHECKSUM]} does not match {expected}"
                )
        TableType.parse(self.props.get(TABLE_TYPE, TableType.COPY_ON_WRITE.value))
        if self.table_version not in (5, 6, 8, 9):
            raise CorruptTableError(f"unsupported table version {self.table_version}")

    def save(self, storage: Storage) -> None:
        """Writes the properties the way Java does: backup first, then the file, then drop the backup."""
        self.props[CHECKSUM] = str(table_checksum(self.props.get(DATABASE_NAME), self.table_name))
        text = javaprops.dumps(self.props, comment="Updated by shoal").encode("latin-1")
        main, backup = f".hoodie/{PROPERTIES_FILE}", f".hoodie/{PROPERTIES_BACKUP_FILE}"
        if storage.exists(main):
            storage.write_bytes(backup, storage.read_bytes(main))
        storage.write_bytes(main, text)
        storage.delete(backup, missing_ok=True)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.props.get(key, default)

    @property
    def table_name(self) -> str:
        return self.props[TABLE_NAME]

    @property
    def table_type(self) -> TableType:
        return TableType.parse(self.props.get(TABLE_TYPE, TableType.COPY_ON_WRITE.value))

    @property
    def table_version(self) -> int:
        try:
            return int(self.props.get(TABLE_VERSION, str(TABLE_VERSION_DEFAULT)))
        except ValueError:
            raise CorruptTableError(f"bad {TABLE_VERSION}: {self.props.get(TABLE_VERSION)!r}") from None

    def check_writable(self, what: str) -> None:
        """Raises UnsupportedError unless shoal can ``what`` (a write, a rollback, a table
        service) on this table without breaking it for other readers. shoal writes its
        instants, commit metadata and log files as table version 6 lays them out. Version 8
        names a completed instant's file with its completion time, keeps commit metadata as
        Avro and names log files by the delta commit that wrote them: Hudi 1.x and hudi-rs would
        not see a commit shoal wrote there, and would read the table without it."""
        if self.table_version >= 8:
            raise UnsupportedError(
                f"cannot {what}: this table is version {self.table_version} (Hudi 1.x) and shoal "
                "writes table version 6 instants, which Hudi 1.x and hudi-rs would not see in a "
                "version 8 table; shoal reads it (snapshot, read-optimized, incremental, time travel), "
                "write it with Apache Hudi 1.x"
            )

    def check_record_writes(self) -> None:
        """Raises UnsupportedError when shoal cannot write records into this table: beyond
        :meth:`check_writable`, a table that logs change data (``hoodie.table.cdc.enabled``)
        needs ``.cdc`` log files beside every change, which shoal does not write, so its CDC
        queries would miss shoal's changes; and a table whose files hold no record keys
        (``hoodie.populate.meta.fields=false``) gives shoal's index nothing to find the records an
        upsert or delete replaces (a delete would silently match nothing)."""
        self.check_writable("write")
        if not self.populate_meta_fields:
            raise UnsupportedError(
                f"cannot write: this table's files hold no record keys ({POPULATE_META_FIELDS}=false), "
                "so shoal's index cannot find the records a write replaces or deletes; shoal reads the table"
            )
        if self.props.get(CDC_ENABLED, "false").strip().lower() == "true":
            raise UnsupportedError(
                f"cannot write: this table logs change data ({CDC_ENABLED}=true) and shoal does not "
                "write the .cdc log files its CDC queries read, so they would miss shoal's changes; "
                "shoal reads the table"
            )

    def check_base_file_format(self) -> None:
        """Raises UnsupportedError unless the table's base files are parquet, the only format
        shoal reads and writes."""
        if self.base_file_format != "PARQUET":
            raise UnsupportedError(
                f"this table's base files are {self.base_file_format} ({BASE_FILE_FORMAT}); shoal "
                "reads and writes PARQUET base files only"
            )

    @property
    def timeline_layout_version(self) -> int:
        default = "2" if self.table_version >= 8 else "1"
        return int(self.props.get(TIMELINE_LAYOUT_VERSION, default))

    @property
    def timeline_dir(self) -> str:
        """The active timeline directory relative to the base path."""
        if self.table_version >= 8:
            return ".hoodie/" + self.props.get(TIMELINE_PATH, TIMELINE_PATH_DEFAULT)
        return ".hoodie"

    @property
    def archive_dir(self) -> str:
        return ".hoodie/" + self.props.get(ARCHIVELOG_FOLDER, ARCHIVELOG_FOLDER_DEFAULT)

    @property
    def record_key_fields(self) -> list[str]:
        return _split_fields(self.props.get(RECORDKEY_FIELDS))

    @property
    def partition_fields(self) -> list[str]:
        # v8 custom key generators store "field:TYPE"; the field name is what readers need.
        return [f.split(":")[0] for f in _split_fields(self.props.get(PARTITION_FIELDS))]

    @property
    def precombine_field(self) -> str | None:
        return self.props.get(PRECOMBINE_FIELD) or None

    @property
    def hive_style_partitioning(self) -> bool:
        return self.props.get(HIVE_STYLE_PARTITIONING, "false").lower() == "true"

    @property
    def url_encode_partitioning(self) -> bool:
        return self.props.get(URL_ENCODE_PARTITIONING, "false").lower() == "true"

    @property
    def populate_meta_fields(self) -> bool:
        return self.props.get(POPULATE_META_FIELDS, "true").lower() == "true"

    @property
    def base_file_format(self) -> str:
        return self.props.get(BASE_FILE_FORMAT, "PARQUET").upper()

    @property
    def create_schema(self) -> str | None:
        return self.props.get(CREATE_SCHEMA)

    @property
    def merge_ordering(self) -> MergeOrdering:
        """Event-time ordering unless the table records commit-time semantics."""
        mode = self.props.get(RECORD_MERGE_MODE)
        if mode:
            return (
                MergeOrdering(mode) if mode in MergeOrdering._value2member_map_ else MergeOrdering.EVENT_TIME
            )
        payload = self.props.get(PAYLOAD_CLASS, "")
        if payload.endswith(("DefaultHoodieRecordPayload", "EventTimeAvroPayload")):
            return MergeOrdering.EVENT_TIME
        if payload:
            return MergeOrdering.COMMIT_TIME
        return MergeOrdering.EVENT_TIME if self.precombine_field else MergeOrdering.COMMIT_TIME

    @property
    def partitioned(self) -> bool:
        return bool(self.partition_fields)

    def as_dict(self) -> Mapping[str, str]:
        return dict(self.props)
