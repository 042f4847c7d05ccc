"""Compaction writes the table's latest schema: after a write that added a column or widened a
type reached one file group only, every file group compacted later gets a base file of the
table's schema, as Hudi's compactor writes them (the column as nulls where never written, the
type widened, the table's column order), and the compaction commit records that schema.

Expected rows come from a model of what the tests wrote; hudi-rs reads every state too."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.tasks import compact as compact_task
from tests.hudi_oracle import hudi_rs_read, rows_by

META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]
META_COLUMNS = [*META, "_hoodie_file_name"]
# Two partitions of a few records each: file group A in "a", B in "b".
KEYS = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}
KEY_COLUMNS = [("id", pa.int64()), ("part", pa.string()), ("ts", pa.int64())]
NARROW = [*KEY_COLUMNS, ("n", pa.int32()), ("f", pa.float32())]
WIDE = [*KEY_COLUMNS, ("n", pa.int64()), ("f", pa.float64())]
EXTRA = ("extra", pa.string())


class Model:
    """A MOR table partitioned by ``part`` and its rows by key (event-time ordering on ``ts``)."""

    def __init__(self, path: Path, codec: str = "snappy"):
        self.path = str(path)
        self.table = shoal.Table.create(
            self.path,
            name="evolving",
            table_type="MERGE_ON_READ",
            record_key="id",
            partition_by="part",
            ordering_field="ts",
            options={"hoodie.parquet.compression.codec": codec},
        )
        self.fields = list(NARROW)
        self.rows: dict[int, dict] = {}
        self.clock = 0

    @property
    def columns(self) -> list[str]:
        return [name for name, _ in self.fields]

    def upsert(self, keys: list[int], fields: list[tuple[str, pa.DataType]] | None = None) -> str:
        """Upserts ``keys`` with the columns ``fields`` (the model's current ones by default);
        the model's schema becomes the wider of the two, as the table's does."""
        fields = fields or self.fields
        self.clock += 1
        batch = []
        for k in keys:
            row = {
                "id": k,
                "part": "a" if k in KEYS["a"] else "b",
                "ts": self.clock,
                "n": (2**40 if dict(fields)["n"] == pa.int64() else 0) + 10 * self.clock + k,
                "f": k + self.clock / 2,
            }
            if "extra" in dict(fields):
                row["extra"] = f"x{k}.{self.clock}"
            batch.append(row)
        t = self.table.upsert(pa.Table.from_pylist(batch, schema=pa.schema(fields)))
        names = dict(fields)
        self.fields = [(n, names.get(n, t_)) for n, t_ in self.fields]
        self.fields += [(n, t_) for n, t_ in fields if n not in dict(self.fields)]
        for row in batch:
            self.rows[row["id"]] = row
        return t

    def delete(self, keys: list[int]) -> str:
        t = self.table.delete(pa.table({"id": keys, "part": [self.rows[k]["part"] for k in keys]}))
        for k in keys:
            del self.rows[k]
        return t

    def expected(self) -> list[dict]:
        rows = sorted(self.rows.values(), key=lambda r: r["id"])
        return [{c: r.get(c) for c in self.columns} for r in rows]

    def check_reads(self) -> None:
        expected = self.expected()
        assert rows_by(shoal.Table(self.path).read(), self.columns, ["id"]) == expected, "shoal"
        assert rows_by(hudi_rs_read(self.path), self.columns, ["id"]) == expected, "hudi-rs"

    def file_schema(self) -> list[tuple[str, pa.DataType]]:
        """The columns (and types) a base file of the model's schema has."""
        return [(c, pa.string()) for c in META_COLUMNS] + self.fields

    def check_compaction(self, instant: str) -> None:
        """Every base file ``instant`` wrote is in the table's schema, which its commit records;
        every file group with logs was compacted."""
        commit = json.loads(Path(self.path, ".hoodie", f"{instant}.commit").read_text())
        stats = [s for group in commit["partitionToWriteStats"].values() for s in group]
        assert sorted(s["partitionPath"] for s in stats) == ["a", "b"]
        # The commit's schema is the table's: that of the last write before the compaction.
        timeline = shoal.Table(self.path).timeline
        last_write = [e.time for e in timeline if e.action == "deltacommit" and e.time < instant][-1]
        written = json.loads(Path(self.path, ".hoodie", f"{last_write}.deltacommit").read_text())
        table_schema = commit["extraMetadata"]["schema"]
        assert table_schema == written["extraMetadata"]["schema"]
        assert [f["name"] for f in json.loads(table_schema)["fields"]] == self.columns
        table = shoal.Table(self.path).schema()
        assert table is not None
        assert [(f.name, f.type) for f in table] == self.file_schema()
        for s in stats:
            file = Path(self.path, s["path"])
            schema = pq.read_schema(file)
            assert [(f.name, f.type) for f in schema] == self.file_schema(), s["path"]
            # The Avro schema in the footer is the commit's, with the meta fields first.
            footer = json.loads(pq.read_metadata(file).metadata[b"parquet.avro.schema"])
            data_fields = [f for f in footer["fields"] if f["name"] not in META_COLUMNS]
            assert data_fields == json.loads(table_schema)["fields"], s["path"]
            assert [f["name"] for f in footer["fields"][:5]] == META_COLUMNS


def _evolve(m: Model, change: str) -> None:
    """A write that touches file group A only and adds a column, widens two types, or both;
    then file group B gets a log of its own when it has none (a widening write first compacts
    every slice with logs, docs/compatibility.md, "Schema evolution"): a delete, whose log has no records."""
    fields = {"add": [*NARROW, EXTRA], "widen": WIDE, "both": [*WIDE, EXTRA]}[change]
    m.upsert([1, 2], fields)
    if change != "add":
        m.delete([6])


@pytest.mark.parametrize("change", ["add", "widen", "both"])
@pytest.mark.parametrize("codec", ["snappy", "lz4"])  # lz4: base files the merge cannot splice
def test_compaction_writes_the_tables_latest_schema(tmp_path, change, codec):
    m = Model(tmp_path / "t", codec)
    m.upsert(KEYS["a"] + KEYS["b"])
    m.upsert([0, 5])  # logs in both file groups, in the first schema
    _evolve(m, change)
    m.check_reads()
    compacted = m.table.compact()
    assert len(compacted) == 1
    m.check_compaction(compacted[0])
    m.check_reads()
    # Later writes: B's records get the new column's values, A's and B's logs the wider types.
    m.upsert([3, 4, 7])
    m.upsert([0, 5])
    m.check_reads()
    again = m.table.compact()
    assert len(again) == 1
    m.check_compaction(again[0])
    m.check_reads()


def test_a_schema_already_the_latest_is_kept(tmp_path, monkeypatch):
    """No schema change since the base files were written: the compacted files are the base
    files' rows merged in place, their unchanged column chunks copied (nothing is conformed,
    nothing written whole)."""
    m = Model(tmp_path / "t")
    m.upsert(KEYS["a"] + KEYS["b"])
    m.upsert([0, 5])

    def written_whole(*args, **kwargs):
        raise AssertionError("a base file of the table's schema was written whole")

    monkeypatch.setattr(compact_task, "write_base_file", written_whole)
    compacted = m.table.compact()
    monkeypatch.undo()
    m.check_compaction(compacted[0])
    m.check_reads()


def test_spark_compaction_writes_the_tables_latest_schema(spark, tmp_path):
    """The Spark entry point runs the same compaction tasks: its base files get the table's
    schema too (the ``spark`` fixture skips the test without pyspark)."""
    from shoal.spark.services import compact

    m = Model(tmp_path / "t")
    m.upsert(KEYS["a"] + KEYS["b"])
    m.upsert([0, 5])
    _evolve(m, "both")
    compacted = compact(spark, m.path)
    assert len(compacted) == 1
    m.check_compaction(compacted[0])
    m.check_reads()
    m.upsert([4, 7])
    m.check_reads()
