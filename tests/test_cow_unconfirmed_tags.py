"""Copy-on-write writes tag a key that only one file's footer admits without reading that file
(the rewrite of its file group reads it anyway): a bloom false positive then becomes an insert in
that file group. With filters that let many new keys through, the table must still hold every
key once with its latest values, the commit must count inserts and updates exactly, and hudi-rs
must read the same rows."""

from __future__ import annotations

import pyarrow as pa

import shoal
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by


def test_bloom_false_positives_become_inserts_in_their_file_group(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        record_key="id",
        ordering_field="ts",
        options={
            "hoodie.parquet.max.file.size": "4000",
            "hoodie.parquet.small.file.limit": "0",
            "hoodie.index.bloom.num_entries": "20",
            "hoodie.index.bloom.fpp": "0.2",
            "hoodie.bloom.index.filter.type": "SIMPLE",
        },
    )
    for start in (0, 2, 4, 6):  # interleaved keys: every file's key range overlaps the others'
        ids = list(range(start, 400, 8))
        t.insert(pa.table({"id": [f"k{i:03d}" for i in ids], "ts": [1] * len(ids), "v": ids}))
    assert len(t.file_slices()) >= 4
    before = {s.file_id for s in t.file_slices()}
    # Every held key updated, and 200 new (odd) keys: tiny filters admit many of them.
    ids = list(range(400))
    t.upsert(pa.table({"id": [f"k{i:03d}" for i in ids], "ts": [2] * 400, "v": [-i for i in ids]}))
    timeline = Timeline.load(t.storage, t.config)
    stats = timeline.commit_metadata(timeline.completed_data_instants()[-1]).write_stats()
    assert sum(s.numUpdateWrites for s in stats) == 200
    assert sum(s.numInserts for s in stats) == 200
    # Some new keys went to existing file groups as false positives (the rest to new files).
    rewritten = [s for s in stats if s.fileId in before]
    assert sum(s.numInserts for s in rewritten) > 0
    expect = [{"id": f"k{i:03d}", "ts": 2, "v": -i} for i in ids]
    assert rows_by(t.read(), ["id", "ts", "v"], ["id"]) == expect
    assert rows_by(hudi_rs_read(t.path), ["id", "ts", "v"], ["id"]) == expect
