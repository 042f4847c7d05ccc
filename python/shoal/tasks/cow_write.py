"""The copy-on-write write task: create a new file group, or merge records into a new slice of an
existing one (Hudi's create and merge handles)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from shoal import _native
from shoal.arrays import contiguous
from shoal.fs.damage import damaged_parquet
from shoal.fs.markers import create_marker
from shoal.fs.naming import base_file_name, write_token
from shoal.fs.storage import Storage
from shoal.index.bloom_reuse import BloomConfig, extended_footer
from shoal.index.footer import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_KEY,
    MAX_RECORD_KEY,
    MIN_RECORD_KEY,
    order_sensitive,
)
from shoal.read.mor import MorSliceSpec, read_mor_slice
from shoal.tasks.merge_layout import as_bools, merge_in_place
from shoal.timeline.commit_metadata import NULL_COMMIT, WriteStat
from shoal.write.base_file import (
    SPLICE_CODECS,
    BaseFileOptions,
    KeyFooterValues,
    base_file_rows,
    constant_column,
    row_group_rows,
    write_base_file,
    write_spliced_base_file,
)
from shoal.write.file_schema import base_file_schema, in_schema, written_schema
from shoal.write.prepare import java_ordered
from shoal.write.replaced_file import plain_columns, read_replaced_file
from shoal.write.schema import META_COLUMNS

RECORD_KEY = "_hoodie_record_key"
FILE_NAME = "_hoodie_file_name"
FILE_NAME_INDEX = META_COLUMNS.index(FILE_NAME)
# Columns holding a value per commit or per file, which base_file_rows builds as dictionaries.
_DICTIONARY_COLUMNS = ["_hoodie_commit_time", "_hoodie_partition_path"]
# Internal column routing each incoming record: an upsert, a delete that respects ordering
# (``_hoodie_is_deleted``), or a hard delete (the delete operation).
OP_COLUMN = "_shoal_op"
OP_UPSERT, OP_SOFT_DELETE, OP_HARD_DELETE = 0, 1, 2


@dataclass(frozen=True)
class CowWriteSpec:
    """One bucket of a COW write: plain data only, so any executor can ship it."""

    base_uri: str
    instant: str
    partition_path: str
    file_id: str
    task_id: int
    old_base_path: str | None
    prev_commit: str
    ordering_field: str | None
    event_time_ordering: bool
    options: BaseFileOptions
    attempt: int = 0
    # Merge-on-read: the slice to rewrite (base merged with its logs) instead of the base file.
    old_slice: MorSliceSpec | None = None
    # With ``attempt``, names the write attempt in the file's write token (Spark fills both in).
    stage_id: int = 0
    # An insert that allows duplicates (Hudi's concat handle): the stored records are all kept
    # and the incoming ones added beside them, none matched by key.
    concat: bool = False
    # The table's Avro schema (without meta fields) when the write started: stored records
    # written before a schema change are carried over in it (write/file_schema.py).
    table_schema: str | None = None


def run_cow_write(spec: CowWriteSpec, records: pa.Table, storage: Storage | None = None) -> WriteStat:
    """Writes one base file for the bucket and returns its write stat."""
    started = time.monotonic()
    storage = storage or Storage(spec.base_uri)
    name = base_file_name(spec.file_id, write_token(spec.task_id, spec.stage_id, spec.attempt), spec.instant)
    path = f"{spec.partition_path}/{name}" if spec.partition_path else name
    rewrite = spec.old_base_path is not None or spec.old_slice is not None
    create_marker(storage, spec.instant, path, "MERGE" if rewrite else "CREATE")
    if rewrite and not spec.concat:
        records = last_record_per_key(records)
    ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
    replaced = None
    num_deletes_hit = 0
    stored: StoredFile | None = None
    copies: _CopyMerge | None = None
    if rewrite:
        stored = _in_table_schema(_read_old(spec, storage), spec.table_schema)
        old = stored.rows
        old_keys = old.column(RECORD_KEY)
        if spec.concat:
            replaced = pa.chunked_array([np.zeros(old.num_rows, dtype=bool)], pa.bool_())
        else:
            # Every membership test hashes the incoming side: a bucket's records are far fewer
            # than the rows of the file they update.
            replaced = pc.is_in(old_keys, value_set=records.column(RECORD_KEY))
        # The stored keys (and ordering values) that incoming records name.
        wanted = [c for c in (RECORD_KEY, spec.ordering_field) if c and c in old.column_names]
        matched = old.select(wanted).filter(replaced)
        matched_keys = matched.column(RECORD_KEY)
        if not spec.concat and len(pc.unique(matched_keys)) != len(matched_keys):
            event_time = spec.ordering_field if spec.event_time_ordering else None
            copies = _merge_copies(records, old, replaced, event_time)
            records, replaced = copies.records, copies.replaced
            ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
        elif spec.event_time_ordering and spec.ordering_field and not spec.concat:
            fresh = _drop_stale(records, matched, spec.ordering_field)
            if fresh.num_rows != records.num_rows:
                records = fresh
                ops = records.column(OP_COLUMN) if OP_COLUMN in records.column_names else None
                replaced = pc.is_in(old_keys, value_set=records.column(RECORD_KEY))
        # Stale records are gone, so matched keys they named count as neither updates nor deletes.
        num_deletes_hit = (
            copies.deletes(ops) if copies is not None else _count_deletes_hitting(records, ops, matched_keys)
        )
    is_upsert = None if ops is None else pc.equal(ops, OP_UPSERT)
    all_upserts = is_upsert is None or pc.all(is_upsert).as_py()
    upserts = records if all_upserts else records.filter(is_upsert)
    if OP_COLUMN in upserts.column_names:
        upserts = upserts.drop_columns([OP_COLUMN])
    new_rows = base_file_rows(upserts, spec.instant, spec.task_id, name, spec.partition_path)
    if stored is not None:
        new_rows = _dictionaries_like(new_rows, stored.rows.schema)
    num_updates = num_inserts = 0
    keys = None
    repeats = None
    if rewrite:
        if copies is not None:
            # Per written record, the stored copies it replaces (0: an insert).
            repeats = copies.per_record if all_upserts else copies.per_record[as_bools(is_upsert)]
            updated = pa.array(repeats > 0)
            num_updates = int(repeats.sum())
        else:
            updated = pc.is_in(upserts.column(RECORD_KEY), value_set=matched_keys)
            num_updates = pc.sum(updated).as_py() or 0
        num_inserts = upserts.num_rows - (pc.sum(updated).as_py() or 0)
        if num_deletes_hit == 0:
            inserted = upserts.column(RECORD_KEY).filter(pc.invert(updated))
            keys = _extended_key_footer(stored.footer if stored else {}, spec.options, inserted)
    else:
        num_inserts = upserts.num_rows
    mask = None if all_upserts or is_upsert is None else as_bools(is_upsert)
    out, size = _write_slice(
        storage, path, name, spec.options, stored, replaced, records, mask, new_rows, keys, repeats
    )
    return WriteStat(
        fileId=spec.file_id,
        path=path,
        prevCommit=spec.prev_commit if rewrite else NULL_COMMIT,
        numWrites=out.num_rows,
        numDeletes=num_deletes_hit,
        numUpdateWrites=num_updates,
        numInserts=num_inserts,
        totalWriteBytes=size,
        partitionPath=spec.partition_path,
        fileSizeInBytes=size,
        runtimeStats={
            "totalScanTime": 0,
            "totalUpsertTime": int((time.monotonic() - started) * 1000),
            "totalCreateTime": 0,
        },
    )


def last_record_per_key(records: pa.Table) -> pa.Table:
    """The last record of each key (in the order ``records`` come), as Hudi's merge handle keeps
    them: it loads a file group's incoming records into a map by record key, so a later record
    of a key replaces an earlier one before any of them meets the stored records. Only a write
    that does not combine its batch (``hoodie.combine.before.upsert=false``) repeats a key; a
    new file group (Hudi's create handle) and an insert that allows duplicates (its concat
    handle) write every record."""
    keys = records.column(RECORD_KEY)
    if records.num_rows <= 1 or _native.keys_distinct(contiguous(keys)):
        return records
    rows = pa.table({"key": keys, "row": pa.array(np.arange(records.num_rows, dtype=np.int64))})
    last = rows.group_by("key", use_threads=False).aggregate([("row", "max")]).column("row_max")
    return records.take(pa.array(np.sort(last.to_numpy())))


def _write_slice(
    storage: Storage,
    path: str,
    name: str,
    options: BaseFileOptions,
    stored: StoredFile | None,
    replaced: pa.ChunkedArray | None,
    records: pa.Table,
    is_upsert: np.ndarray | None,
    new_rows: pa.Table,
    keys: KeyFooterValues | None,
    repeats: np.ndarray | None = None,
) -> tuple[pa.Table, int]:
    """Writes the new slice's base file and returns its rows and size. A merge into a base
    file lays the records out in place and copies the column chunks no update changed; when it
    cannot (or for a new file group, or a merge-on-read slice with logs), the kept rows and then
    the new ones are written whole. ``repeats``: per new row, how many stored copies of its key
    it replaces, when the file holds a key more than once (each copy is written merged)."""
    plain = stored.plain if stored is not None else []
    if stored is not None and stored.raw is not None and replaced is not None:
        target = row_group_rows(stored.rows, options)
        layout = merge_in_place(
            stored.rows, stored.group_rows, replaced, records, is_upsert, new_rows, name, target
        )
        # A write that adds columns leaves them in every file it writes (the commit's schema),
        # even one that no new record reached.
        if layout is not None and not set(new_rows.column_names) <= set(layout.rows.column_names):
            layout = None
        if layout is not None:
            groups = [(g.start, g.num_rows, g.sources) for g in layout.row_groups]
            size = write_spliced_base_file(
                storage, path, layout.rows, groups, stored.raw, options, keys, plain
            )
            if size is not None:
                return layout.rows, size
            return layout.rows, write_base_file(storage, path, layout.rows, options, keys, plain)
    if repeats is not None:
        new_rows = new_rows.take(pa.array(np.repeat(np.arange(new_rows.num_rows), np.maximum(repeats, 1))))
    out = new_rows
    if stored is not None and replaced is not None:
        kept = _filter_rows(stored.rows, pc.invert(replaced))
        if kept.num_rows:
            kept = kept.add_column(FILE_NAME_INDEX, FILE_NAME, constant_column(name, kept.num_rows))
            out = pa.concat_tables([kept, new_rows], promote_options="permissive")
    return out, write_base_file(storage, path, out, options, keys, plain)


def _filter_rows(table: pa.Table, mask: pa.ChunkedArray) -> pa.Table:
    """``table.filter(mask)``, filtering columns that share their data once (a record key field
    taken from the decoded record keys is the same array)."""
    first: dict[tuple[object, ...], int] = {}
    source = []
    for column in table.columns:
        identity = (column.type, tuple((c.offset, len(c), _addresses(c)) for c in column.chunks))
        source.append(first.setdefault(identity, len(first)))
    if len(first) == table.num_columns:
        return table.filter(mask)
    unique = [table.column(source.index(i)) for i in range(len(first))]
    filtered = pa.Table.from_arrays(unique, names=[str(i) for i in range(len(unique))]).filter(mask)
    return pa.Table.from_arrays([filtered.column(i) for i in source], schema=table.schema)


def _addresses(array: pa.Array) -> tuple[int, ...]:
    own = tuple(b.address if b else 0 for b in array.buffers())
    # A dictionary array's buffers are its indices only.
    return own + _addresses(array.dictionary) if isinstance(array, pa.DictionaryArray) else own


@dataclass(frozen=True)
class StoredFile:
    """What a merge reads of the slice it replaces."""

    # The records the new slice carries over, without ``_hoodie_file_name`` (it is rewritten)
    # and with the per-file columns as dictionaries, like the new rows (base_file_rows).
    rows: pa.Table
    # When the slice is the old base file alone: its footer metadata, the columns it stores
    # without a dictionary, and (for a codec the splicing writer has) its bytes as a uint8
    # array and the rows of each of its row groups.
    footer: dict[bytes, bytes]
    plain: list[str]
    raw: pa.Array | None = None
    group_rows: list[int] = field(default_factory=list)


def _read_old(spec: CowWriteSpec, storage: Storage) -> StoredFile:
    """Reads the slice a merge replaces (see StoredFile)."""
    if spec.old_slice is not None:
        old = read_mor_slice(spec.old_slice, storage).drop_columns([FILE_NAME])
        for column in _DICTIONARY_COLUMNS:
            i = old.column_names.index(column)
            old = old.set_column(i, column, pc.dictionary_encode(old.column(column)))
        return StoredFile(old, {}, [])
    assert spec.old_base_path is not None
    # For a codec the splicing writer has, the whole file, which the merge reads nearly all of:
    # the chunks it keeps are then copied from memory.
    replaced = (
        read_replaced_file(storage, spec.old_base_path) if spec.options.compression in SPLICE_CODECS else None
    )
    source = replaced.reader() if replaced is not None else storage.open_input_file(spec.old_base_path)
    with damaged_parquet(spec.old_base_path), source as f:
        metadata = replaced.metadata if replaced is not None else pq.read_metadata(f)
        # Read as dictionaries, these columns decode to indices only and write back the same way:
        # the per-file meta columns, and string columns of one value (a partition field).
        dictionaries = _DICTIONARY_COLUMNS + _constant_string_columns(metadata, spec.ordering_field)
        pf = pq.ParquetFile(f, metadata=metadata, read_dictionary=dictionaries)
        names = [c for c in pf.schema_arrow.names if c != FILE_NAME]
        # A record key field holds the record keys themselves (simple key generators): its column
        # chunks are then byte for byte those of _hoodie_record_key, which is decoded once. The
        # comparison reads both chunks: cheap from a local disk or memory, not from an object store.
        local = replaced is not None or isinstance(storage.fs, pafs.LocalFileSystem)
        twins = _copies_of_record_keys(f, metadata, pf.schema_arrow) if local else []
        old = pf.read(columns=[c for c in names if c not in twins])
        for name in twins:
            field_ = pf.schema_arrow.field(name)
            old = old.add_column(names.index(name), field_, old.column(RECORD_KEY))
        if replaced is None:
            return StoredFile(old, metadata.metadata or {}, plain_columns(metadata))
        return StoredFile(
            old, metadata.metadata or {}, plain_columns(metadata), replaced.raw, replaced.group_rows
        )


def _in_table_schema(stored: StoredFile, table_schema: str | None) -> StoredFile:
    """``stored`` with its records in the table's schema, when the file was written before a
    later write added a column or widened a type: the new file is written whole in it, even by
    a write whose own records do not carry those columns (deletes)."""
    target = base_file_schema(table_schema)
    if target is None:
        return stored
    # The stored rows lack _hoodie_file_name: every merge writes it anew.
    target = target.remove(target.get_field_index(FILE_NAME))
    if written_schema(stored.rows.schema, target) is None:
        return stored
    return StoredFile(in_schema(stored.rows, target), stored.footer, stored.plain)


def _copies_of_record_keys(f: pa.NativeFile, metadata: pq.FileMetaData, schema: pa.Schema) -> list[str]:
    """Top-level columns of the file whose every column chunk is byte-identical to that of
    ``_hoodie_record_key`` (so they decode to the same values)."""
    # Empty chunks all look alike: a file without rows has no column to share.
    if RECORD_KEY not in schema.names or metadata.num_rows == 0:
        return []
    key_type = schema.field(RECORD_KEY).type
    leaf = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    if RECORD_KEY not in leaf:
        return []
    candidates = [
        c.name
        for c in schema
        if c.name not in (RECORD_KEY, FILE_NAME) and c.type == key_type and c.name in leaf
    ]
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        key_chunk = group.column(leaf[RECORD_KEY])
        same_size = [
            c
            for c in candidates
            if group.column(leaf[c]).total_compressed_size == key_chunk.total_compressed_size
        ]
        if not same_size:
            return []
        key_bytes = _chunk_bytes(f, key_chunk)
        candidates = [c for c in same_size if _chunk_bytes(f, group.column(leaf[c])).equals(key_bytes)]
    return candidates


def _chunk_bytes(f: pa.NativeFile, chunk: pq.ColumnChunkMetaData) -> pa.Buffer:
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and chunk.dictionary_page_offset:
        start = min(start, chunk.dictionary_page_offset)
    f.seek(start)
    return f.read_buffer(chunk.total_compressed_size)


def _constant_string_columns(metadata: pq.FileMetaData, ordering_field: str | None) -> list[str]:
    """Top-level string data columns whose statistics say every row holds the same value (the
    meta columns and the ordering field, which the merge compares, stay plain)."""
    schema = metadata.schema.to_arrow_schema()
    strings = (pa.string(), pa.large_string())
    candidates = {
        f.name
        for f in schema
        if f.type in strings and f.name not in META_COLUMNS and f.name != ordering_field
    }
    values: dict[str, object] = {}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            if name not in candidates:
                continue
            stats = chunk.statistics
            constant = (
                stats is not None
                and stats.has_min_max
                and stats.has_null_count
                and stats.null_count == 0
                and stats.min == stats.max
                and values.setdefault(name, stats.min) == stats.min
            )
            if not constant:
                candidates.discard(name)
    return sorted(candidates) if metadata.num_row_groups else []


def _dictionaries_like(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with the columns ``schema`` holds as dictionaries dictionary-encoded too, so the
    two concatenate (their dictionaries are unified when the file is written)."""
    for i, f in enumerate(rows.schema):
        if pa.types.is_dictionary(f.type) or f.name not in schema.names:
            continue
        target = schema.field(f.name).type
        if pa.types.is_dictionary(target) and target.value_type == f.type:
            rows = rows.set_column(i, f.with_type(target), pc.dictionary_encode(rows.column(i)).cast(target))
    return rows


