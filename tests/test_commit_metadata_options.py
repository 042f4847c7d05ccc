"""Write options named with ``hoodie.datasource.write.commitmeta.key.prefix`` land in the commit's
extraMetadata (Hudi's way of keeping a pipeline's checkpoint with the data it wrote)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidOptionError
from tests.hudi_oracle import hudi_rs_read


def _batch(ids, ts: int = 1) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64())})


def _extra(path: str, instant: str) -> dict:
    """The extraMetadata of a completed commit, read from its timeline file."""
    (commit,) = [
        p for p in (Path(path) / ".hoodie").glob(f"{instant}.*") if p.suffix in (".commit", ".deltacommit")
    ]
    return json.loads(commit.read_text())["extraMetadata"]


def _timeline_files(path: str) -> list[str]:
    return sorted(p.name for p in (Path(path) / ".hoodie").iterdir() if p.is_file())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_prefixed_options_are_recorded_with_the_commit(tmp_path, table_type):
    path = str(tmp_path / "t")
    t = shoal.Table.create(path, name="t", table_type=table_type, record_key="id", ordering_field="ts")
    assert t.commit_metadata_value("_checkpoint") is None
    first = t.upsert(_batch(range(5)), options={"_checkpoint": "offset-42", "_source": "orders"})
    extra = _extra(path, first)
    assert extra["_checkpoint"] == "offset-42" and extra["_source"] == "orders"
    assert "schema" in extra, "the schema entry is still written"
    # A later commit without the key leaves the latest recorded value in place.
    second = t.upsert(_batch(range(3, 8), 2))
    assert "_checkpoint" not in _extra(path, second)
    assert t.commit_metadata_value("_checkpoint") == "offset-42"
    t.upsert(_batch(range(8, 9), 3), options={"_checkpoint": "offset-43"})
    assert shoal.Table(path).commit_metadata_value("_checkpoint") == "offset-43"
    assert sorted(hudi_rs_read(path)["id"].to_pylist()) == list(range(9))


def test_the_prefix_can_be_changed_and_must_not_take_hudi_options(tmp_path):
    path = str(tmp_path / "t")
    t = shoal.Table.create(path, name="t", record_key="id", ordering_field="ts")
    prefix = {"hoodie.datasource.write.commitmeta.key.prefix": "ckpt."}
    instant = t.insert(_batch(range(2)), options={**prefix, "ckpt.kafka": "p0:17"})
    assert _extra(path, instant)["ckpt.kafka"] == "p0:17"
    before = _timeline_files(path)
    with pytest.raises(InvalidOptionError, match="_kafka"):
        t.insert(_batch(range(2, 4)), options={**prefix, "_kafka": "p0:18"})
    with pytest.raises(InvalidOptionError, match="would take Hudi's own options"):
        t.insert(_batch(range(2, 4)), options={"hoodie.datasource.write.commitmeta.key.prefix": "hoodie"})
    assert _timeline_files(path) == before


def test_spark_writes_record_prefixed_options(spark, tmp_path):
    from shoal.spark.write import write as spark_write

    path = str(tmp_path / "t")
    df = spark.createDataFrame(_batch(range(4)))
    result = spark_write(df, path, "upsert", table_name="t", record_key="id", _batch_id="7")
    assert _extra(path, result.instant)["_batch_id"] == "7"
    assert shoal.Table(path).commit_metadata_value("_batch_id") == "7"
    with pytest.raises(InvalidOptionError, match="commit metadata entries"):
        spark_write(df, path, "upsert", batch_id="8")
