"""Write semantics CDC pipelines depend on, checked against models of Apache Hudi's rules, on
shoal's snapshot read and on hudi-rs.

- A write that does not combine its batch (``hoodie.combine.before.upsert=false``) may repeat a
  key. Hudi's merge handle (``HoodieMergeHandle.init``) loads a file group's incoming records
  into a map by record key, so the last record of a key in the batch replaces the earlier ones
  before any of them meets the stored record: the key stays one record. Records that open a new
  file group (the create handle) are all written. On merge-on-read, records logged to a slice
  are collapsed by the readers with the precombine rule instead (the greatest ordering value).
- Ordering values are compared as Java compares them (``Comparable.compareTo``): for ``double``
  and ``float`` fields that is ``Double.compareTo``'s total order, in which ``-0.0 < 0.0`` and
  NaN is greater than every other value.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "ts", "v"]
NO_COMBINE = {"hoodie.combine.before.upsert": "false"}


def _table(tmp_path, table_type: str, ordering: str = "EVENT_TIME_ORDERING", **options: str) -> shoal.Table:
    return shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        ordering_field="ts",
        merge_ordering=ordering,
        options=options,
    )


def _batch(rows: list[tuple], ts_type: pa.DataType | None = None) -> pa.Table:
    """(id, ts, v, deleted) rows; ``ts`` a long unless ``ts_type`` says otherwise."""
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.string()),
            "ts": pa.array([r[1] for r in rows], ts_type or pa.int64()),
            "v": pa.array([r[2] for r in rows], pa.int64()),
            "_hoodie_is_deleted": pa.array([r[3] for r in rows], pa.bool_()),
        }
    )


def _both(t: shoal.Table) -> list[dict]:
    """The table's rows as shoal reads them, checked to be what hudi-rs reads."""
    ours = rows_by(t.read(columns=COLUMNS), COLUMNS, COLUMNS)
    assert rows_by(hudi_rs_read(t.path), COLUMNS, COLUMNS) == ours, "hudi-rs and shoal disagree"
    return ours


def _rows(*rows: tuple) -> list[dict]:
    return [{"id": i, "ts": ts, "v": v} for i, ts, v in sorted(rows)]


# ---- upserts that do not combine their batch -----------------------------------------------------

