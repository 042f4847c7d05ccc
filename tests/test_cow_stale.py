"""Event-time ordering in a copy-on-write merge (tasks/cow_write.py _drop_stale): an incoming
record or soft delete loses to the stored record of its key when its ordering value is lower
(a null one never wins against a stored value); hard deletes always apply. Checked against a
row-by-row model, for files holding each key once and for files holding duplicates."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from shoal.tasks.cow_write import OP_COLUMN, OP_HARD_DELETE, OP_SOFT_DELETE, OP_UPSERT, _drop_stale

KEY = "_hoodie_record_key"


def _model(records: list[dict], stored: list[dict]) -> list[dict]:
    by_key: dict[str, list] = {}
    for row in stored:
        by_key.setdefault(row[KEY], []).append(row["ts"])
    kept = []
    for row in records:
        stale = row[OP_COLUMN] != OP_HARD_DELETE and any(
            (s is not None and row["ts"] is not None and s > row["ts"])
            or (row["ts"] is None and s is not None)
            for s in by_key.get(row[KEY], [])
        )
        if not stale:
            kept.append(row)
    return kept


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("duplicates", [False, True])
def test_stale_records_are_dropped_as_the_model_says(seed, duplicates):
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(40)]
    stored_keys = rng.sample(keys, 25)
    if duplicates:
        stored_keys += rng.sample(stored_keys, 5)

    def ts() -> int | None:
        return None if rng.random() < 0.15 else rng.randrange(5)

    stored = [{KEY: k, "ts": ts()} for k in stored_keys]
    ops = [OP_UPSERT, OP_UPSERT, OP_SOFT_DELETE, OP_HARD_DELETE]
    records = [{KEY: rng.choice(keys), "ts": ts(), "v": i, OP_COLUMN: rng.choice(ops)} for i in range(60)]
    schema = pa.schema([(KEY, pa.string()), ("ts", pa.int64()), ("v", pa.int64()), (OP_COLUMN, pa.int8())])
    got = _drop_stale(
        pa.Table.from_pylist(records, schema=schema),
        pa.Table.from_pylist(stored, schema=pa.schema([(KEY, pa.string()), ("ts", pa.int32())])),
        "ts",
    )
    assert got.to_pylist() == _model(records, stored)
