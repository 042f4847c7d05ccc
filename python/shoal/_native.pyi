"""Type stubs for the Rust core (``shoal._native``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__version__: str

# --- bloom filters (rust/bloom) -----------------------------------------------------------------

class BloomFilter:
    """A Hudi bloom filter (SIMPLE or DYNAMIC_V0), byte-compatible with Hudi's footer filters."""

    @staticmethod
    def dynamic_v0(num_entries: int = 60000, fpp: float = 1e-9, max_entries: int = 100000) -> BloomFilter:
        """An empty DYNAMIC_V0 filter (Hudi's default type and sizing)."""
    @staticmethod
    def simple(num_entries: int = 60000, fpp: float = 1e-9) -> BloomFilter:
        """An empty SIMPLE filter sized for ``num_entries`` keys at false-positive rate ``fpp``."""
    @staticmethod
    def from_footer(value: str, type_code: str | None = None) -> BloomFilter:
        """Parses a footer value; ``type_code`` None or "SIMPLE" -> SIMPLE, "DYNAMIC_V0" -> dynamic.
        Raises CorruptDataError for damaged values."""
    def add(self, key: str) -> None:
        """Adds one key."""
    def add_keys(self, keys: pa.Array | Any) -> None:
        """Adds every key of a string array; nulls raise InvalidArgumentError and add nothing."""
    def might_contain(self, key: str) -> bool:
        """Whether the key may be in the filter."""
    def might_contain_batch(self, keys: pa.Array | Any) -> pa.BooleanArray:
        """Probes every key of a string array (null keys give null)."""
    def to_footer(self) -> str:
        """The footer value: standard base64 (padded) of ``serialize()``."""
    def serialize(self) -> bytes:
        """The serialized filter (Hadoop ``Writable`` layout, big-endian)."""
    @property
    def type_code(self) -> str:
        """ "DYNAMIC_V0" or "SIMPLE"."""
    @property
    def num_hashes(self) -> int:
        """Number of hash functions."""
    @property
    def vector_size(self) -> int:
        """Bits per row."""

def bloom_footer_for_keys(
    keys: pa.Array | Any,
    num_entries: int = 60000,
    fpp: float = 1e-9,
    max_entries: int = 100000,
    type_code: str = "DYNAMIC_V0",
) -> str:
    """Builds a filter over a string array of record keys and returns its footer value."""

# --- record-key ordering (rust/keysort.rs) -----------------------------------------------------

def sort_key_indices(keys: pa.Array | Any) -> pa.UInt64Array:
    """Row indices sorting a string or binary array ascending by bytes, stably, nulls last."""

def key_bounds(keys: pa.Array | Any) -> tuple[str, str] | None:
    """The least and greatest key of a string array in UTF-16 code-unit order (Java's
    ``String.compareTo``, the order of Hudi's footer min/max record keys), nulls ignored; None if
    none is valid."""

def keys_distinct(keys: pa.Array | Any) -> bool:
    """Whether no two valid keys of a string or binary array are equal (nulls ignored)."""

def keys_held_by(probe: pa.Array | Any, stored: pa.Array | Any) -> pa.BooleanArray:
    """For each key of ``probe``, whether ``stored`` holds it (null keys: false); both string or
    binary arrays."""

def key_hashes(keys: pa.Array | Any) -> pa.UInt64Array:
    """The stable 64-bit hash of every key of a string or binary array
    (``shoal.spark.keys.key_hash``); a null key hashes as the empty key."""

def keys_in_range(keys: pa.Array | Any, lo: str, hi: str) -> pa.BooleanArray:
    """For each key of a string or binary array, whether it lies within ``[lo, hi]`` in UTF-16
    code-unit order, as Hudi's bloom index tests keys against a footer's min/max record key
    (null keys give null)."""

# --- base file decoding (rust/base_file) ---------------------------------------------------------

