"""Record-size sampling through the bindings; expected sizes are worked out by hand from the model
in rust/sizing.rs (fixed width = byte width, variable width = length + 4, null = 1, nested sums)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal import _native
from shoal.errors import InvalidArgumentError


def test_every_row_of_a_mixed_batch():
    batch = pa.record_batch(
        {
            "i": pa.array([1, None], pa.int32()),
            "s": pa.array(["hello", "é"]),  # "é" is 2 UTF-8 bytes
            "l": pa.array([[1, 2], []], pa.list_(pa.int64())),
            "st": pa.array(
                [{"a": True, "b": 1.5}, None], pa.struct([("a", pa.bool_()), ("b", pa.float64())])
            ),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int16())),
        }
    )
    # row 0: 4 + (5+4) + (4+8+8) + (1+8) + (4 + (1+4) + 2) = 53
    # row 1: 1 + (2+4) + 4       + 1     + 1                = 13
    assert _native.estimate_record_size(batch, every=1) == (33.0, 2)


def test_default_stride_samples_one_row_in_a_hundred():
    # Row r holds r % 10 bytes of string: rows 0, 100, 200 measure 0 + 4 each; a slice starting
    # at row 5 measures original rows 5, 105, 205 at 5 + 4 each.
    batch = pa.record_batch({"s": ["x" * (r % 10) for r in range(250)]})
    assert _native.estimate_record_size(batch) == (4.0, 3)
    assert _native.estimate_record_size(batch.slice(5), every=100) == (9.0, 3)
    assert _native.estimate_record_size(batch.slice(0, 0)) == (0.0, 0)
    with pytest.raises(InvalidArgumentError):
        _native.estimate_record_size(batch, every=0)


def test_file_sizing_estimate_follows_the_whole_batch_in_on_disk_bytes():
    """The estimate is the sampler's in-memory size of all rows, scaled to parquet bytes by a
    strided sample: uniform data gives the parquet size per row of the data itself; data whose
    rows grow past the strided sample's reach is still seen by the sampler."""
    import pyarrow.parquet as pq

    from shoal.write.sizing import estimate_record_size, sampled_size

    rng = range(50_000)
    uniform = pa.table({"k": [f"key-{i:08d}" for i in rng], "v": pa.array(list(rng), pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(uniform, sink, compression="snappy")
    per_row = sink.getvalue().size / uniform.num_rows
    estimate = estimate_record_size(uniform, "snappy")
    assert 0.8 * per_row <= estimate <= 1.25 * per_row
    # The last tenth of the rows carries 1 KiB payloads (distinct, so no dictionary folds them):
    # the estimate grows with the sampler's view.
    grown = uniform.append_column("p", pa.array(["" if i < 45_000 else f"{i:08d}" * 128 for i in rng]))
    assert sampled_size(grown) > sampled_size(uniform) + 90
    assert estimate_record_size(grown, "none") > estimate_record_size(uniform, "none") + 50
