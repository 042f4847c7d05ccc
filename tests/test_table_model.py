"""Model-based test: random operation sequences on copy-on-write and merge-on-read tables; after
every commit the shoal snapshot and the hudi-rs snapshot both equal an in-memory model of the
table. On merge-on-read tables the read-optimized view is checked too: it equals hudi-rs's, and
every row in it is the model's version of that key as of the commit that wrote the row."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import shoal
from tests.hudi_oracle import hudi_rs_read, rows_by

CITIES = ["sf", "nyc", "chennai"]
USER_COLUMNS = ["id", "city", "ts", "fare", "rider", "_hoodie_is_deleted"]


class Model:
    """The expected table: (city, id) -> row, with event-time ordering on ``ts``.

    The same model holds for both table types: a deleted row is gone, and a later record
    re-inserts its key whatever its event time (on MOR, shoal rewrites a slice rather than log
    a record after a delete of its key, which Hudi's readers would collapse with the delete).
    """

    def __init__(self, partitioned: bool) -> None:
        self.rows: dict[tuple[str, int], dict] = {}
        self.partitioned = partitioned

    def identity(self, row: dict) -> tuple[str, int]:
        return (row["city"] if self.partitioned else "", row["id"])

    @staticmethod
    def dedup(batch: list[dict], key) -> list[dict]:
        best: dict = {}
        for row in batch:  # later rows win ties
            k = key(row)
            if k not in best or row["ts"] >= best[k]["ts"]:
                best[k] = row
        return list(best.values())

    def upsert(self, batch: list[dict]) -> None:
        for row in self.dedup(batch, self.identity):
            k = self.identity(row)
            cur = self.rows.get(k)
            if cur is not None and cur["ts"] > row["ts"]:
                continue  # a late event does not overwrite a newer one
            if row["_hoodie_is_deleted"]:
                self.rows.pop(k, None)
            else:
                self.rows[k] = row

    def insert(self, batch: list[dict]) -> None:
        for row in batch:
            self.rows[self.identity(row)] = row

    def delete(self, keys: list[dict]) -> None:
        for row in keys:
            self.rows.pop(self.identity(row), None)

    def expected(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: (r["id"], r["city"]))


def _schema() -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.int64()),
            ("city", pa.string()),
            ("ts", pa.int64()),
            ("fare", pa.float64()),
            ("rider", pa.string()),
            ("_hoodie_is_deleted", pa.bool_()),
        ]
    )


def _row(rng: random.Random, key: int, city: str, ts: int, deleted: bool = False) -> dict:
    return {
        "id": key,
        "city": city,
        "ts": ts,
        "fare": round(rng.uniform(1, 100), 2),
        "rider": f"rider-{rng.randint(0, 999)}",
        "_hoodie_is_deleted": deleted,
    }


def _run_sequence(
    tmp_path, seed: int, partitioned: bool, steps: int, table_type: str = "COPY_ON_WRITE"
) -> None:
    rng = random.Random(seed)
    path = str(tmp_path / f"t{seed}")
    table = shoal.Table.create(
        path,
        name=f"model_{seed}",
        table_type=table_type,
        record_key="id",
        partition_by="city" if partitioned else None,
        ordering_field="ts",
        # Tiny files (and blooms sized for them) so that small-file packing and several file
        # groups per partition both happen.
        options={
            "hoodie.parquet.max.file.size": "6000",
            "hoodie.parquet.small.file.limit": "4500",
            "hoodie.index.bloom.num_entries": "200",
            "hoodie.bloom.index.filter.dynamic.max.entries": "400",
        },
    )
    model = Model(partitioned)
    history: dict[str, dict] = {}
    city_of: dict[int, str] = {}
    next_key = 0
    clock = 1000

    def fresh(n: int) -> list[dict]:
        nonlocal next_key, clock
        rows = []
        for _ in range(n):
            city = rng.choice(CITIES)
            city_of[next_key] = city
            clock += 1
            rows.append(_row(rng, next_key, city, clock))
            next_key += 1
        return rows

    for step in range(steps):
        existing = list(city_of)
        op = "bulk_insert" if step == 0 else rng.choice(["upsert", "upsert", "upsert", "insert", "delete"])
        if op in ("bulk_insert", "insert"):
            batch = fresh(rng.randint(20, 200))
            getattr(table, op)(pa.Table.from_pylist(batch, schema=_schema()))
            model.insert(batch)
        elif op == "upsert":
            batch = fresh(rng.randint(0, 40))
            for key in rng.sample(existing, min(len(existing), rng.randint(1, 60))):
                clock += 1
                # Late events: sometimes older than what the table holds.
                ts = clock if rng.random() < 0.7 else rng.randint(0, 1000)
                batch.append(_row(rng, key, city_of[key], ts, deleted=rng.random() < 0.1))
                if rng.random() < 0.2:  # a duplicate of the same key in the same batch
                    batch.append(_row(rng, key, city_of[key], ts + rng.choice([-1, 0, 1])))
            rng.shuffle(batch)
            table.upsert(pa.Table.from_pylist(batch, schema=_schema()))
            model.upsert(batch)
        else:
            victims = rng.sample(existing, min(len(existing), rng.randint(1, 30)))
            keys = [{"id": k, "city": city_of[k]} for k in victims]
            table.delete(pa.Table.from_pylist(keys))
            model.delete(keys)
        expected = model.expected()
        got = rows_by(table.read(), USER_COLUMNS, ["id", "city"])
        assert got == expected, f"shoal snapshot differs from the model after step {step} ({op})"
        oracle = rows_by(hudi_rs_read(path), USER_COLUMNS, ["id", "city"])
        assert oracle == expected, f"hudi-rs snapshot differs from the model after step {step} ({op})"
        history[table.latest_instant()] = dict(model.rows)
        if table_type == "MERGE_ON_READ":
            _check_read_optimized(table, path, model, history, step)


def _check_read_optimized(table, path, model, history, step) -> None:
    columns = ["_hoodie_commit_time", *USER_COLUMNS]
    ours = rows_by(table.read(query_type="read_optimized"), columns, ["id", "city"])
    theirs = rows_by(hudi_rs_read(path, read_optimized=True), columns, ["id", "city"])
    assert ours == theirs, f"read-optimized view differs from hudi-rs's after step {step}"
    for row in ours:
        commit = row.pop("_hoodie_commit_time")
        assert history[commit].get(model.identity(row)) == row, f"stale or invented row {row} at step {step}"


TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_partitioned(tmp_path, seed, table_type):
    _run_sequence(tmp_path, seed, partitioned=True, steps=12, table_type=table_type)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("seed", [11, 12])
def test_random_operations_non_partitioned(tmp_path, seed, table_type):
    _run_sequence(tmp_path, seed, partitioned=False, steps=12, table_type=table_type)