class BaseFileReader:
    """The record batches of a base file (a local file, or its bytes in memory), decoded with the
    GIL released. ``columns``: the top-level columns to decode (file order; names the file lacks
    are skipped). Raises UnsupportedError at open for a codec the core lacks, CorruptDataError
    for bytes that are not a readable parquet file, OSError when the file cannot be opened."""

    def __init__(self, path: str, columns: list[str] | None = None, batch_size: int = 65536) -> None: ...
    @staticmethod
    def from_bytes(
        data: pa.UInt8Array, columns: list[str] | None = None, batch_size: int = 65536
    ) -> BaseFileReader:
        """A reader over a base file's bytes in memory (not copied)."""
    @property
    def schema(self) -> pa.Schema:
        """The batches' schema."""
    def __iter__(self) -> BaseFileReader: ...
    def __next__(self) -> pa.RecordBatch: ...

# --- spliced base files (rust/splice) ------------------------------------------------------------

def splice_base_file(
    old: pa.Array,
    schema: pa.Schema,
    row_groups: list[tuple[pa.Table, list[int]]],
    compression: str,
    dictionary_fields: list[str],
    no_statistics_fields: list[str],
    dictionary_page_limit: int,
    data_page_size: int,
    key_value: list[tuple[str, str]],
) -> pa.UInt8Array | None:
    """The bytes of a merged base file whose fields are, per row group, copied from a row group
    of the replaced file ``old`` (uint8 bytes) or encoded from the rows (-1); None when ``old``
    does not store ``schema``'s columns the way this writer would."""

# --- meta column values (rust/meta.rs) ----------------------------------------------------------

def commit_seqnos(prefix: str, start: int, n: int) -> pa.StringArray:
    """``_hoodie_commit_seqno`` values ``<prefix><index>`` for indices ``start .. start + n``."""

# --- record-size sampling (rust/sizing.rs) ------------------------------------------------------

def estimate_record_size(record_batch: pa.RecordBatch | Any, every: int = 100) -> tuple[float, int]:
    """Average record size in bytes measured on rows 0, every, 2*every, ...:
    ``(average_bytes, sampled_rows)``."""

# --- Avro (rust/avro) ---------------------------------------------------------------------------

def avro_container_decode(data: bytes) -> str:
    """Decodes an Avro object container file to JSON text (an array of records)."""

def avro_container_encode(schema_json: str, records_json: str) -> bytes:
    """Encodes records (JSON array text) with a writer schema into a container file, codec null."""

def arrow_to_avro_schema(schema: pa.Schema | Any, record_name: str, namespace: str) -> str:
    """The Avro writer schema JSON Spark/Hudi would write for ``schema``."""

def avro_to_arrow_schema(schema_json: str) -> pa.Schema:
    """The Arrow schema of an Avro record schema (JSON text)."""

# --- log files (rust/logformat) -----------------------------------------------------------------

class LogBlock:
    """One block of a Hudi log file; content is decoded lazily from the file's bytes."""

    @property
    def block_type(self) -> str:
        """Java's type name: COMMAND_BLOCK, DELETE_BLOCK, AVRO_DATA_BLOCK, HFILE_DATA_BLOCK,
        PARQUET_DATA_BLOCK, CDC_DATA_BLOCK, or CORRUPT_BLOCK for damaged bytes."""
    @property
    def offset(self) -> int:
        """Byte offset of the block in its file."""
    @property
    def size(self) -> int:
        """Bytes the block occupies (magic through trailing length, or the damaged span)."""
    @property
    def file_index(self) -> int:
        """Index of the block's file in the ``scan_log_files`` input (0 for single files)."""
    @property
    def format_version(self) -> int:
        """Log format version (1; 0 for corrupt blocks)."""
    @property
    def header(self) -> dict[str, str]:
        """Header entries by Hudi key name (INSTANT_TIME, SCHEMA, ...), in file order."""
    @property
    def footer(self) -> dict[str, str]:
        """Footer entries (empty in files Hudi writes)."""
    @property
    def instant_time(self) -> str | None:
        """The INSTANT_TIME header."""
    @property
    def is_corrupt(self) -> bool:
        """True for bytes that do not frame as a sound block."""
    @property
    def corrupt_reason(self) -> str | None:
        """Why a corrupt block was judged corrupt."""
    @property
    def record_count(self) -> int | None:
        """Records an AVRO_DATA_BLOCK declares (None for other blocks)."""
    def content(self) -> bytes:
        """Raw content: a Parquet file for PARQUET_DATA_BLOCK, an HFile for HFILE_DATA_BLOCK,
        the damaged bytes for CORRUPT_BLOCK."""
    def records(self, reader_schema_json: str | None = None) -> pa.RecordBatch:
        """Decodes an AVRO_DATA_BLOCK with its SCHEMA header, resolved to the reader schema when
        given (fields the writer lacks come back null or with their default)."""
    def records_json(self) -> str:
        """Decodes an AVRO_DATA_BLOCK with its SCHEMA header into JSON text: an array with one
        value per record (unions as their branch's bare value, bytes as latin-1 strings)."""
    def deletes(self) -> pa.RecordBatch:
        """Decodes a DELETE_BLOCK: record_key (utf8), partition_path (utf8), ordering_value (a
        dense union whose type ids are Java's wrapper branches: 0 null, 1 bool, 2 int32,
        3 int64, 4 float32, 5 float64, 6 binary, 7 utf8, 8 date32, 9 decimal128(30, 15),
        10 time64[us], 11 timestamp[us, UTC])."""

