"""Base files shoal writes carry Hudi's footer: a bloom filter holding every record key (byte-
compatible with Hudi's DYNAMIC_V0 serialization), min/max record keys and the Avro schema."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
import shoal.index.bloom as bloom
from shoal._native import BloomFilter


def _base_files(path: str) -> list[Path]:
    return sorted(p for p in Path(path).rglob("*.parquet") if ".hoodie" not in p.parts)


def test_footer_has_bloom_min_max_and_schema(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="trips", record_key="id", partition_by="city", ordering_field="ts"
    )
    keys = [f"key-{i:05d}" for i in range(3000)]
    t.bulk_insert(
        pa.table(
            {
                "id": keys,
                "city": ["x" if i % 2 else "y" for i in range(3000)],
                "ts": list(range(3000)),
                "fare": [1.5] * 3000,
            }
        )
    )
    files = _base_files(t.path)
    assert len(files) == 2
    for f in files:
        meta = {k.decode(): v.decode() for k, v in pq.read_metadata(f).metadata.items()}
        file_keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert meta["hoodie_min_record_key"] == min(file_keys)
        assert meta["hoodie_max_record_key"] == max(file_keys)
        assert meta["hoodie_bloom_filter_type_code"] == "DYNAMIC_V0"
        raw = base64.b64decode(meta["org.apache.hudi.bloomfilter"])
        # DYNAMIC_V0 header: version -1, 30 hashes, murmur, 2,587,966 bits, 60,000 per row.
        assert raw[:4] == b"\xff\xff\xff\xff" and int.from_bytes(raw[4:8], "big") == 30
        assert int.from_bytes(raw[9:13], "big") == 2_587_966
        assert int.from_bytes(raw[13:17], "big") == 60_000
        assert int.from_bytes(raw[17:21], "big") == len(file_keys)  # keys added to the active row
        bloom = BloomFilter.from_footer(meta["org.apache.hudi.bloomfilter"], "DYNAMIC_V0")
        assert all(bloom.might_contain(k) for k in file_keys)
        schema = json.loads(meta["parquet.avro.schema"])
        assert schema["name"] == "trips_record" and schema["namespace"] == "hoodie.trips"
        names = [fld["name"] for fld in schema["fields"]]
        assert names[:5] == [
            "_hoodie_commit_time",
            "_hoodie_commit_seqno",
            "_hoodie_record_key",
            "_hoodie_partition_path",
            "_hoodie_file_name",
        ]
        assert names[5:] == ["id", "city", "ts", "fare"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_bloom_index_skips_files_whose_filter_rejects_the_keys(tmp_path, monkeypatch, table_type):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", table_type=table_type, record_key="id", ordering_field="ts"
    )
    t.bulk_insert(pa.table({"id": [f"a{i}" for i in range(100)], "ts": [1] * 100}))
    reads = []
    real = bloom.read_base_file

    def spy(storage, path, columns=None, filters=()):
        if columns == ["_hoodie_record_key"]:
            reads.append(path)
        return real(storage, path, columns, filters)

    monkeypatch.setattr(bloom, "read_base_file", spy)
    # Keys outside the file's min/max range: no key column read is needed to know they are new.
    t.upsert(pa.table({"id": ["z1", "z2"], "ts": [2, 2]}))
    assert reads == []
    # A key inside the range that the filter holds: merge-on-read confirms it by reading the key
    # column; copy-on-write leaves that to the file group's rewrite, which reads the file anyway.
    t.upsert(pa.table({"id": ["a5"], "ts": [3]}))
    assert len(reads) == (1 if table_type == "MERGE_ON_READ" else 0)
    assert t.read(filters=[("id", "=", "a5")])["ts"].to_pylist() == [3]
    assert t.read().num_rows == 102
