"""The Rust core's base-file decoder (``shoal._native.BaseFileReader``) against pyarrow: the same
rows and types for the base files Apache Hudi wrote and for shoal's own, typed errors for bad
files, and the fallback to pyarrow where the core cannot give the same columns."""

from __future__ import annotations

import importlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal import _native
from shoal.errors import CorruptDataError, UnsupportedError
from shoal.fs.storage import Storage
from shoal.read.decode import native_batches
from shoal.read.snapshot import SliceReadSpec, read_base_file, read_base_slice
from shoal.write.replaced_file import read_replaced_file
from tests.test_fixtures import ALL_FIXTURES

# The module (``shoal.spark.read`` on the package is the function); it needs pyspark.
pytest.importorskip("pyspark")
spark_read = importlib.import_module("shoal.spark.read")


def _native_table(path: Path, columns: list[str] | None = None, batch_size: int = 65536) -> pa.Table:
    reader = _native.BaseFileReader(str(path), columns, batch_size)
    return pa.Table.from_batches(list(reader), schema=reader.schema)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_hudi_base_files_decode_as_pyarrow_decodes_them(fixture_table, name):
    files = sorted(Path(fixture_table(name)).rglob("*.parquet"))
    files = [f for f in files if ".hoodie" not in f.parts]
    assert files or name.endswith("_empty")
    for f in files:
        theirs = pq.read_table(f)
        ours = _native_table(f)
        # Types and values alike: Spark reads of these files go through the core.
        assert ours.schema.equals(theirs.schema), f
        assert ours.equals(theirs), f
        # Table.read's: exactly pyarrow's table, nested names and metadata included.
        read = read_base_file(Storage(str(f.parent)), f.name)
        assert read.equals(theirs, check_metadata=True), f
        # The same bytes in memory (how a compaction reads the base file it replaces).
        in_memory = read_replaced_file(Storage(str(f.parent)), f.name)
        reader = _native.BaseFileReader.from_bytes(in_memory.raw)
        assert pa.Table.from_batches(list(reader), schema=reader.schema).equals(theirs), f
        assert in_memory.rows().equals(theirs, check_metadata=True), f


def test_a_table_written_by_shoal_decodes_in_batches_with_projection(tmp_path):
    table = shoal.Table.create(tmp_path / "t", "t", record_key="id", partition_by="part")
    n = 5000
    table.bulk_insert(
        pa.table(
            {
                "id": [f"id-{i:05d}" for i in range(n)],
                "part": ["a"] * n,
                "v": pa.array([None if i % 7 == 0 else i * 0.5 for i in range(n)]),
                "day": pa.array([i % 365 for i in range(n)], pa.int32()).cast(pa.date32()),
            }
        )
    )
    (sl,) = table.file_slices()
    path = table.storage.full_path(sl.base_file.path)
    theirs = pq.read_table(path)
    batches = list(_native.BaseFileReader(path, None, 1024))
    assert [b.num_rows for b in batches] == [1024] * 4 + [n - 4096]
    assert pa.Table.from_batches(batches).equals(theirs)
    # File order, whatever order the names come in; a name the file lacks is skipped.
    projected = _native_table(Path(path), ["v", "id", "no_such_column"])
    assert projected.schema.names == ["id", "v"]
    assert projected.equals(theirs.select(["id", "v"]))


def test_bad_files_are_typed_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.parquet"):
        _native.BaseFileReader(str(tmp_path / "missing.parquet"))
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 this is not a parquet file PAR1")
    with pytest.raises(CorruptDataError):
        _native.BaseFileReader(str(junk))
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), good)
    data = bytearray(good.read_bytes())
    data[4:300] = b"\xa5" * 296  # the pages, under an intact footer
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError):
        list(_native.BaseFileReader(str(damaged)))
    with pytest.raises(Exception, match="batch size must be positive"):
        _native.BaseFileReader(str(good), None, 0)
    in_memory = pa.array(bytearray(data), pa.uint8())
    with pytest.raises(CorruptDataError):
        list(_native.BaseFileReader.from_bytes(in_memory))
    with pytest.raises(CorruptDataError):
        _native.BaseFileReader.from_bytes(pa.array(b"PAR1 junk PAR1", pa.uint8()))
    with pytest.raises(shoal.InvalidArgumentError, match="must be uint8"):
        _native.BaseFileReader.from_bytes(pa.array([1, 2, 3], pa.int64()))
    with pytest.raises(shoal.InvalidArgumentError, match="hold nulls"):
        _native.BaseFileReader.from_bytes(pa.array([1, None], pa.uint8()))


