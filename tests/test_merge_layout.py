"""The in-place layout of a merge (tasks/merge_layout.py), on small tables: where each record goes
and which row groups keep which column chunks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from shoal.tasks.merge_layout import FILE_NAME, RECORD_KEY, merge_in_place
from shoal.write.base_file import constant_column

NAME = "new-file.parquet"


def _stored(keys: list[str], values: list[int]) -> pa.Table:
    return pa.table({RECORD_KEY: keys, "v": pa.array(values, pa.int64()), "w": [f"w{k}" for k in keys]})


def _new_rows(keys: list[str], values: list[int]) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            RECORD_KEY: keys,
            FILE_NAME: constant_column(NAME, n),
            "v": pa.array(values, pa.int64()),
            "w": [f"w{k}" for k in keys],
        }
    )


def _layout(
    stored: pa.Table, groups: list[int], records: pa.Table, is_upsert=None, new_rows=None, target=100
):
    hit = np.isin(stored.column(RECORD_KEY).to_pylist(), records.column(RECORD_KEY).to_pylist())
    return merge_in_place(
        stored,
        groups,
        pa.array(hit),
        records,
        is_upsert,
        new_rows if new_rows is not None else records,
        NAME,
        target,
    )


def test_updates_stay_in_place_and_unchanged_columns_keep_their_chunks():
    stored = _stored(["a", "b", "c", "d", "e", "f"], [1, 2, 3, 4, 5, 6])
    # b gets a new v, e is written again unchanged, z is new.
    incoming = _new_rows(["b", "z", "e"], [20, 26, 5])
    layout = _layout(stored, [3, 3], incoming, target=8)
    assert layout is not None
    rows = layout.rows
    assert rows.column(RECORD_KEY).to_pylist() == ["a", "b", "c", "d", "e", "f", "z"]
    assert rows.column("v").to_pylist() == [1, 20, 3, 4, 5, 6, 26]
    assert rows.column(FILE_NAME).to_pylist() == [NAME] * 7
    names = rows.column_names
    g0, g1, tail = layout.row_groups
    assert (g0.start, g0.num_rows, g1.start, g1.num_rows, tail.start, tail.num_rows) == (0, 3, 3, 3, 6, 1)
    # Row group 0: v changed (b), the rest is copied; row group 1: e's values are the same.
    assert dict(zip(names, g0.sources, strict=True)) == {RECORD_KEY: 0, FILE_NAME: -1, "v": -1, "w": 0}
    assert dict(zip(names, g1.sources, strict=True)) == {RECORD_KEY: 1, FILE_NAME: -1, "v": 1, "w": 1}
    assert tail.sources == [-1] * 4
    assert layout.copied_chunks == 5


def test_deletes_rewrite_their_row_group_only():
    stored = _stored(["a", "b", "c", "d"], [1, 2, 3, 4])
    records = pa.table({RECORD_KEY: ["d", "b"]})
    is_upsert = np.array([False, True])
    layout = _layout(stored, [2, 2], records, is_upsert, _new_rows(["b"], [9]), target=4)
    assert layout is not None
    assert layout.rows.column(RECORD_KEY).to_pylist() == ["a", "b", "c"]
    assert layout.rows.column("v").to_pylist() == [1, 9, 3]
    g0, g1 = layout.row_groups
    assert g1.sources == [-1] * 4 and g1.num_rows == 1
    assert dict(zip(layout.rows.column_names, g0.sources, strict=True))["w"] == 0


def test_deletes_alone_keep_the_stored_columns():
    stored = _stored(["a", "b", "c"], [1, 2, 3])
    layout = _layout(stored, [3], pa.table({RECORD_KEY: ["b"]}), np.array([False]), _new_rows([], []))
    assert layout is not None
    assert FILE_NAME in layout.rows.column_names
    assert layout.rows.column(RECORD_KEY).to_pylist() == ["a", "c"]
    assert layout.rows.column(FILE_NAME).to_pylist() == [NAME, NAME]


def test_a_small_last_row_group_is_written_again_with_the_new_records():
    stored = _stored([f"k{i:02d}" for i in range(12)], list(range(12)))
    layout = _layout(stored, [10, 2], _new_rows(["new"], [0]), target=100)
    assert layout is not None
    head, tail = layout.row_groups
    assert (head.num_rows, tail.start, tail.num_rows) == (10, 10, 3)
    assert tail.sources == [-1] * 4
    # A last row group of a quarter of a full one or more stays.
    layout = _layout(stored, [10, 2], _new_rows(["new"], [0]), target=8)
    assert [g.num_rows for g in layout.row_groups] == [10, 2, 1]


def test_each_copy_of_a_key_stored_twice_takes_the_records_place():
    stored = _stored(["a", "b", "a", "c"], [1, 2, 3, 4])
    layout = _layout(stored, [2, 2], _new_rows(["a", "z"], [9, 26]), target=8)
    assert layout is not None
    rows = layout.rows
    assert rows.column(RECORD_KEY).to_pylist() == ["a", "b", "a", "c", "z"]
    assert rows.column("v").to_pylist() == [9, 2, 9, 4, 26]
    names = rows.column_names
    g0, g1, tail = layout.row_groups
    # w is unchanged by the update in both row groups: its chunks are kept.
    assert dict(zip(names, g0.sources, strict=True)) == {RECORD_KEY: 0, FILE_NAME: -1, "v": -1, "w": 0}
    assert dict(zip(names, g1.sources, strict=True)) == {RECORD_KEY: 1, FILE_NAME: -1, "v": -1, "w": 1}
    assert (tail.start, tail.num_rows) == (4, 1)


def test_what_cannot_be_laid_out_in_place():
    stored = _stored(["a", "b"], [1, 2])
    # No stored rows.
    assert _layout(stored.slice(0, 0), [], _new_rows(["a"], [1])) is None
    # A stored row said to be named by a record that is not among them.
    assert (
        merge_in_place(
            stored,
            [2],
            pa.array([True, False]),
            pa.table({RECORD_KEY: ["x"]}),
            None,
            _new_rows(["x"], [1]),
            NAME,
            100,
        )
        is None
    )
    # Columns of another type, or other columns.
    other = _new_rows(["a"], [1]).set_column(2, "v", pa.array([1], pa.int32()))
    assert _layout(stored, [2], other) is None
    assert _layout(stored, [2], _new_rows(["a"], [1]).drop_columns(["w"])) is None
    # Row counts that do not add up.
    assert _layout(stored, [3], _new_rows(["a"], [1])) is None
