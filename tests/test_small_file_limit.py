"""A small-file limit at or above the maximum file size, which Hudi accepts: every base file below
the limit is a candidate, and takes inserts up to the maximum size (Hudi's ``UpsertPartitioner``:
``(max file size - size) / average record size`` records); a file already at or above the
maximum takes none, so the inserts go to a new file group."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "ts", "v"]


def _batch(ids: range) -> pa.Table:
    return pa.table(
        {"id": [f"k{i:06d}" for i in ids], "ts": [1] * len(ids), "v": [f"value-{i}" * 3 for i in ids]}
    )


def _base_files(t: shoal.Table) -> list[Path]:
    return sorted(Path(t.path).glob("*.parquet"))


def _rows(data: pa.Table) -> list[dict]:
    return rows_by(data, COLUMNS, ["id"])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_limit_equal_to_the_maximum_pads_files_up_to_it(tmp_path, table_type):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    first, second = _batch(range(2000)), _batch(range(2000, 2100))
    t.insert(first)
    (stored,) = _base_files(t)
    size = str(stored.stat().st_size * 4)
    t.insert(second, options={"hoodie.parquet.max.file.size": size, "hoodie.parquet.small.file.limit": size})
    assert len(t.file_slices()) == 1, "the file below the limit (and the maximum) takes the inserts"
    expected = _rows(pa.concat_tables([first, second]))
    assert _rows(t.read(columns=COLUMNS)) == expected
    assert _rows(hudi_rs_read(t.path)) == expected


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_file_below_the_limit_but_at_the_maximum_takes_no_inserts(tmp_path, table_type):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    first, second = _batch(range(2000)), _batch(range(2000, 2100))
    t.insert(first)
    (stored,) = _base_files(t)
    size = stored.stat().st_size
    options = {
        "hoodie.parquet.max.file.size": str(size // 2),
        "hoodie.parquet.small.file.limit": str(size * 2),
    }
    t.insert(second, options=options)
    assert len(t.file_slices()) == 2, "the full file keeps its records; the inserts start a new file group"
    assert stored.exists() and len(_base_files(t)) == 2
    expected = _rows(pa.concat_tables([first, second]))
    assert _rows(t.read(columns=COLUMNS)) == expected
    assert _rows(hudi_rs_read(t.path)) == expected