def _slice(path: Path, columns=None, filters=()) -> tuple[SliceReadSpec, Storage]:
    storage = Storage(str(path.parent))
    return SliceReadSpec(str(path.parent), "", "f", path.name, (), columns, tuple(filters)), storage


def test_a_codec_the_core_lacks_is_read_with_pyarrow(tmp_path):
    rows = pa.table({"k": [f"k{i}" for i in range(3000)], "v": list(range(3000))})
    path = tmp_path / "lz4.parquet"
    pq.write_table(rows, path, compression="lz4")
    with pytest.raises(UnsupportedError, match="LZ4"):
        _native.BaseFileReader(str(path))
    spec, storage = _slice(path, ("v",), [("v", ">=", 2990)])
    assert native_batches(storage, path.name, pq.read_schema(path), ["v"], 1024) is None
    pieces = list(spark_read.iter_base_slice(spec, storage))
    assert pa.concat_tables(pieces).column("v").to_pylist() == list(range(2990, 3000))
    assert read_replaced_file(storage, path.name).rows().equals(rows)


def test_a_column_the_core_types_otherwise_is_read_with_pyarrow(tmp_path):
    # pyarrow keeps a date64 column's Arrow type in the file and reads it back as date32; the
    # core restores date64. Such a file is read with pyarrow, so rows keep pyarrow's types.
    day = 86_400_000
    rows = pa.table({"d": pa.array([day, 2 * day, 3 * day], pa.date64()), "v": [1, 2, 3]})
    path = tmp_path / "date64.parquet"
    pq.write_table(rows, path)
    schema = pq.read_schema(path)
    assert _native.BaseFileReader(str(path)).schema.field("d").type == pa.date64()
    assert schema.field("d").type == pa.date32()
    spec, storage = _slice(path)
    assert native_batches(storage, path.name, schema, None, 1024) is None
    # Without the differing column the core reads the file.
    assert native_batches(storage, path.name, schema, ["v"], 1024) is not None
    assert read_replaced_file(storage, path.name).rows().equals(pq.read_table(path))
    streamed = pa.concat_tables(spark_read.iter_base_slice(spec, storage))
    assert streamed.equals(pq.read_table(path))
    assert read_base_slice(spec, storage).equals(pq.read_table(path))


def test_local_base_slices_stream_through_the_core(tmp_path):
    table = shoal.Table.create(tmp_path / "t", "t", record_key="id")
    table.bulk_insert(pa.table({"id": [f"{i:04d}" for i in range(2000)], "v": list(range(2000))}))
    job = spark_read.plan_read(table.path, ["v"], [("id", "<", "0100")])
    (task,) = job.tasks
    (spec,) = task.changes
    schema = pq.read_schema(table.storage.full_path(spec.base_file_path))
    reader = native_batches(table.storage, spec.base_file_path, schema, ["v", "id"], 1024)
    assert isinstance(reader, _native.BaseFileReader)
    streamed = pa.concat_tables(spark_read.iter_task(job, task, table.storage))
    assert streamed.column_names == ["v"]
    assert streamed.column("v").to_pylist() == list(range(100))


def test_local_reads_through_the_core_are_what_pyarrow_reads(tmp_path, monkeypatch):
    """``read_base_slice`` (``Table.read``'s task): with the core, the same table as pyarrow
    gives, column order and schema metadata (the footer's key-value pairs) included."""
    table = shoal.Table.create(tmp_path / "t", "t", record_key="id")
    n = 3000
    table.bulk_insert(pa.table({"id": [f"{i:05d}" for i in range(n)], "v": list(range(n)), "w": [1.5] * n}))
    # Two filters on one column outside the projection: it is read once.
    filters = [("v", ">=", 2990), ("v", "<", 2995)]
    (projected,) = spark_read.plan_read(table.path, ["w", "id"], filters).tasks[0].changes
    whole = SliceReadSpec(projected.base_uri, "", projected.file_id, projected.base_file_path)
    schema = pq.read_schema(table.storage.full_path(whole.base_file_path))
    assert native_batches(table.storage, whole.base_file_path, schema, None, 1024) is not None
    with_core = [read_base_slice(s, table.storage) for s in (projected, whole)]
    monkeypatch.setattr("shoal.read.snapshot.native_batches", lambda *a: None)
    without = [read_base_slice(s, table.storage) for s in (projected, whole)]
    for ours, theirs in zip(with_core, without, strict=True):
        assert ours.equals(theirs, check_metadata=True)
    assert with_core[0].column_names == ["w", "id"]
    assert with_core[0].num_rows == 5
    streamed = pa.concat_tables(spark_read.iter_base_slice(projected, table.storage))
    assert streamed.equals(with_core[0])
    assert with_core[1].schema.metadata and b"hoodie_min_record_key" in with_core[1].schema.metadata
