"""hudi-rs (the ``hudi`` package) as the reference reader in tests."""

from __future__ import annotations

import pyarrow as pa
from hudi import HudiTableBuilder


def hudi_rs_read(path: str, as_of: str | None = None, read_optimized: bool = False) -> pa.Table:
    """The snapshot (or read-optimized view) hudi-rs returns for the table at ``path``."""
    builder = HudiTableBuilder.from_base_uri(path)
    if read_optimized:
        builder = builder.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    table = builder.build()
    if as_of is None:
        batches = table.read()
    else:
        from hudi import HudiReadOptions

        batches = table.read(HudiReadOptions().with_as_of_timestamp(as_of))
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def rows_by(table: pa.Table, columns: list[str], sort_by: list[str]) -> list[dict]:
    """Rows of ``columns`` sorted by ``sort_by``, as Python dicts, for order-free comparison."""
    if table.num_rows == 0:
        return []
    return table.select(columns).sort_by([(c, "ascending") for c in sort_by]).to_pylist()
