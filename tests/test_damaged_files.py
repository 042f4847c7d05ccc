"""A damaged base file (cut off, or with corrupt pages) is a CorruptDataError naming the file,
for reads, writes that merge into it and compaction alike, not Arrow's own error; a write that
fails on it leaves the timeline as it was."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.fs.damage import damaged_parquet


def _data(ids: range, v: int = 0) -> pa.Table:
    return pa.table({"id": list(ids), "s": [f"{i}-{v}" * 5 for i in ids], "ts": [v] * len(ids)})


def _cut(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(100)


def _flip(path: str) -> None:
    data = bytearray(Path(path).read_bytes())
    for i in range(100, len(data) // 2, 7):  # the pages, before the footer
        data[i] ^= 0x55
    Path(path).write_bytes(bytes(data))


def _table(tmp_path, table_type: str, codec: str) -> tuple[shoal.Table, str]:
    t = shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        ordering_field="ts",
        options={"hoodie.parquet.compression.codec": codec},
    )
    t.upsert(_data(range(1000)))
    (base,) = glob.glob(os.path.join(t.path, "*.parquet"))
    return t, base


def _timeline(t: shoal.Table) -> list[str]:
    return sorted(os.listdir(os.path.join(t.path, ".hoodie")))


@pytest.mark.parametrize("damage", [_cut, _flip])
@pytest.mark.parametrize("codec", ["snappy", "lz4"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_damaged_base_file_is_a_corrupt_data_error(tmp_path, table_type, codec, damage):
    t, base = _table(tmp_path, table_type, codec)
    damage(base)
    name = os.path.basename(base)
    reads = [
        lambda: t.read(),
        lambda: t.read(columns=["id"]),
        lambda: t.read_batches().read_all(),
        lambda: t.read_incremental("0"),
    ]
    for read in reads:
        with pytest.raises(shoal.CorruptDataError, match=name):
            read()
    before = _timeline(t)
    with pytest.raises(shoal.CorruptDataError, match=name):
        t.upsert(_data(range(5), 1))
    assert _timeline(t) == before


@pytest.mark.parametrize("damage", [_cut, _flip])
def test_compacting_a_damaged_base_file_is_a_corrupt_data_error(tmp_path, damage):
    t, base = _table(tmp_path, "MERGE_ON_READ", "snappy")
    t.upsert(_data(range(5), 1))  # to a log file of the base file's group
    damage(base)
    with pytest.raises(shoal.CorruptDataError, match=os.path.basename(base)):
        t.compact()


def test_storage_errors_stay_what_they_are(tmp_path):
    with pytest.raises(PermissionError), damaged_parquet("x.parquet"):
        raise PermissionError(13, "Permission denied")
    with pytest.raises(FileNotFoundError), damaged_parquet("x.parquet"):
        raise FileNotFoundError(2, "No such file")
    with pytest.raises(OSError, match="network"), damaged_parquet("x.parquet"):
        raise OSError("network unreachable")


def test_spark_reads_of_a_damaged_base_file_fail_naming_it(spark, tmp_path):
    """Copy-on-write: planning reads the footer, on the driver (a CorruptDataError). Merge-on-
    read: shoal's read tasks decode the slice when the DataFrame is computed, where Spark reports
    the task's failure, which names the error and the file."""
    import shoal.spark

    cow, cow_base = _table(tmp_path / "cow", "COPY_ON_WRITE", "snappy")
    _cut(cow_base)
    with pytest.raises(shoal.CorruptDataError, match=os.path.basename(cow_base)):
        shoal.spark.read(spark, cow.path).collect()
    mor, mor_base = _table(tmp_path / "mor", "MERGE_ON_READ", "snappy")
    mor.upsert(_data(range(5), 1))  # a log file: the slice is read by shoal's tasks
    _cut(mor_base)
    with pytest.raises(Exception, match=f"CorruptDataError: {os.path.basename(mor_base)}"):
        shoal.spark.read(spark, mor.path).collect()
