"""The streaming writer on a record key several file groups of a partition hold (kept by
``insert`` and ``bulk_insert``): within a checkpoint, an upsert or delete of that key reaches
every copy, in the batch that first brings the key and in later batches of the checkpoint too,
with the precombine rule across batches (the greatest ordering value wins, ties to the later).

After every checkpoint the table, as shoal and hudi-rs read it, equals a model that applies the
checkpoint's batches, precombined, as one upsert (or delete) to every stored copy of a key."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.test_duplicate_keys_upsert import COLUMNS, DELETED, PARTITIONED, SEQUENCE, _create, _model

# (record key, partition) of the keys the setup steps leave in several file groups, most copies
# first, then a key with one copy. Flat: a in 3 file groups, b in 2, c in 1. Partitioned: (a, x)
# in 3, (a, y) in 2, (b, x) in 2, (b, y) in 1.
FLAT_KEYS = [("a", "x"), ("b", "x"), ("c", "x")]
PARTITIONED_KEYS = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
# The setup writes ordering values up to 3; every streamed value is above, so the stored
# versions lose whatever the merge ordering, and only the precombine rule across batches decides.
SETUP_STEPS = 3

# A row of a batch: (record key, partition, ordering value, value, soft delete).
Row = tuple[str, str, int, int, bool]


def _records(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": [r[0] for r in rows],
            "p": [r[1] for r in rows],
            "ts": pa.array([r[2] for r in rows], pa.int64()),
            "v": pa.array([r[3] for r in rows], pa.int64()),
            DELETED: pa.array([r[4] for r in rows], pa.bool_()),
        }
    )


def _checkpoints(keys: list[tuple[str, str]], new: tuple[str, str]) -> list[tuple[str, list[list[Row]]]]:
    """(operation, batches) of each checkpoint. ``keys[0]`` and ``keys[1]`` have several copies."""
    (k0, p0), (k1, p1) = keys[0], keys[1]
    first = [
        [(k0, p0, 5, 5, False), (k1, p1, 5, 5, False), (*new, 5, 5, False)],
        # k0: a greater ordering value wins; k1: a lower one loses to the first batch's.
        [(k0, p0, 7, 7, False), (k1, p1, 4, 4, False)],
        # k0: a tie goes to the later batch; the other keys are updated once.
        [(k0, p0, 7, 70, False), *[(k, p, 6, 6, False) for k, p in keys[2:]]],
    ]
    second = [
        # Every copy of k0 and k1 soft-deleted ...
        [(k0, p0, 10, 10, True), (k1, p1, 10, 10, True)],
        # ... k0 stays deleted (a lower ordering value loses), k1 is back in every copy.
        [(k0, p0, 9, 9, False), (k1, p1, 11, 11, False)],
        [(*new, 12, 12, False)],
    ]
    third = [
        [(k1, p1, 13, 13, False)],
        [(k1, p1, 14, 14, False), (*keys[-1], 14, 14, False)],
    ]
    return [("upsert", first), ("upsert", second), ("delete", third)]


def _precombined(batches: list[list[Row]]) -> list[Row]:
    """One record per (key, partition): the greatest ordering value, ties to the later batch."""
    winners: dict[tuple[str, str], Row] = {}
    for batch in batches:
        for row in batch:
            before = winners.get((row[0], row[1]))
            if before is None or row[2] >= before[2]:
                winners[(row[0], row[1])] = row
    return list(winners.values())


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, COLUMNS, ["id", "p", "v"])


def _check(path: Path, want: list[dict], what: str) -> None:
    assert _rows(shoal.Table(str(path)).read(columns=COLUMNS)) == want, f"shoal read differs ({what})"
    assert _rows(hudi_rs_read(str(path))) == want, f"hudi-rs read differs ({what})"


def _copies(rows: list[dict], key: tuple[str, str]) -> int:
    return sum(1 for r in rows if (r["id"], r["p"]) == key)


CASES = [
    pytest.param(
        table_type,
        index,
        partitioned,
        flush_each_batch,
        id="-".join(
            [table_type, index, "part" if partitioned else "flat", "flush" if flush_each_batch else "buffer"]
        ),
    )
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for index in ("BLOOM", "SIMPLE")
    for partitioned in (False, True)
    for flush_each_batch in (False, True)
]


@pytest.mark.parametrize(("table_type", "index", "partitioned", "flush_each_batch"), CASES)
def test_streamed_upserts_and_deletes_reach_every_copy_of_a_key(
    tmp_path, table_type, index, partitioned, flush_each_batch
):
    path = tmp_path / "t"
    table = _create(path, table_type, index, partitioned)
    setup = (PARTITIONED if partitioned else SEQUENCE)[:SETUP_STEPS]
    for op, data in setup:
        table.write(data, op)
    keys = PARTITIONED_KEYS if partitioned else FLAT_KEYS
    steps = list(setup)
    _check(path, _model(steps)[-1], "setup")
    assert _copies(_model(steps)[-1], keys[0]) == 3 and _copies(_model(steps)[-1], keys[1]) == 2

    # A one-byte bucket limit flushes every bucket a batch touches: later batches of the
    # checkpoint merge into (or append to) what the instant wrote to the same file group.
    limit = 1 if flush_each_batch else 10**9
    upserts = table.stream_writer(bucket_buffer_bytes=limit, total_buffer_bytes=10**9)
    deletes = table.stream_writer("delete", bucket_buffer_bytes=limit, total_buffer_bytes=10**9)
    for number, (op, batches) in enumerate(_checkpoints(keys, ("d", keys[-1][1]))):
        writer = upserts if op == "upsert" else deletes
        for batch in batches:
            writer.write(_records(batch))
        assert writer.checkpoint() is not None
        steps.append((op, _records(_precombined(batches))))
        _check(path, _model(steps)[-1], f"checkpoint {number} ({op})")
    upserts.close()
    deletes.close()


def test_the_model_keeps_and_replaces_every_copy():
    """The model the test above checks against: after the first checkpoint every copy of the
    two keys holds the winning version, after the last none is left."""
    steps = list(SEQUENCE[:SETUP_STEPS])
    checkpoints = _checkpoints(FLAT_KEYS, ("d", "x"))
    states = []
    for op, batches in checkpoints:
        steps.append((op, _records(_precombined(batches))))
        states.append(_model(steps)[-1])
    first, second, third = states
    assert [(r["id"], r["v"]) for r in first] == [("a", 70)] * 3 + [("b", 5)] * 2 + [("c", 6), ("d", 5)]
    assert [(r["id"], r["v"]) for r in second] == [("b", 11)] * 2 + [("c", 6), ("d", 12)]
    assert [(r["id"], r["v"]) for r in third] == [("d", 12)]
