"""Writing parquet base files the way Hudi does: meta columns first, and in the footer the bloom
filter of the record keys, the min/max record key and the Avro schema (HUDI_FORMAT §5-6)."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal import _native
from shoal.arrays import contiguous, importable_table
from shoal.fs.storage import Storage
from shoal.index.footer import BLOOM_FILTER_KEY, BLOOM_FILTER_TYPE_KEY, MAX_RECORD_KEY, MIN_RECORD_KEY
from shoal.write.schema import META_COLUMNS

# Arrow gives up dictionary encoding of a column chunk only when its dictionary outgrows this
# limit (1 MiB by default), so a high-cardinality column (keys, sequence numbers, measurements)
# is hashed value by value into a dictionary that is then thrown away: about a third of the
# write time of a typical base file. parquet-mr, which Hudi writes with, falls back as soon as
# the dictionary does not pay off. A small limit gets the same plain encoding early, while
# low-cardinality columns (categories, the per-file meta columns) stay dictionary encoded.
DICTIONARY_PAGE_LIMIT = 128 * 1024
# Meta columns with a value per record.
_PER_RECORD_META_COLUMNS = frozenset({"_hoodie_commit_seqno", "_hoodie_record_key"})
# Column statistics cost a comparison of every value; nothing filters on sequence numbers.
_NO_STATISTICS = frozenset({"_hoodie_commit_seqno"})
# Even under that limit, a column whose dictionary will overflow is hashed value by value until
# it does. Rows drawn at random (each at most once) tell how many distinct values a column has:
# one projected to need twice the limit is written plain from the start. Mostly-distinct samples
# are the only ones judged, so skewed columns (few frequent values) keep the writer's fallback.
_DICTIONARY_SAMPLE_ROWS = 2048
_DISTINCT_SHARE_TO_JUDGE = 0.9
# Codecs of the writer that copies unchanged column chunks (rust/splice); base files in other
# codecs are written whole by pyarrow.
SPLICE_CODECS = frozenset({"snappy", "gzip", "zstd", "none"})


@dataclass(frozen=True)
class BaseFileOptions:
    """Plain-data settings a write task needs (picklable, so Spark tasks can carry them)."""

    table_name: str
    compression: str = "snappy"
    bloom_type: str = "DYNAMIC_V0"
    bloom_num_entries: int = 60000
    bloom_fpp: float = 1e-9
    bloom_max_entries: int = 100000
    row_group_bytes: int = 120 * 1024 * 1024
    page_size: int = 1024 * 1024


def with_meta_columns(
    data: pa.Table, instant: str, task_id: int, file_name: str, start_seqno: int = 0
) -> pa.Table:
    """Prepends the five meta columns for records written by ``instant``; ``data`` already
    carries ``_hoodie_record_key`` and ``_hoodie_partition_path``."""
    n = data.num_rows
    user = [c for c in data.column_names if c not in META_COLUMNS]
    columns = [
        pa.repeat(pa.scalar(instant), n),
        _seqnos(instant, task_id, start_seqno, n),
        data.column("_hoodie_record_key"),
        data.column("_hoodie_partition_path"),
        pa.repeat(pa.scalar(file_name), n),
    ]
    names = list(META_COLUMNS)
    return pa.Table.from_arrays(columns + [data.column(c) for c in user], names=names + user)


def base_file_rows(
    data: pa.Table, instant: str, task_id: int, file_name: str, partition_path: str
) -> pa.Table:
    """The meta columns and ``data`` (which carries ``_hoodie_record_key``) as one base file's new
    rows. The columns that hold one value per file (commit time, partition path, file name) are
    one-entry dictionaries: the parquet writer stores them as a dictionary page plus indices
    without hashing every value, and files read back with plain string columns."""
    n = data.num_rows
    user = [c for c in data.column_names if c not in META_COLUMNS]
    columns = [
        constant_column(instant, n),
        _seqnos(instant, task_id, 0, n),
        data.column("_hoodie_record_key"),
        constant_column(partition_path, n),
        constant_column(file_name, n),
    ]
    return pa.Table.from_arrays(columns + [data.column(c) for c in user], names=list(META_COLUMNS) + user)


def constant_column(value: str, n: int) -> pa.DictionaryArray:
    """``n`` copies of ``value`` as a dictionary array (one dictionary entry, zeroed indices)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value]))