def _extended_key_footer(
    old_footer: dict[bytes, bytes], opts: BaseFileOptions, inserted: pa.ChunkedArray
) -> KeyFooterValues | None:
    """The new file's record-key footer entries from the old file's, for a merge that removed
    none of its keys (the new keys are the old ones and ``inserted``); None when they have to be
    computed from the records (the old footer lacks them, or its filter cannot be reused)."""
    value = old_footer.get(BLOOM_FILTER_KEY.encode())
    lo, hi = old_footer.get(MIN_RECORD_KEY.encode()), old_footer.get(MAX_RECORD_KEY.encode())
    if value is None or lo is None or hi is None:
        return None
    if order_sensitive(lo.decode(), hi.decode()):
        # Bounds whose order depends on the writer (byte order before shoal wrote UTF-16's, as
        # Hudi does): the new ones are computed from the records.
        return None
    type_code = old_footer.get(BLOOM_FILTER_TYPE_KEY.encode())
    config = BloomConfig(opts.bloom_type, opts.bloom_num_entries, opts.bloom_fpp, opts.bloom_max_entries)
    new_keys = inserted.combine_chunks()
    bloom = extended_footer(value.decode(), type_code.decode() if type_code else None, config, new_keys)
    if bloom is None:
        return None
    min_key, max_key = lo.decode(), hi.decode()
    bounds = _native.key_bounds(new_keys) if len(new_keys) else None
    if bounds is not None:
        # Not Python's min/max: the footer is in Java's UTF-16 order, not code point order.
        both = _native.key_bounds(pa.array([min_key, max_key, *bounds], pa.string()))
        assert both is not None
        min_key, max_key = both
    return KeyFooterValues(min_key, max_key, bloom)


