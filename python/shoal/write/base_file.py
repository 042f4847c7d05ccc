"""Writing parquet base files the way Hudi does: meta columns first, and in the footer the bloom
filter of the record keys, the min/max record key and the Avro schema (HUDI_FORMAT §5-6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal import _native
from shoal.fs.storage import Storage
from shoal.index.footer import BLOOM_FILTER_KEY, BLOOM_FILTER_TYPE_KEY, MAX_RECORD_KEY, MIN_RECORD_KEY
from shoal.write.schema import META_COLUMNS


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
    seq = pc.cast(pa.array(np.arange(start_seqno, start_seqno + n, dtype=np.int64)), pa.string())
    seqno = pc.binary_join_element_wise(pa.scalar(f"{instant}_{task_id}"), seq, "_")
    user = [c for c in data.column_names if c not in META_COLUMNS]
    columns = [
        pa.repeat(pa.scalar(instant), n),
        seqno,
        data.column("_hoodie_record_key"),
        data.column("_hoodie_partition_path"),
        pa.repeat(pa.scalar(file_name), n),
    ]
    names = list(META_COLUMNS)
    return pa.Table.from_arrays(columns + [data.column(c) for c in user], names=names + user)


def set_file_name(data: pa.Table, file_name: str) -> pa.Table:
    idx = data.column_names.index("_hoodie_file_name")
    return data.set_column(idx, "_hoodie_file_name", pa.repeat(pa.scalar(file_name), data.num_rows))


def avro_schema_for(schema: pa.Schema, table_name: str) -> str:
    """The Avro schema Spark/Hudi would record for ``schema`` (record ``<table>_record``)."""
    return _native.arrow_to_avro_schema(schema, f"{table_name}_record", f"hoodie.{table_name}")


def write_base_file(storage: Storage, path: str, data: pa.Table, opts: BaseFileOptions) -> int:
    """Writes ``data`` (meta columns included) to ``path``; returns the file size in bytes."""
    keys = data.column("_hoodie_record_key").combine_chunks()
    meta: dict[str, str] = {}
    if len(keys):
        bounds = pc.min_max(keys)
        meta[MIN_RECORD_KEY] = bounds["min"].as_py()
        meta[MAX_RECORD_KEY] = bounds["max"].as_py()
        meta[BLOOM_FILTER_KEY] = _native.bloom_footer_for_keys(
            keys, opts.bloom_num_entries, opts.bloom_fpp, opts.bloom_max_entries, opts.bloom_type
        )
        if opts.bloom_type == "DYNAMIC_V0":
            meta[BLOOM_FILTER_TYPE_KEY] = "DYNAMIC_V0"
    meta["parquet.avro.schema"] = avro_schema_for(data.schema, opts.table_name)
    meta["writer.model.name"] = "avro"
    avg_row = max(1, data.nbytes // max(1, data.num_rows))
    storage.makedirs(path.rsplit("/", 1)[0] if "/" in path else "")
    with (
        storage.fs.open_output_stream(storage.full_path(path)) as out,
        pq.ParquetWriter(
            out,
            data.schema.remove_metadata(),
            compression=None if opts.compression == "none" else opts.compression,
            data_page_size=opts.page_size,
            # No ARROW:schema blob: the footer carries what Hudi readers look for, nothing else.
            store_schema=False,
        ) as writer,
    ):
        writer.write_table(data, row_group_size=max(1, opts.row_group_bytes // avg_row))
        writer.add_key_value_metadata(meta)
    return storage.size(path)