def _seqnos(instant: str, task_id: int, start: int, n: int) -> pa.Array:
    """Hudi's ``_hoodie_commit_seqno`` values ``<instant>_<task>_<n>`` for records start..start+n."""
    return _native.commit_seqnos(f"{instant}_{task_id}_", start, n)


def avro_schema_for(schema: pa.Schema, table_name: str) -> str:
    """The Avro schema Spark/Hudi would record for ``schema`` (record ``<table>_record``)."""
    return _native.arrow_to_avro_schema(schema, f"{table_name}_record", f"hoodie.{table_name}")


@dataclass(frozen=True)
class KeyFooterValues:
    """A base file's record-key footer entries: its least and greatest key and the value of its
    bloom filter (of the configured type)."""

    min_key: str
    max_key: str
    bloom: str


def write_base_file(
    storage: Storage,
    path: str,
    data: pa.Table,
    opts: BaseFileOptions,
    keys: KeyFooterValues | None = None,
    plain_columns: Collection[str] = (),
) -> int:
    """Writes ``data`` (meta columns included) to ``path``; returns the file size in bytes.
    Dictionary columns are stored as their value type. ``keys``: the footer's record-key entries
    when the caller knows them for the records of ``data`` (a merge reusing the replaced file's
    bloom filter); computed from ``data`` otherwise. ``plain_columns``: columns known not to pay
    for a dictionary (a merge passes those the replaced file stores without one)."""
    # Chunks of a dictionary column must share one dictionary: on a change the parquet writer
    # falls back to plain encoding for the rest of the column chunk.
    data = constant_strings_as_dictionaries(data).unify_dictionaries()
    meta = _footer_metadata(data, opts, keys)
    storage.makedirs(path.rsplit("/", 1)[0] if "/" in path else "")
    with (
        storage.fs.open_output_stream(storage.full_path(path)) as out,
        pq.ParquetWriter(
            out,
            data.schema.remove_metadata(),
            compression=None if opts.compression == "none" else opts.compression,
            data_page_size=opts.page_size,
            dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
            write_statistics=[c for c in data.column_names if c not in _NO_STATISTICS],
            use_dictionary=dictionary_columns(data, plain_columns),
            # No ARROW:schema blob: the footer carries what Hudi readers look for, nothing else.
            store_schema=False,
        ) as writer,
    ):
        # A file without records has no row group (an empty one is no use to any reader).
        if data.num_rows:
            writer.write_table(data, row_group_size=row_group_rows(data, opts))
        writer.add_key_value_metadata(meta)
    return storage.size(path)


def _footer_metadata(data: pa.Table, opts: BaseFileOptions, keys: KeyFooterValues | None) -> dict[str, str]:
    """The footer entries Hudi readers look for: record-key bounds and bloom filter (computed
    from ``data`` unless ``keys`` gives them) and the Avro schema."""
    meta: dict[str, str] = {}
    if keys is None:
        keys = key_footer_values(data.column("_hoodie_record_key"), opts)
    if keys is not None:
        meta[MIN_RECORD_KEY], meta[MAX_RECORD_KEY] = keys.min_key, keys.max_key
        meta[BLOOM_FILTER_KEY] = keys.bloom
        if opts.bloom_type == "DYNAMIC_V0":
            meta[BLOOM_FILTER_TYPE_KEY] = "DYNAMIC_V0"
    meta["parquet.avro.schema"] = avro_schema_for(_decoded(data.schema), opts.table_name)
    meta["writer.model.name"] = "avro"
    return meta


