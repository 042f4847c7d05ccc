"""Write options under their Hudi names, each defined once with its default and parser.

Unknown ``hoodie.*`` keys are rejected rather than ignored: a typo in a sizing or index option
would otherwise silently change how a production table is laid out.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.errors import InvalidOptionError


def _bool(v: str) -> bool:
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low == "true"


def _positive_int(v: str) -> int:
    n = int(v)
    if n <= 0:
        raise ValueError("expected a positive integer")
    return n


def _non_negative_int(v: str) -> int:
    n = int(v)
    if n < 0:
        raise ValueError("expected a non-negative integer")
    return n


def _fraction(v: str) -> float:
    x = float(v)
    if not 0.0 < x < 1.0:
        raise ValueError("expected a number strictly between 0 and 1")
    return x


def _positive_float(v: str) -> float:
    x = float(v)
    if x <= 0:
        raise ValueError("expected a positive number")
    return x


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(v: str) -> str:
        up = v.strip().upper()
        if up not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return up

    return parse


def _codec(v: str) -> str:
    low = v.strip().lower()
    if low in ("uncompressed", "none"):
        return "none"
    if low not in ("snappy", "gzip", "zstd", "lz4", "brotli"):
        raise ValueError("expected snappy, gzip, zstd, lz4, brotli or uncompressed")
    return low


def _text(v: str) -> str:
    return v


@dataclass(frozen=True)
class ConfigOption:
    """A supported option: its Hudi key, default (as Hudi spells it) and parser."""

    key: str
    default: str | None
    parse: Callable[[str], Any]
    doc: str


_OPTIONS: dict[str, ConfigOption] = {}


def _opt(key: str, default: str | None, parse: Callable[[str], Any], doc: str) -> str:
    _OPTIONS[key] = ConfigOption(key, default, parse, doc)
    return key


# -- table definition (also accepted at create time under the datasource names) --------------
TABLE_NAME = _opt("hoodie.table.name", None, _text, "Table name.")
DATABASE_NAME = _opt("hoodie.database.name", None, _text, "Database name (part of the checksum).")
RECORDKEY_FIELD = _opt("hoodie.datasource.write.recordkey.field", None, _text, "Record key field(s).")
PARTITIONPATH_FIELD = _opt("hoodie.datasource.write.partitionpath.field", None, _text, "Partition field(s).")
PRECOMBINE_FIELD = _opt("hoodie.datasource.write.precombine.field", None, _text, "Ordering field.")
PAYLOAD_ORDERING_FIELD = _opt(
    "hoodie.payload.ordering.field",
    None,
    _text,
    "The ordering field of Hudi's payload classes: accepted when it names the table's ordering field.",
)
KEYGENERATOR_CLASS = _opt("hoodie.datasource.write.keygenerator.class", None, _text, "Key generator class.")
KEYGENERATOR_TYPE = _opt("hoodie.datasource.write.keygenerator.type", None, _text, "Key generator type.")
HIVE_STYLE = _opt("hoodie.datasource.write.hive_style_partitioning", "false", _bool, "field=value dirs.")
URL_ENCODE = _opt("hoodie.datasource.write.partitionpath.urlencode", "false", _bool, "Escape values.")
PAYLOAD_CLASS = _opt(
    "hoodie.datasource.write.payload.class",
    None,
    _text,
    "Payload class: OverwriteWithLatestAvroPayload (commit time) or DefaultHoodieRecordPayload (event time).",
)
RECORD_MERGE_MODE = _opt(
    "hoodie.record.merge.mode",
    None,
    _choice("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"),
    "How versions of a record are ordered.",
)
for _k in (
    "hoodie.keygen.timebased.timestamp.type",
    "hoodie.keygen.timebased.input.dateformat",
    "hoodie.keygen.timebased.output.dateformat",
    "hoodie.keygen.timebased.timezone",
    "hoodie.keygen.timebased.input.timezone",
    "hoodie.keygen.timebased.output.timezone",
    "hoodie.keygen.timebased.timestamp.scalar.time.unit",
    "hoodie.keygen.timebased.input.dateformat.list.delimiter.regex",
):
    _opt(_k, None, _text, "Timestamp-based key generator setting.")

# -- file sizing ---------------------------------------------------------------------------
PARQUET_MAX_FILE_SIZE = _opt(
    "hoodie.parquet.max.file.size",
    str(120 * 1024 * 1024),
    _positive_int,
    "Target size of a base file in bytes.",
)
PARQUET_SMALL_FILE_LIMIT = _opt(
    "hoodie.parquet.small.file.limit",
    str(100 * 1024 * 1024),
    _non_negative_int,
    "Base files below this size receive inserts; 0 disables.",
)
INSERT_SPLIT_SIZE = _opt(
    "hoodie.copyonwrite.insert.split.size",
    "500000",
    _positive_int,
    "Records per new file group of an upsert or insert when insert.auto.split is false.",
)
INSERT_AUTO_SPLIT = _opt(
    "hoodie.copyonwrite.insert.auto.split",
    "true",
    _bool,
    "Size new file groups of upserts and inserts from the record size and the maximum file size.",
)
MERGE_SMALL_FILE_CANDIDATES = _opt(
    "hoodie.merge.small.file.group.candidates.limit",
    "1",
    _non_negative_int,
    "Merge-on-read: how many of a partition's smallest log-free file slices an insert may pad.",
)
PARQUET_BLOCK_SIZE = _opt(
    "hoodie.parquet.block.size", str(120 * 1024 * 1024), _positive_int, "Row group size in bytes."
)
PARQUET_PAGE_SIZE = _opt("hoodie.parquet.page.size", str(1024 * 1024), _positive_int, "Page size in bytes.")
PARQUET_COMPRESSION = _opt("hoodie.parquet.compression.codec", "snappy", _codec, "Base file codec.")
RECORD_SIZE_ESTIMATE = _opt(
    "hoodie.copyonwrite.record.size.estimate",
    "1024",
    _positive_int,
    "Fallback average record size when nothing better is known.",
)
RECORD_SIZE_THRESHOLD = _opt(
    "hoodie.record.size.estimation.threshold",
    "1.0",
    _positive_float,
    "A commit counts for record size only if it wrote more than this x small-file limit.",
)
LOGFILE_MAX_SIZE = _opt(
    "hoodie.logfile.max.size",
    str(1024 * 1024 * 1024),
    _positive_int,
    "Log files roll over to a new version beyond this size.",
)
LOGFILE_DATA_BLOCK_MAX_SIZE = _opt(
    "hoodie.logfile.data.block.max.size",
    str(256 * 1024 * 1024),
    _positive_int,
    "Maximum size of one data block.",
)

# -- dedup and index ------------------------------------------------------------------------
COMBINE_BEFORE_INSERT = _opt("hoodie.combine.before.insert", "false", _bool, "Dedup inserts by key.")
COMBINE_BEFORE_UPSERT = _opt("hoodie.combine.before.upsert", "true", _bool, "Dedup upserts by key.")
COMBINE_BEFORE_DELETE = _opt("hoodie.combine.before.delete", "true", _bool, "Dedup deletes by key.")
INDEX_TYPE = _opt(
    "hoodie.index.type",
    "BLOOM",
    _choice("BLOOM", "SIMPLE", "BUCKET", "GLOBAL_BLOOM", "GLOBAL_SIMPLE"),
    "Index used to tag records: BLOOM, SIMPLE, BUCKET (the simple bucket engine; local writes "
    "and shoal.spark.write), or GLOBAL_BLOOM / GLOBAL_SIMPLE (a record key is unique across "
    "partitions; shoal.Table's writes).",
)
GLOBAL_INDEX_TYPES = frozenset({"GLOBAL_BLOOM", "GLOBAL_SIMPLE"})
BLOOM_INDEX_UPDATE_PARTITION_PATH = _opt(
    "hoodie.bloom.index.update.partition.path",
    "true",
    _bool,
    "GLOBAL_BLOOM: a record whose partition path changed moves (deleted from its old partition, "
    "inserted into the new one); false keeps it in its old partition.",
)
SIMPLE_INDEX_UPDATE_PARTITION_PATH = _opt(
    "hoodie.simple.index.update.partition.path",
    "true",
    _bool,
    "GLOBAL_SIMPLE: as hoodie.bloom.index.update.partition.path.",
)


def _bucket_engine(v: str) -> str:
    engine = _choice("SIMPLE", "CONSISTENT_HASHING")(v)
    if engine != "SIMPLE":
        raise ValueError(
            "only the SIMPLE bucket engine (a fixed number of buckets per partition) is supported; "
            "CONSISTENT_HASHING resizes buckets by clustering, which shoal does not implement"
        )
    return engine


def _field_list(v: str) -> str:
    fields = [f.strip() for f in v.split(",")]
    if not all(fields):
        raise ValueError("expected comma-separated field names")
    return ",".join(fields)


BUCKET_INDEX_ENGINE = _opt(
    "hoodie.index.bucket.engine", "SIMPLE", _bucket_engine, "Bucket index engine (only SIMPLE)."
)
BUCKET_INDEX_NUM_BUCKETS = _opt(
    "hoodie.bucket.index.num.buckets",
    "256",
    _positive_int,
    "Bucket index: buckets (file groups) per partition; fixed for the life of the table.",
)
BUCKET_INDEX_HASH_FIELD = _opt(
    "hoodie.bucket.index.hash.field",
    None,
    _field_list,
    "Bucket index: the record key fields hashed into a bucket (default: all record key fields).",
)
BLOOM_FILTER_TYPE = _opt(
    "hoodie.bloom.index.filter.type",
    "DYNAMIC_V0",
    _choice("DYNAMIC_V0", "SIMPLE"),
    "Bloom filter written into base file footers.",
)
BLOOM_NUM_ENTRIES = _opt("hoodie.index.bloom.num_entries", "60000", _positive_int, "Bloom sizing: entries.")
BLOOM_FPP = _opt("hoodie.index.bloom.fpp", "0.000000001", _fraction, "Bloom sizing: false positive rate.")
BLOOM_DYNAMIC_MAX_ENTRIES = _opt(
    "hoodie.bloom.index.filter.dynamic.max.entries",
    "100000",
    _positive_int,
    "Dynamic bloom: entries after which rows are reused.",
)
BLOOM_PRUNE_BY_RANGES = _opt(
    "hoodie.bloom.index.prune.by.ranges",
    "true",
    _bool,
    "Prune candidate files by min/max record key before probing.",
)
PARTITIONS_TO_DELETE = _opt(
    "hoodie.datasource.write.partitions.to.delete",
    None,
    _field_list,
    "delete_partition: the partition paths to delete, comma-separated (default: those of the records).",
)
ALLOW_DUPLICATE_ON_INSERTS = _opt(
    "hoodie.merge.allow.duplicate.on.inserts",
    "true",
    _bool,
    "Insert does not dedup against existing records.",
)
BULKINSERT_SORT_MODE = _opt(
    "hoodie.bulkinsert.sort.mode",
    "GLOBAL_SORT",
    _choice(
        "GLOBAL_SORT",
        "PARTITION_SORT",
        "PARTITION_PATH_REPARTITION_AND_SORT",
        "NONE",
        "PARTITION_PATH_REPARTITION",
    ),
    "Bulk insert row order: by partition and record key (the *SORT modes), or as given.",
)
# Modes whose files hold their records in key order (Hudi's sorting partitioners).
KEY_SORTED_BULK_INSERT_MODES = frozenset(
    {"GLOBAL_SORT", "PARTITION_SORT", "PARTITION_PATH_REPARTITION_AND_SORT"}
)

# -- timeline -------------------------------------------------------------------------------
TIMELINE_TIMEZONE = _opt("hoodie.table.timeline.timezone", "UTC", _choice("UTC", "LOCAL"), "Instant clock.")
POPULATE_META_FIELDS = _opt("hoodie.populate.meta.fields", "true", _bool, "Write the _hoodie_* columns.")
DROP_PARTITION_COLUMNS = _opt(
    "hoodie.datasource.write.drop.partition.columns",
    "false",
    _bool,
    "Drop partition columns from data files (unsupported: must be false).",
)
METADATA_ENABLE = _opt(
    "hoodie.metadata.enable",
    "false",
    _bool,
    "The metadata table; shoal keeps it disabled and only accepts false.",
)
MARKERS_TYPE = _opt("hoodie.write.markers.type", "DIRECT", _choice("DIRECT"), "Marker style.")
FILE_LISTING_PARALLELISM = _opt(
    "hoodie.file.listing.parallelism",
    "16",
    _positive_int,
    "Partition directories listed at once on a remote file system (threads; Hudi's default, 200, "
    "sizes a Spark stage).",
)

# -- Hudi engine tuning: accepted so that Hudi job configurations run unchanged, and ignored -----
# They size the stages of Hudi's own Spark jobs; shoal sizes its tasks from the data
# (docs/tables.md). Their values are still checked.
for _k in (
    "hoodie.upsert.shuffle.parallelism",
    "hoodie.insert.shuffle.parallelism",
    "hoodie.bulkinsert.shuffle.parallelism",
    "hoodie.delete.shuffle.parallelism",
    "hoodie.bloom.index.parallelism",
    "hoodie.simple.index.parallelism",
    "hoodie.global.simple.index.parallelism",
    "hoodie.finalize.write.parallelism",
    "hoodie.cleaner.parallelism",
):
    _opt(_k, "0", _non_negative_int, "Ignored by shoal, which sizes its tasks itself.")
for _k in ("hoodie.datasource.write.row.writer.enable", "hoodie.embed.timeline.server"):
    _opt(_k, None, _bool, "Ignored by shoal (a Hudi engine setting).")


def _only_false(refusal: str) -> Callable[[str], bool]:
    """A boolean option shoal supports only as false: true raises ``refusal``."""

    def parse(v: str) -> bool:
        if _bool(v):
            raise ValueError(refusal)
        return False

    return parse


# What an insert does with incoming records of keys the table holds (Hudi's
# ``HoodieSparkSqlWriter``; ``shoal.write.insert_duplicates``): keep them (none), drop them, or
# fail the write. ``insert.drop.duplicates=true`` is the older name of ``drop``; ``fail`` wins.
INSERT_DROP_DUPLICATES = _opt(
    "hoodie.datasource.write.insert.drop.duplicates",
    "false",
    _bool,
    "Inserts drop incoming records whose keys the table holds (as dup.policy=drop).",
)
INSERT_DUP_POLICY = _opt(
    "hoodie.datasource.insert.dup.policy",
    "NONE",
    _choice("NONE", "DROP", "FAIL"),
    "An insert's incoming records of keys the table holds: NONE keeps them, DROP drops them, "
    "FAIL fails the write (DuplicateKeyError).",
)


_no_meta_sync = _only_false(
    "shoal does not sync tables to a metastore (Hive, Glue, ...); register the table path with the "
    "catalog yourself"
)


META_SYNC_ENABLE = _opt("hoodie.datasource.meta.sync.enable", "false", _no_meta_sync, "Only false.")
HIVE_SYNC_ENABLE = _opt("hoodie.datasource.hive_sync.enable", "false", _no_meta_sync, "Only false.")
# The other hoodie.datasource.hive_sync.* settings name what a sync would write; with the sync
# off they do nothing, so any is accepted.
_META_SYNC_PREFIX = "hoodie.datasource.hive_sync."
SCHEMA_ON_WRITE_ADD_COLUMNS = _opt(
    "hoodie.datasource.write.reconcile.schema",
    "false",
    _bool,
    "Fill columns missing from a batch with nulls instead of failing.",
)


# -- compaction (merge-on-read) -----------------------------------------------------------
COMPACT_INLINE = _opt(
    "hoodie.compact.inline",
    "false",
    _bool,
    "After each delta commit, run pending compactions, then schedule and run one when the "
    "trigger strategy says so.",
)
COMPACT_SCHEDULE_INLINE = _opt(
    "hoodie.compact.schedule.inline",
    "false",
    _bool,
    "After each delta commit, schedule a compaction when the trigger strategy says so, and "
    "leave its execution to an asynchronous runner (Table.run_compaction).",
)
COMPACT_TRIGGER_STRATEGY = _opt(
    "hoodie.compact.inline.trigger.strategy",
    "NUM_COMMITS",
    _choice("NUM_COMMITS", "TIME_ELAPSED", "NUM_OR_TIME", "NUM_AND_TIME"),
    "When a compaction is due: after max.delta.commits delta commits since the last "
    "compaction, after max.delta.seconds, either, or both.",
)
COMPACT_MAX_DELTA_COMMITS = _opt(
    "hoodie.compact.inline.max.delta.commits",
    "5",
    _positive_int,
    "Delta commits since the last compaction that make one due.",
)
COMPACT_MAX_DELTA_SECONDS = _opt(
    "hoodie.compact.inline.max.delta.seconds",
    str(60 * 60),
    _positive_int,
    "Seconds since the last compaction (or the first delta commit) that make one due.",
)


# -- clean ----------------------------------------------------------------------------------
_sync_only = _only_false(
    "asynchronous cleaning is not supported: cleans run inline after commits "
    "(hoodie.clean.automatic) or on demand (Table.clean)"
)


CLEAN_AUTOMATIC = _opt(
    "hoodie.clean.automatic",
    "true",
    _bool,
    "After each commit, clean old file slices when hoodie.clean.max.commits commits have "
    "completed since the last clean.",
)
CLEAN_ASYNC = _opt("hoodie.clean.async", "false", _sync_only, "Clean on a background thread (only false).")
CLEANER_POLICY = _opt(
    "hoodie.cleaner.policy",
    "KEEP_LATEST_COMMITS",
    _choice("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS"),
    "Which file slices the cleaner keeps: those the latest N commits read, the latest N "
    "slices of each file group, or those the commits of the last N hours read.",
)
CLEANER_COMMITS_RETAINED = _opt(
    "hoodie.cleaner.commits.retained",
    "10",
    _positive_int,
    "KEEP_LATEST_COMMITS: commits whose file slices (and time travel) stay available.",
)
CLEANER_FILE_VERSIONS_RETAINED = _opt(
    "hoodie.cleaner.fileversions.retained",
    "3",
    _positive_int,
    "KEEP_LATEST_FILE_VERSIONS: file slices kept per file group.",
)
CLEANER_HOURS_RETAINED = _opt(
    "hoodie.cleaner.hours.retained",
    "24",
    _non_negative_int,
    "KEEP_LATEST_BY_HOURS: hours of commits whose file slices stay available.",
)
CLEAN_MAX_COMMITS = _opt(
    "hoodie.clean.max.commits",
    "1",
    _positive_int,
    "Commits completed since the last clean before an inline clean is planned.",
)
CLEAN_TRIGGER_STRATEGY = _opt(
    "hoodie.clean.trigger.strategy", "NUM_COMMITS", _choice("NUM_COMMITS"), "When an inline clean is due."
)
CLEANER_INCREMENTAL_MODE = _opt(
    "hoodie.cleaner.incremental.mode",
    "true",
    _bool,
    "Plan a clean over the partitions written since the last clean's earliest retained commit "
    "instead of every partition (same result, less listing).",
)


# -- concurrency ----------------------------------------------------------------------------
FILE_SYSTEM_LOCK_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"


def _lock_provider(v: str) -> str:
    name = v.strip()
    if name not in (FILE_SYSTEM_LOCK_PROVIDER, FILE_SYSTEM_LOCK_PROVIDER.rsplit(".", 1)[-1]):
        raise ValueError(
            f"shoal implements only {FILE_SYSTEM_LOCK_PROVIDER} (a lock file under .hoodie); "
            "ZooKeeper, DynamoDB, Hive metastore and in-process lock providers are not supported"
        )
    return FILE_SYSTEM_LOCK_PROVIDER


WRITE_CONCURRENCY_MODE = _opt(
    "hoodie.write.concurrency.mode",
    "SINGLE_WRITER",
    _choice("SINGLE_WRITER", "OPTIMISTIC_CONCURRENCY_CONTROL"),
    "SINGLE_WRITER: one writer at a time, and a write rolls back every pending one. "
    "OPTIMISTIC_CONCURRENCY_CONTROL: writers run at once; each commits under the table's lock "
    "and fails with CommitConflictError when a write that completed meanwhile changed a file "
    "group it changed. Every writer of the table must set it.",
)
FAILED_WRITES_CLEANER_POLICY = _opt(
    "hoodie.cleaner.policy.failed.writes",
    None,
    _choice("EAGER", "LAZY"),
    "EAGER (single writer's default): a write rolls back every pending write first. LAZY "
    "(optimistic concurrency's default): only those whose heartbeat stopped.",
)
LOCK_PROVIDER = _opt(
    "hoodie.write.lock.provider",
    FILE_SYSTEM_LOCK_PROVIDER,
    _lock_provider,
    "The lock that optimistic concurrency commits under: the file-system lock only.",
)
FILE_SYSTEM_LOCK_PATH = _opt(
    "hoodie.write.lock.filesystem.path",
    None,
    _text,
    "Directory of the lock file 'lock' (default: the table's .hoodie), relative to the table or absolute.",
)
FILE_SYSTEM_LOCK_EXPIRE = _opt(
    "hoodie.write.lock.filesystem.expire",
    "0",
    _non_negative_int,
    "Minutes after which a lock file counts as left by a dead writer and is broken; 0: never.",
)
LOCK_WAIT_TIME_MS = _opt(
    "hoodie.write.lock.wait_time_ms",
    "60000",
    _positive_int,
    "How long a commit waits for the lock before it fails with CommitConflictError.",
)
LOCK_RETRY_WAIT_TIME_MS = _opt(
    "hoodie.write.lock.wait_time_ms_between_retry",
    "1000",
    _positive_int,
    "Pause between two attempts to take the lock.",
)
HEARTBEAT_INTERVAL_MS = _opt(
    "hoodie.client.heartbeat.interval_in_ms",
    "60000",
    _positive_int,
    "How often a LAZY writer touches .hoodie/.heartbeat/<instant> while its write is pending.",
)
HEARTBEAT_TOLERABLE_MISSES = _opt(
    "hoodie.client.heartbeat.tolerable.misses",
    "2",
    _positive_int,
    "Heartbeats a pending write may miss before a LAZY writer takes it for failed and rolls it back.",
)


# -- archival -------------------------------------------------------------------------------
ARCHIVE_MIN_COMMITS = _opt(
    "hoodie.keep.min.commits",
    "20",
    _positive_int,
    "Completed commits (and, separately, cleans and rollbacks) archival keeps on the active "
    "timeline; must exceed hoodie.cleaner.commits.retained.",
)
ARCHIVE_MAX_COMMITS = _opt(
    "hoodie.keep.max.commits",
    "30",
    _positive_int,
    "Archival runs once more completed commits (or cleans, or rollbacks) than this are active, "
    "and archives down to hoodie.keep.min.commits.",
)
ARCHIVE_BATCH = _opt(
    "hoodie.commits.archival.batch", "10", _positive_int, "Archived entries per block of an archive file."
)
ARCHIVE_AUTOMATIC = _opt("hoodie.archive.automatic", "true", _bool, "Archive after each commit.")
ARCHIVE_ASYNC = _opt(
    "hoodie.archive.async",
    "false",
    _bool,
    "Run the archival after a commit on a background thread (Table.wait_for_archive joins it).",
)
ARCHIVE_BEYOND_SAVEPOINT = _opt(
    "hoodie.archive.beyond.savepoint",
    "false",
    _bool,
    "Archive commits after the first savepoint too (savepointed commits themselves stay).",
)
ARCHIVE_MERGE_ENABLE = _opt(
    "hoodie.archive.merge.enable", "false", _bool, "Merge small archive files into one after archiving."
)
ARCHIVE_MERGE_SMALL_FILE_LIMIT = _opt(
    "hoodie.archive.merge.small.file.limit.bytes",
    str(20 * 1024 * 1024),
    _positive_int,
    "Archive files up to this size are merge candidates.",
)
ARCHIVE_MERGE_FILES_BATCH = _opt(
    "hoodie.archive.merge.files.batch.size",
    "10",
    _positive_int,
    "Merge once at least this many consecutive newest archive files are small.",
)
COMMIT_METADATA_KEY_PREFIX = _opt(
    "hoodie.datasource.write.commitmeta.key.prefix",
    "_",
    _text,
    "Write options whose keys start with this prefix are not Hudi options: they are recorded in "
    "the commit's extraMetadata (a pipeline's checkpoint, say), as Hudi's Spark writer does.",
)
INCR_FALLBACK_FULL_SCAN = _opt(
    "hoodie.datasource.read.incr.fallback.fulltablescan.enable",
    "false",
    _bool,
    "Incremental reads (and streams) whose range reaches archived instants scan the latest "
    "snapshot, filtered by commit time, instead of failing.",
)

SPARK_DIRECT_PARQUET_INPUT = _opt(
    "shoal.spark.write.direct.parquet.input",
    "true",
    _bool,
    "shoal.spark.write: when the input DataFrame is a plain scan of parquet files, its route "
    "tasks read the files with pyarrow, sparing Spark's turning of rows into Arrow (inputs "
    "pyarrow would read otherwise than Spark go through Spark); false always takes the records "
    "through Spark.",
)


def option_names() -> list[str]:
    """Every supported option key, sorted."""
    return sorted(_OPTIONS)


def describe(key: str) -> ConfigOption:
    return _OPTIONS[key]


def _check_names(options: object) -> None:
    """Options are a mapping of option names (strings) to values."""
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise InvalidOptionError(
            f"options are a mapping of option names to values, not {type(options).__name__}"
        )
    for key in options:
        if not isinstance(key, str):
            raise InvalidOptionError(f"option names are strings: got {key!r} ({type(key).__name__})")


def is_known_option(key: str) -> bool:
    """Whether ``key`` names a write option shoal takes."""
    return key in _OPTIONS or key.startswith(_META_SYNC_PREFIX)


class WriteConfig:
    """Validated write options: typed lookups with Hudi's defaults."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        _check_names(options)
        self.raw: dict[str, str] = {}
        # Entries for the commit's extraMetadata: options named with the commit metadata prefix.
        self.commit_metadata: dict[str, str] = {}
        prefix = str((options or {}).get(COMMIT_METADATA_KEY_PREFIX, "_"))
        if prefix and ("hoodie.".startswith(prefix) or prefix.startswith("hoodie.")):
            raise InvalidOptionError(
                f"{COMMIT_METADATA_KEY_PREFIX}={prefix!r} would take Hudi's own options for commit metadata"
            )
        for key, value in (options or {}).items():
            if prefix and key.startswith(prefix) and key != COMMIT_METADATA_KEY_PREFIX:
                self.commit_metadata[key] = str(value)
                continue
            self._check(key, value)
            self.raw[key] = str(value).lower() if isinstance(value, bool) else str(value)
        if self.get(METADATA_ENABLE):
            raise InvalidOptionError(
                "hoodie.metadata.enable=true is not supported: shoal keeps the "
                "metadata table disabled so every reader lists files directly"
            )
        if self.get(DROP_PARTITION_COLUMNS):
            raise InvalidOptionError("hoodie.datasource.write.drop.partition.columns=true is not supported")
        if self.optimistic_concurrency and self.get(FAILED_WRITES_CLEANER_POLICY) == "EAGER":
            raise InvalidOptionError(
                f"{FAILED_WRITES_CLEANER_POLICY}=EAGER with {WRITE_CONCURRENCY_MODE}="
                "OPTIMISTIC_CONCURRENCY_CONTROL would roll back the other writers' pending writes: use LAZY"
            )
        keep_min, keep_max = self.get(ARCHIVE_MIN_COMMITS), self.get(ARCHIVE_MAX_COMMITS)
        if keep_max <= keep_min:
            raise InvalidOptionError(
                f"{ARCHIVE_MAX_COMMITS} ({keep_max}) must be greater than {ARCHIVE_MIN_COMMITS} ({keep_min})"
            )
        if keep_min <= self.get(CLEANER_COMMITS_RETAINED):
            raise InvalidOptionError(
                f"{ARCHIVE_MIN_COMMITS} ({keep_min}) must be greater than {CLEANER_COMMITS_RETAINED} "
                f"({self.get(CLEANER_COMMITS_RETAINED)}): archiving commits the cleaner still retains "
                "would let incremental reads miss their data"
            )

    @staticmethod
    def _check(key: str, value: Any) -> None:
        opt = _OPTIONS.get(key)
        if opt is None and key.startswith(_META_SYNC_PREFIX):
            return
        if opt is None:
            close = difflib.get_close_matches(key, _OPTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidOptionError(f"unknown or unsupported option {key!r}{hint}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            opt.parse(text)
        except ValueError as e:
            raise InvalidOptionError(f"invalid value {value!r} for {key}: {e}") from None

    def get(self, key: str) -> Any:
        opt = _OPTIONS[key]
        text = self.raw.get(key, opt.default)
        return None if text is None else opt.parse(text)

    def is_set(self, key: str) -> bool:
        return key in self.raw

    @property
    def optimistic_concurrency(self) -> bool:
        """Whether writers may run at once (``hoodie.write.concurrency.mode``)."""
        return bool(self.get(WRITE_CONCURRENCY_MODE) == "OPTIMISTIC_CONCURRENCY_CONTROL")

    @property
    def global_index(self) -> bool:
        """Whether record keys are unique across partitions (``GLOBAL_BLOOM``, ``GLOBAL_SIMPLE``)."""
        return bool(self.get(INDEX_TYPE) in GLOBAL_INDEX_TYPES)

    @property
    def update_partition_path(self) -> bool:
        """With a global index: whether a record whose partition path changed moves to it."""
        key = (
            SIMPLE_INDEX_UPDATE_PARTITION_PATH
            if self.get(INDEX_TYPE) == "GLOBAL_SIMPLE"
            else BLOOM_INDEX_UPDATE_PARTITION_PATH
        )
        return bool(self.get(key))

    @property
    def lazy_failed_writes(self) -> bool:
        """Whether only pending writes whose heartbeat stopped count as failed."""
        policy = self.get(FAILED_WRITES_CLEANER_POLICY)
        return bool(policy == "LAZY" if policy is not None else self.optimistic_concurrency)

    def merged(self, overrides: Mapping[str, Any] | None) -> WriteConfig:
        _check_names(overrides)
        return WriteConfig({**self.raw, **self.commit_metadata, **(overrides or {})})