def encode_avro_data_block(
    batch: pa.RecordBatch | pa.Table | Any,
    schema_json: str,
    instant_time: str,
    header: dict[str, str] | None = None,
) -> bytes:
    """An AVRO_DATA_BLOCK of the rows (a batch, or all batches of a table) as Avro datums of
    ``schema_json`` (columns matched by name). Header: INSTANT_TIME, SCHEMA, unless ``header``
    (ordered, Hudi key names) places keys first or adds more; its values for those keys must
    equal the arguments."""

def encode_avro_json_block(
    records_json: str,
    schema_json: str,
    instant_time: str | None = None,
    header: dict[str, str] | None = None,
) -> bytes:
    """An AVRO_DATA_BLOCK of records given as JSON text (an array), each one Avro datum of
    ``schema_json`` (missing fields take their defaults). Header: INSTANT_TIME when given, then
    SCHEMA, unless ``header`` places keys first or adds more."""

def encode_delete_block(
    record_keys: pa.Array | pa.ChunkedArray | Any,
    partition_paths: pa.Array | pa.ChunkedArray | Any,
    ordering_values: pa.Array | pa.ChunkedArray | Any | None,
    instant_time: str,
    schema_json: str | None = None,
    header: dict[str, str] | None = None,
) -> bytes:
    """A DELETE_BLOCK (Java's HoodieDeleteRecordList, content version 3). Ordering values: any
    Arrow array mapped like Java's wrapValueIntoAvro (or the union ``deletes()`` returns);
    None means IntWrapper(0), Spark SQL's default."""

def encode_rollback_block(
    instant_time: str, target_instant_time: str, header: dict[str, str] | None = None
) -> bytes:
    """A ROLLBACK command block (header INSTANT_TIME, COMMAND_BLOCK_TYPE "0",
    TARGET_INSTANT_TIME unless ``header`` reorders)."""

def read_log_blocks(data: bytes) -> list[LogBlock]:
    """The blocks of a log file's bytes, damaged spans as CORRUPT_BLOCK; never raises."""

def read_log_file(path: str | Any) -> list[LogBlock]:
    """``read_log_blocks`` of a file on disk."""

def scan_log_files(
    files: list[bytes | str | Any],
    completed_instants: list[str],
    max_instant: str | None = None,
    inflight_instants: list[str] | None = None,
    instant_range: tuple[str | None, str | None] | None = None,
) -> list[LogBlock]:
    """The data and delete blocks of a file slice that count, oldest first: completed (or
    archived) instants only, rollbacks applied, stop after ``max_instant``, ``(start, end]``."""

# -- merge-on-read kernel (rust/merge) ------------------------------------------------------
def merge_records(
    base_keys: pa.Array | Any,
    base_rank: pa.Array | Any | None,
    log_keys: pa.Array | Any,
    log_rank: pa.Array | Any | None,
    kinds: pa.Array | Any,
    event_time: bool,
) -> tuple[pa.BooleanArray, pa.UInt32Array]:
    """Which base rows survive and which log entries are the final version of their key."""
