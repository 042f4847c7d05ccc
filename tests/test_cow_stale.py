"""Event-time ordering in a copy-on-write merge (tasks/cow_write.py): an incoming record or soft
delete loses to the stored record of its key when its ordering value is lower (a null one never
wins against a stored value); hard deletes, and soft deletes without an ordering value, always
apply. Checked against a row-by-row model:
``_drop_stale`` for files holding each key once, ``_merge_copies`` for files holding a key
several times, where each stored copy is merged on its own (Hudi's merge handle)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from shoal.tasks.cow_write import (
    OP_COLUMN,
    OP_HARD_DELETE,
    OP_SOFT_DELETE,
    OP_UPSERT,
    _drop_stale,
    _merge_copies,
)

KEY = "_hoodie_record_key"
SCHEMA = pa.schema([(KEY, pa.string()), ("ts", pa.int64()), ("v", pa.int64()), (OP_COLUMN, pa.int8())])
STORED_SCHEMA = pa.schema([(KEY, pa.string()), ("ts", pa.int32())])
OPS = [OP_UPSERT, OP_UPSERT, OP_SOFT_DELETE, OP_HARD_DELETE]


def _loses(record: dict, stored_ts: int | None) -> bool:
    if record[OP_COLUMN] == OP_HARD_DELETE:
        return False
    if record[OP_COLUMN] == OP_SOFT_DELETE and record["ts"] is None:
        return False  # an unordered delete applies, as a merge-on-read log's does
    if record["ts"] is None:
        return stored_ts is not None
    return stored_ts is not None and stored_ts > record["ts"]


def _model(records: list[dict], stored: list[dict]) -> list[dict]:
    by_key: dict[str, list] = {}
    for row in stored:
        by_key.setdefault(row[KEY], []).append(row["ts"])
    return [row for row in records if not any(_loses(row, s) for s in by_key.get(row[KEY], []))]


def _ts(rng: random.Random) -> int | None:
    return None if rng.random() < 0.15 else rng.randrange(5)


@pytest.mark.parametrize("seed", range(8))
def test_stale_records_are_dropped_as_the_model_says(seed):
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(40)]
    stored = [{KEY: k, "ts": _ts(rng)} for k in rng.sample(keys, 25)]
    records = [{KEY: rng.choice(keys), "ts": _ts(rng), "v": i, OP_COLUMN: rng.choice(OPS)} for i in range(60)]
    got = _drop_stale(
        pa.Table.from_pylist(records, schema=SCHEMA), pa.Table.from_pylist(stored, schema=STORED_SCHEMA), "ts"
    )
    assert got.to_pylist() == _model(records, stored)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("event_time", [True, False])
def test_each_stored_copy_is_merged_on_its_own(seed, event_time):
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(40)]
    stored_keys = rng.sample(keys, 25)
    stored_keys += rng.sample(stored_keys, 8) + rng.sample(stored_keys, 4)
    rng.shuffle(stored_keys)
    stored = [{KEY: k, "ts": _ts(rng)} for k in stored_keys]
    # A bucket's incoming records hold each key once (precombined).
    records = [
        {KEY: k, "ts": _ts(rng), "v": i, OP_COLUMN: rng.choice(OPS)}
        for i, k in enumerate(rng.sample(keys, 30))
    ]
    incoming = {r[KEY] for r in records}
    hit = pa.chunked_array([pa.array([s[KEY] in incoming for s in stored])])

    got = _merge_copies(
        pa.Table.from_pylist(records, schema=SCHEMA),
        pa.Table.from_pylist(stored, schema=STORED_SCHEMA),
        hit,
        "ts" if event_time else None,
    )

    by_key = {r[KEY]: r for r in records}
    replaced = [s[KEY] in by_key and not (event_time and _loses(by_key[s[KEY]], s["ts"])) for s in stored]
    assert got.replaced.to_pylist() == replaced
    per_record = {k: sum(r for s, r in zip(stored, replaced, strict=True) if s[KEY] == k) for k in by_key}
    named = {s[KEY] for s in stored}
    effective = [r for r in records if r[KEY] not in named or per_record[r[KEY]] > 0]
    assert got.records.to_pylist() == effective
    assert got.per_record.tolist() == [per_record[r[KEY]] for r in effective]
    ops = pa.chunked_array([pa.array([r[OP_COLUMN] for r in effective], pa.int8())])
    deletes = sum(per_record[r[KEY]] for r in effective if r[OP_COLUMN] != OP_UPSERT)
    assert got.deletes(ops) == deletes
    assert isinstance(got.per_record, np.ndarray)