STORED = [("a", 5, 1, False), ("b", 5, 1, False), ("e", 5, 1, False), ("f", 5, 1, False)]
# Each key's records in batch order; under Hudi's merge handle the last one of each key is the
# one that meets the stored record (or is inserted).
REPEATING = [
    ("a", 7, 2, False),
    ("a", 6, 3, False),  # last: ts 6 beats the stored 5 under either ordering
    ("e", 8, 2, True),
    ("e", 7, 4, False),  # last: an update, the earlier delete is replaced
    ("f", 9, 2, False),
    ("f", 8, 3, True),  # last: a delete, newer than the stored record
    ("c", 4, 2, False),
    ("c", 6, 3, False),
    ("d", 6, 2, False),
    ("d", 4, 3, False),  # last, though older: new keys are not ordered against anything
]


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "GLOBAL_BLOOM"])
@pytest.mark.parametrize("ordering", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
def test_copy_on_write_upsert_without_combining_merges_the_last_record_of_each_key(tmp_path, index, ordering):
    t = _table(tmp_path, "COPY_ON_WRITE", ordering, **{"hoodie.index.type": index})
    t.upsert(_batch(STORED))
    t.upsert(_batch(REPEATING), options=NO_COMBINE)
    # One file group, small: the new keys fill it too, through the merge handle.
    assert len(t.file_slices()) == 1
    assert _both(t) == _rows(("a", 6, 3), ("b", 5, 1), ("c", 6, 3), ("d", 4, 3), ("e", 7, 4))


def test_records_of_a_new_file_group_are_all_written(tmp_path):
    """Without small files the new keys open a file group of their own: Hudi's create handle
    writes every record it is given, so they stay twice; the stored keys still merge once."""
    t = _table(tmp_path, "COPY_ON_WRITE", **{"hoodie.parquet.small.file.limit": "0"})
    t.upsert(_batch(STORED))
    t.upsert(_batch(REPEATING), options=NO_COMBINE)
    assert len(t.file_slices()) == 2
    assert _both(t) == _rows(
        ("a", 6, 3), ("b", 5, 1), ("c", 4, 2), ("c", 6, 3), ("d", 6, 2), ("d", 4, 3), ("e", 7, 4)
    )


def test_merge_on_read_rewrite_after_a_logged_delete_collapses_by_the_precombine_rule(tmp_path):
    """A merge-on-read write naming a key a committed delete block deletes rewrites the slice
    instead of logging (event-time ordering). It must give what the log append it stands for
    gives: Hudi's readers collapse a key's log records with the precombine rule, so of two
    records of the key the greater ordering value wins, wherever it is in the batch."""
    t = _table(tmp_path, "MERGE_ON_READ")
    t.upsert(_batch([("a", 5, 1, False), ("b", 5, 1, False)]))
    t.upsert(_batch([("a", 6, 1, True)]))
    t.upsert(_batch([("a", 8, 2, False), ("a", 7, 3, False)]), options=NO_COMBINE)
    (only,) = t.file_slices()
    assert not only.log_files  # rewritten
    assert _both(t) == _rows(("a", 8, 2), ("b", 5, 1))


def test_spark_upsert_without_combining_merges_the_last_record_of_each_key(spark, tmp_path):
    from shoal.spark import write as spark_write

    t = _table(tmp_path, "COPY_ON_WRITE")
    t.upsert(_batch(STORED))
    # One input partition, so that Spark keeps the batch order.
    frame = spark.createDataFrame(_batch(REPEATING).to_pandas()).coalesce(1)
    spark_write(frame, t.path, "upsert", NO_COMBINE)
    assert _both(t) == _rows(("a", 6, 3), ("b", 5, 1), ("c", 6, 3), ("d", 4, 3), ("e", 7, 4))


# ---- floating point ordering values ---------------------------------------------------------------

NAN = float("nan")


def _float_rows(table: pa.Table) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in table.to_pylist())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("kind", [pa.float64(), pa.float32()])
def test_floats_are_ordered_as_java_orders_them(tmp_path, kind, table_type):
    """Stored against incoming (``DefaultHoodieRecordPayload``: the stored record stays when its
    value compares greater), and within a batch (``preCombine``: the earlier record stays when
    its value compares greater, ties go to the later one). On merge-on-read the updates are
    logged, and the snapshot's merge and the compaction must order them the same way."""
    t = _table(tmp_path, table_type)
    stored = [("zero", 0.0), ("negzero", -0.0), ("nan", NAN), ("five", 5.0), ("inf", float("inf"))]
    t.upsert(_batch([(k, ts, 1, False) for k, ts in stored], kind))
    t.upsert(
        _batch(
            [
                ("zero", -0.0, 2, False),  # 0.0 > -0.0: the stored record stays
                ("negzero", 0.0, 2, False),  # wins
                ("nan", 5.0, 2, False),  # NaN is the greatest: stays
                ("five", NAN, 2, False),  # wins
                ("inf", NAN, 2, True),  # a delete, and NaN > inf: deletes
                # Within the batch: the first one's value is greater, so it stays.
                ("new", 0.0, 1, False),
                ("new", -0.0, 2, False),
                ("new2", NAN, 1, False),
                ("new2", 1e30, 2, False),
            ],
            kind,
        )
    )
    expected = [("five", 2), ("nan", 1), ("negzero", 2), ("new", 1), ("new2", 1), ("zero", 1)]
    assert _float_rows(t.read(columns=["id", "v"])) == expected
    assert _float_rows(hudi_rs_read(t.path).select(["id", "v"])) == expected
    if table_type == "MERGE_ON_READ":
        assert any(s.log_files for s in t.file_slices()), "the updates were not logged"
        t.compact()
        assert _float_rows(t.read(columns=["id", "v"])) == expected
        assert _float_rows(hudi_rs_read(t.path).select(["id", "v"])) == expected


def test_a_streaming_checkpoint_orders_floats_as_java(tmp_path):
    """A later batch of the checkpoint competes with what an earlier one wrote by the
    precombine rule: 0.0 written first stays against a later -0.0."""
    t = _table(tmp_path, "COPY_ON_WRITE")
    with t.stream_writer() as w:
        w.write(_batch([("a", 0.0, 1, False), ("b", 1.0, 1, False)], pa.float64()))
        w.write(_batch([("a", -0.0, 2, False), ("b", NAN, 2, False)], pa.float64()))
    assert _float_rows(t.read(columns=["id", "v"])) == [("a", 1), ("b", 2)]
    assert _float_rows(hudi_rs_read(t.path).select(["id", "v"])) == [("a", 1), ("b", 2)]