def row_group_rows(data: pa.Table, opts: BaseFileOptions) -> int:
    """Rows per row group for ``data``: the configured row group bytes over its average row."""
    avg_row = max(1, data.nbytes // max(1, data.num_rows))
    return max(1, opts.row_group_bytes // avg_row)


def write_spliced_base_file(
    storage: Storage,
    path: str,
    data: pa.Table,
    row_groups: list[tuple[int, int, list[int]]],
    replaced: pa.Array,
    opts: BaseFileOptions,
    keys: KeyFooterValues | None = None,
    plain_columns: Collection[str] = (),
) -> int | None:
    """Writes ``data`` (meta columns included) to ``path`` as the row groups ``row_groups``
    (start row, row count, and per field the row group of the replaced file to copy its chunk
    from, or -1 to encode it), copying chunks from ``replaced`` (that file's bytes as a uint8
    array); returns the file size in bytes. None, having written nothing, when the codec is not
    one the splicing writer has or the replaced file stores its columns differently (the caller
    then writes the file with ``write_base_file``)."""
    if opts.compression not in SPLICE_CODECS:
        return None
    encoded = {data.column_names[i] for _, _, sources in row_groups for i, s in enumerate(sources) if s < 0}
    dictionary = dictionary_columns(
        data.select([c for c in data.column_names if c in encoded]), plain_columns
    )
    if isinstance(dictionary, bool):
        dictionary = list(data.column_names) if dictionary else []
    # pyarrow stores dictionary arrays with a dictionary whatever it is told; the Rust writer
    # needs to be told (dictionary_columns leaves them out).
    dictionary = list(dictionary) + [f.name for f in data.schema if pa.types.is_dictionary(f.type)]
    written = _native.splice_base_file(
        replaced,
        data.schema,
        [(importable_table(data.slice(start, n)), sources) for start, n, sources in row_groups],
        opts.compression,
        dictionary,
        sorted(_NO_STATISTICS),
        DICTIONARY_PAGE_LIMIT,
        opts.page_size,
        list(_footer_metadata(data, opts, keys).items()),
    )
    if written is None:
        return None
    storage.makedirs(path.rsplit("/", 1)[0] if "/" in path else "")
    with storage.fs.open_output_stream(storage.full_path(path)) as out:
        out.write(written.buffers()[1])
    return len(written)


def key_footer_values(keys: pa.ChunkedArray | pa.Array, opts: BaseFileOptions) -> KeyFooterValues | None:
    """The record-key footer entries of a file holding ``keys``; None when it holds no record
    (record keys are never null, so there are bounds exactly when there are records)."""
    keys = contiguous(keys)
    bounds = _native.key_bounds(keys)
    if bounds is None:
        return None
    bloom = _native.bloom_footer_for_keys(
        keys, opts.bloom_num_entries, opts.bloom_fpp, opts.bloom_max_entries, opts.bloom_type
    )
    return KeyFooterValues(bounds[0], bounds[1], bloom)


def constant_strings_as_dictionaries(data: pa.Table) -> pa.Table:
    """``data`` with every string column that holds one value in all its rows (a partition
    field, say) as a one-entry dictionary: the parquet writer then stores a dictionary page and
    indices without hashing and comparing every value, and the file reads back the same."""
    n = data.num_rows
    for i, (f, column) in enumerate(zip(data.schema, data.columns, strict=True)):
        if f.name in _PER_RECORD_META_COLUMNS:
            continue
        if not (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)):
            continue
        if n == 0 or column.null_count:
            continue
        # The first value, whichever chunk holds it (leading chunks can be empty).
        first = column.slice(0, 1).combine_chunks()
        value = first[0]
        # Most columns differ at one of these rows: no pass over them.
        if any(column[j] != value for j in (n // 2, n - 1)):
            continue
        if not pc.all(pc.equal(column, value)).as_py():
            continue
        indices = pa.array(np.zeros(n, dtype=np.int32))
        constant = pa.DictionaryArray.from_arrays(indices, first)
        data = data.set_column(i, f.with_type(constant.type), constant)
    return data


def dictionary_columns(data: pa.Table, known_plain: Collection[str] = ()) -> bool | list[str]:
    """The columns to try dictionary encoding on: all but those whose dictionary would outgrow
    DICTIONARY_PAGE_LIMIT (sequence numbers, ``known_plain`` ones, and columns judged by a random
    sample); True (all) for nested schemas, whose leaf paths are not field names."""
    if any(pa.types.is_nested(f.type) for f in data.schema):
        return True
    n = data.num_rows
    # Sequence numbers are distinct by construction. Record keys are judged like the other
    # columns: a key field holding the same values then gets the same encoding, byte for byte
    # (which a merge of the file relies on to decode them once).
    plain = {"_hoodie_commit_seqno", *known_plain}
    rows = None
    if n > _DICTIONARY_SAMPLE_ROWS:
        rows = np.sort(np.random.default_rng(n).choice(n, _DICTIONARY_SAMPLE_ROWS, replace=False))
    for f, column in zip(data.schema, data.columns, strict=True):
        if f.name in plain or pa.types.is_dictionary(f.type) or pa.types.is_boolean(f.type) or not n:
            continue
        sample = column.combine_chunks() if rows is None else _take_sorted(column, rows)
        if _projected_dictionary_bytes(sample, n) > 2 * DICTIONARY_PAGE_LIMIT:
            plain.add(f.name)
    return [c for c in data.column_names if c not in plain]


def _take_sorted(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``column`` at the ascending ``rows``, taken chunk by chunk: a take from a chunked column
    would first concatenate all of it."""
    starts = np.cumsum([0] + [len(c) for c in column.chunks])
    cuts = np.searchsorted(rows, starts)
    parts = [
        chunk.take(pa.array(rows[cuts[i] : cuts[i + 1]] - starts[i]))
        for i, chunk in enumerate(column.chunks)
        if cuts[i + 1] > cuts[i]
    ]
    return pa.concat_arrays(parts)


def _projected_dictionary_bytes(sample: pa.Array, n: int) -> float:
    """Bytes of the dictionary of a column of ``n`` rows that ``sample`` comes from (distinct rows
    drawn at random, or the whole column); 0 unless nearly every sampled row is distinct."""
    size = len(sample)
    distinct = len(pc.unique(sample))
    if distinct < _DISTINCT_SHARE_TO_JUDGE * size:
        return 0.0
    if size == n:
        values = float(distinct)
    else:
        # d equally frequent values show d * (1 - exp(-size / d)) distinct ones in `size` draws
        # on average: x = size / d solves (1 - exp(-x)) / x = distinct / size (bisection).
        share, lo, hi = distinct / size, 0.0, 1.0
        for _ in range(30):
            x = (lo + hi) / 2
            if (1 - math.exp(-x)) / x > share:
                lo = x
            else:
                hi = x
        values = n if lo == 0 else min(n, size / lo)
    if (
        pa.types.is_binary(sample.type)
        or pa.types.is_string(sample.type)
        or pa.types.is_large_string(sample.type)
        or pa.types.is_large_binary(sample.type)
    ):
        # A dictionary page holds each value with a 4-byte length.
        width = (pc.sum(pc.binary_length(sample)).as_py() or 0) / size + 4
    else:
        width = sample.type.bit_width / 8 if pa.types.is_primitive(sample.type) else sample.nbytes / size
    return values * width


def _decoded(schema: pa.Schema) -> pa.Schema:
    """``schema`` with dictionary fields replaced by their value type, as the file stores them."""
    return pa.schema(
        [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in schema]
    )