def stale_ordering(incoming: pa.Array | pa.ChunkedArray, stored: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Event-time ordering, pairwise: whether each incoming ordering value loses to the stored
    one. Ties go to the incoming record (Hudi's ``DefaultHoodieRecordPayload``), and a null
    incoming value never beats a stored non-null one; a null stored value always loses."""
    if stored.type != incoming.type:
        stored = stored.cast(incoming.type)
    stale = pc.fill_null(pc.greater(java_ordered(stored), java_ordered(incoming)), False)
    return pc.or_(stale, pc.and_(pc.is_null(incoming), pc.is_valid(stored)))


def _always_applies(ops: pa.ChunkedArray, ordering: pa.ChunkedArray) -> pa.ChunkedArray:
    """Incoming records that no stored ordering value beats: hard deletes, and soft deletes
    without an ordering value. A merge-on-read log holds the latter as Java's natural-order
    delete (ordering value ``0``), which every reader applies; a copy-on-write merge applies
    it too, so the two table types keep the same rows."""
    hard = pc.equal(ops, OP_HARD_DELETE)
    return pc.or_(hard, pc.and_(pc.equal(ops, OP_SOFT_DELETE), pc.is_null(ordering)))


def _drop_stale(records: pa.Table, old: pa.Table, ordering_field: str) -> pa.Table:
    """Event-time ordering: incoming upserts and soft deletes whose ordering value is lower than
    the stored record's lose and are dropped; hard deletes, and soft deletes without an ordering
    value, always apply. ``old`` holds the
    stored records whose keys come in, each key once (_merge_copies handles a key stored
    twice): each record looks its stored row up by position."""
    if ordering_field not in old.column_names or ordering_field not in records.column_names:
        return records  # hard deletes carry no ordering value: they always apply
    position = pc.index_in(records.column(RECORD_KEY), value_set=old.column(RECORD_KEY))
    old_ord = old.column(ordering_field).take(position)
    stale = pc.and_(pc.is_valid(position), stale_ordering(records.column(ordering_field), old_ord))
    if OP_COLUMN in records.column_names:
        stale = pc.and_(
            stale, pc.invert(_always_applies(records.column(OP_COLUMN), records.column(ordering_field)))
        )
    if not pc.any(stale).as_py():
        return records
    return records.filter(pc.invert(stale))


@dataclass(frozen=True)
class _CopyMerge:
    """A merge into a file holding a key more than once (an insert that kept duplicates): as in
    Hudi's merge handle, every stored copy merges with the incoming record of its key on its
    own, so under event-time ordering one copy may lose while another wins."""

    # The incoming records that take effect: one that loses to every copy of its key drops out.
    records: pa.Table
    # Per stored row, whether an incoming record replaces (updates or deletes) it.
    replaced: pa.ChunkedArray
    # Per record of ``records``, how many stored copies it replaces.
    per_record: np.ndarray

    def deletes(self, ops: pa.ChunkedArray | None) -> int:
        """Stored copies the deletes among the records remove."""
        if ops is None:
            return 0
        return int(self.per_record[~as_bools(pc.equal(ops, OP_UPSERT))].sum())


def _merge_copies(
    records: pa.Table, old: pa.Table, hit: pa.ChunkedArray, event_time: str | None
) -> _CopyMerge:
    """Decides, per stored copy that an incoming record names (``hit``), whether the record
    replaces it (see _CopyMerge). ``event_time``: the ordering field under event-time ordering,
    None under commit-time ordering (the incoming record always wins)."""
    hit_rows = np.flatnonzero(as_bools(hit))
    position = pc.index_in(
        old.column(RECORD_KEY).take(pa.array(hit_rows)), value_set=records.column(RECORD_KEY)
    )
    record_of = np.asarray(position.to_numpy(zero_copy_only=False), dtype=np.int64)
    wins = np.ones(len(hit_rows), dtype=bool)
    ordering = event_time
    if ordering is not None and ordering in old.column_names and ordering in records.column_names:
        picked = pa.array(record_of)
        stale = stale_ordering(
            records.column(ordering).take(picked), old.column(ordering).take(pa.array(hit_rows))
        )
        if OP_COLUMN in records.column_names:
            applies = _always_applies(records.column(OP_COLUMN), records.column(ordering)).take(picked)
            stale = pc.and_(stale, pc.invert(applies))
        wins = ~as_bools(stale)
    n = records.num_rows
    per_record = np.bincount(record_of[wins], minlength=n)
    named = np.bincount(record_of, minlength=n) > 0
    replaced = np.zeros(old.num_rows, dtype=bool)
    replaced[hit_rows[wins]] = True
    effective = ~named | (per_record > 0)
    if not effective.all():
        records, per_record = records.filter(pa.array(effective)), per_record[effective]
    return _CopyMerge(records, pa.chunked_array([replaced], pa.bool_()), per_record)


def _count_deletes_hitting(records: pa.Table, ops: pa.ChunkedArray | None, old_keys: pa.ChunkedArray) -> int:
    if ops is None:
        return 0
    deleted = records.filter(pc.not_equal(ops, OP_UPSERT)).column(RECORD_KEY)
    if len(deleted) == 0:
        return 0
    return int(pc.sum(pc.is_in(deleted, value_set=old_keys)).as_py() or 0)