def test_a_global_index_moves_a_record_only_when_it_beats_the_stored_one_as_java_orders(tmp_path):
    """Under event-time ordering a record found in another partition moves only if it beats the
    stored one: against a stored NaN, 5.0 loses and goes to the old partition, where the stored
    record stays."""
    t = shoal.Table.create(
        str(tmp_path / "g"),
        name="g",
        table_type="COPY_ON_WRITE",
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options={"hoodie.index.type": "GLOBAL_BLOOM"},
    )
    t.upsert(pa.table({"id": ["a", "b"], "p": ["x", "x"], "ts": [NAN, 1.0], "v": [1, 1]}))
    t.upsert(pa.table({"id": ["a", "b"], "p": ["y", "y"], "ts": [5.0, NAN], "v": [2, 2]}))
    cols = ["id", "_hoodie_partition_path", "v"]
    expected = [
        {"id": "a", "_hoodie_partition_path": "x", "v": 1},
        {"id": "b", "_hoodie_partition_path": "y", "v": 2},
    ]
    assert rows_by(t.read(), cols, ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), cols, ["id"]) == expected


# ---- payload classes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        "org.apache.hudi.common.model.AWSDmsAvroPayload",
        "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload",
        "org.apache.hudi.common.model.PartialUpdateAvroPayload",
        "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload",
    ],
)
def test_a_table_merging_with_a_payload_shoal_does_not_implement_is_not_written(tmp_path, spark, payload):
    """A CDC table made by Hudi with, say, the AWS DMS payload takes ``Op = 'D'`` rows as
    deletes and a partial-update payload keeps the stored values of null fields: writing into it
    with event- or commit-time merging would give other rows than Hudi's writers, so every
    write path refuses it before the timeline changes."""
    from shoal.errors import UnsupportedError
    from shoal.spark import write as spark_write
    from tests.table_files import set_table_properties

    t = _table(tmp_path, "MERGE_ON_READ")
    t.upsert(_batch([("a", 5, 1, False)]))
    set_table_properties(tmp_path / "t", {"hoodie.compaction.payload.class": payload})
    t = shoal.Table(t.path)
    before = t._timeline().instants
    update = _batch([("a", 4, 2, False)])
    for write in (t.upsert, t.insert, t.delete):
        with pytest.raises(UnsupportedError, match="payload class"):
            write(update)
    with pytest.raises(UnsupportedError, match="payload class"), t.stream_writer() as w:
        w.write(update)
    if payload.endswith("AWSDmsAvroPayload"):  # one Spark job is enough
        with pytest.raises(UnsupportedError, match="payload class"):
            spark_write(spark.createDataFrame(update.to_pandas()), t.path, "upsert")
    assert t._timeline().instants == before
    assert _both(t) == _rows(("a", 5, 1))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_soft_delete_without_an_ordering_value_applies_on_both_table_types(tmp_path, table_type):
    """A merge-on-read log holds such a delete with Java's natural-order value (0), which every
    reader applies whatever the stored record's ordering value; copy-on-write used to keep the
    stored record, so the two table types held different rows after the same writes. An
    upsert without an ordering value still loses to the stored record on both."""
    t = _table(tmp_path, table_type)
    t.upsert(_batch([("gone", 5, 1, False), ("kept", 5, 1, False)]))
    t.upsert(_batch([("gone", None, 2, True), ("kept", None, 2, False)]))
    expected = [{"id": "kept", "ts": 5, "v": 1}]
    assert rows_by(t.read(columns=["id", "ts", "v"]), ["id", "ts", "v"], ["id"]) == expected
    assert rows_by(hudi_rs_read(t.path), ["id", "ts", "v"], ["id"]) == expected
    if table_type == "MERGE_ON_READ":
        t.compact()
        assert rows_by(t.read(columns=["id", "ts", "v"]), ["id", "ts", "v"], ["id"]) == expected


def test_hudis_duplicate_dropping_switches_run_at_their_defaults(tmp_path):
    """A Hudi job's configuration often states ``insert.drop.duplicates=false`` or
    ``insert.dup.policy=none``: an insert then keeps records of keys the table holds (the other
    values: tests/test_insert_dup_policy.py)."""
    t = _table(tmp_path, "COPY_ON_WRITE")
    defaults = {
        "hoodie.datasource.write.insert.drop.duplicates": "false",
        "hoodie.datasource.insert.dup.policy": "none",
    }
    t.insert(_batch([("a", 1, 1, False)]), options=defaults)
    t.insert(_batch([("a", 2, 2, False)]), options=defaults)
    assert rows_by(t.read(columns=["id", "v"]), ["id", "v"], ["id", "v"]) == [
        {"id": "a", "v": 1},
        {"id": "a", "v": 2},
    ]
