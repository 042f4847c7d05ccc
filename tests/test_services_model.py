"""Model-based test of writes interleaved with every table service: random sequences of upserts
(late events, soft deletes, repeated keys), inserts, deletes, insert_overwrite (of some
partitions and of the table) and partition deletes mixed with compaction, clean,
archival, savepoints, restores, rollbacks of the latest commit and time-travel reads. After every
step shoal's snapshot and hudi-rs's equal the model; a time-travel read either equals the model as
of that instant or fails with CleanedInstantError; a service that refuses raises a typed error and
leaves the table as it was. The cleaner and the archiver keep few commits, so both run often.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import CleanedInstantError, ShoalError, UnsupportedError
from shoal.fs.view import FileSystemView
from shoal.services.clean import clean_metadata
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import SMALL_FILES, data_files
from tests.test_table_model import CITIES, USER_COLUMNS, Model, _row, _schema

KEY = ["id", "city"]


def _snapshot(rows: dict) -> list[dict]:
    return sorted(rows.values(), key=lambda r: (r["id"], r["city"]))


class Run:
    def __init__(self, tmp_path, seed: int, table_type: str, options: dict[str, str] | None = None) -> None:
        self.rng = random.Random(seed)
        self.path = str(tmp_path / "t")
        self.table_type = table_type
        self.table = shoal.Table.create(
            self.path,
            name="s",
            table_type=table_type,
            record_key="id",
            partition_by="city",
            ordering_field="ts",
            options={
                **SMALL_FILES,
                "hoodie.cleaner.commits.retained": "2",
                "hoodie.keep.min.commits": "3",
                "hoodie.keep.max.commits": "5",
                "hoodie.clean.automatic": "false",
                "hoodie.archive.automatic": "false",
                **(options or {}),
            },
        )
        self.model = Model(partitioned=True)
        # The model's rows as of each completed instant that is still on the table.
        self.history: dict[str, dict] = {}
        self.saved: dict[str, dict] = {}  # savepointed instant -> rows
        self.city_of: dict[int, str] = {}
        self.next_key = 0
        self.clock = 1000
        self.effects = {"clean": 0, "restore": 0, "rollback": 0, "compact": 0, "replace": 0}

    def timeline(self) -> Timeline:
        return Timeline.load(self.table.storage, self.table.config)

    def record(self) -> None:
        latest = self.timeline().last_completed_data_instant()
        assert latest is not None
        self.history[latest.requested_time] = dict(self.model.rows)

    def fresh(self, n: int) -> list[dict]:
        rows = []
        for _ in range(n):
            city = self.rng.choice(CITIES)
            self.city_of[self.next_key] = city
            self.clock += 1
            rows.append(_row(self.rng, self.next_key, city, self.clock))
            self.next_key += 1
        return rows

    # ---- steps ----------------------------------------------------------------------------

    def insert(self) -> None:
        batch = self.fresh(self.rng.randint(10, 80))
        self.table.insert(pa.Table.from_pylist(batch, schema=_schema()))
        self.model.insert(batch)
        self.record()

    def upsert(self) -> None:
        rng = self.rng
        batch = self.fresh(rng.randint(0, 20))
        live = [k for (_, k) in self.model.rows]
        for key in rng.sample(live, min(len(live), rng.randint(1, 30))):
            self.clock += 1
            ts = self.clock if rng.random() < 0.7 else rng.randint(0, 1000)
            batch.append(_row(rng, key, self.city_of[key], ts, deleted=rng.random() < 0.1))
            if rng.random() < 0.2:
                batch.append(_row(rng, key, self.city_of[key], ts + rng.choice([-1, 0, 1])))
        rng.shuffle(batch)
        self.table.upsert(pa.Table.from_pylist(batch, schema=_schema()))
        self.model.upsert(batch)
        self.record()

    def delete(self) -> None:
        live = [k for (_, k) in self.model.rows]
        if not live:
            return
        victims = self.rng.sample(live, min(len(live), self.rng.randint(1, 15)))
        keys = [{"id": k, "city": self.city_of[k]} for k in victims]
        self.table.delete(pa.Table.from_pylist(keys))
        self.model.delete(keys)
        self.record()

    def insert_overwrite(self) -> None:
        """New contents for one or two partitions: fresh keys and new versions of some of theirs."""
        cities = self.rng.sample(CITIES, self.rng.randint(1, 2))
        batch = []
        for city, key in list(self.model.rows):
            if city in cities and self.rng.random() < 0.5:
                self.clock += 1
                batch.append(_row(self.rng, key, city, self.clock))
        for _ in range(self.rng.randint(0, 20)):
            self.clock += 1
            city = self.rng.choice(cities)
            self.city_of[self.next_key] = city
            batch.append(_row(self.rng, self.next_key, city, self.clock))
            self.next_key += 1
        if not batch:
            return
        self.table.insert_overwrite(pa.Table.from_pylist(batch, schema=_schema()))
        self.effects["replace"] += 1
        written = {row["city"] for row in batch}
        self.model.rows = {k: r for k, r in self.model.rows.items() if k[0] not in written}
        self.model.insert(batch)
        self.record()

    def insert_overwrite_table(self) -> None:
        batch = self.fresh(self.rng.randint(0, 30))
        self.table.insert_overwrite_table(pa.Table.from_pylist(batch, schema=_schema()))
        self.effects["replace"] += 1
        self.model.rows = {}
        self.model.insert(batch)
        self.record()

    def delete_partition(self) -> None:
        held = sorted({city for city, _ in self.model.rows})
        if not held:
            return
        gone = self.rng.sample(held, 1)
        self.table.delete_partitions(gone)
        self.effects["replace"] += 1
        self.model.rows = {k: r for k, r in self.model.rows.items() if k[0] not in gone}
        self.record()

    def compact(self) -> None:
        done = self.table.compact()
        for instant in done:
            self.history[instant] = dict(self.model.rows)
        self.effects["compact"] += len(done)

    def clean(self) -> None:
        self.effects["clean"] += len(self.table.clean())

    def archive(self) -> None:
        self.table.archive()
        active = {i.requested_time for i in self.timeline().instants}
        for instant in [i for i in self.history if i not in active]:
            del self.history[instant]

    def savepoint(self) -> None:
        latest = self.timeline().last_completed_data_instant()
        if latest is None or latest.requested_time in self.saved:
            return
        try:
            instant = self.table.savepoint()
        except CleanedInstantError:
            return
        self.saved[instant] = dict(self.history[instant])

    def restore(self) -> None:
        if not self.saved:
            return
        target = max(self.saved)  # a restore is refused while a later savepoint exists
        self.table.restore(target)
        self.effects["restore"] += 1
        self.model.rows = dict(self.saved[target])
        for instant in [i for i in self.history if i > target]:
            del self.history[instant]

    def rollback(self) -> None:
        before = self.timeline()
        last = before.last_completed_data_instant()
        try:
            self.table.rollback()
        except ShoalError:
            assert self.timeline().instants == before.instants  # refused: nothing changed
            return
        assert last is not None
        self.effects["rollback"] += 1
        self.history.pop(last.requested_time, None)
        now = self.timeline().last_completed_data_instant()
        self.model.rows = dict(self.history[now.requested_time]) if now is not None else {}

    def time_travel(self) -> None:
        if not self.history:
            return
        instant = self.rng.choice(sorted(self.history))
        try:
            got = self.table.read(as_of=instant)
        except CleanedInstantError:
            return
        want = _snapshot(self.history[instant])
        assert rows_by(got, USER_COLUMNS, KEY) == want, f"read as of {instant} differs from the model"

    # ---- checks ---------------------------------------------------------------------------

    def check(self, step: int, op: str) -> None:
        want = _snapshot(self.model.rows)
        assert rows_by(self.table.read(), USER_COLUMNS, KEY) == want, f"shoal after step {step} ({op})"
        theirs = rows_by(hudi_rs_read(self.path), USER_COLUMNS, KEY)
        assert theirs == want, f"hudi-rs after step {step} ({op})"
        assert data_files(self.path) <= self.visible_files(), f"an orphan file after step {step} ({op})"

    def visible_files(self) -> set[str]:
        """Every base and log file of a committed file slice (archived commits included), of
        replaced file groups too: the cleaner removes those later."""
        view = _EveryFileGroup(self.table.storage, self.timeline())
        return {
            path
            for group in view.all_file_groups()
            for sl in group.ordered_slices()
            for path in ([sl.base_file.path] if sl.base_file else []) + [lf.path for lf in sl.log_files]
        }


class GlobalRun(Run):
    """The same sequences under a global index: upserts move records between partitions (half
    of them name another city), and deletes name any partition."""

    def __init__(self, tmp_path, seed: int, table_type: str) -> None:
        super().__init__(tmp_path, seed, table_type, {"hoodie.index.type": "GLOBAL_BLOOM"})

    def upsert(self) -> None:
        rng = self.rng
        batch = self.fresh(rng.randint(0, 20))
        for key in rng.sample(self.live(), min(len(self.model.rows), rng.randint(1, 30))):
            self.clock += 1
            ts = self.clock if rng.random() < 0.7 else rng.randint(0, 1000)
            batch.append(_row(rng, key, rng.choice(CITIES), ts, deleted=rng.random() < 0.1))
            if rng.random() < 0.2:  # the same key again, maybe in another partition
                batch.append(_row(rng, key, rng.choice(CITIES), ts + rng.choice([-1, 0, 1])))
        rng.shuffle(batch)
        self.table.upsert(pa.Table.from_pylist(batch, schema=_schema()))
        best: dict[int, dict] = {}
        for row in batch:  # combined by key alone; later rows win ties
            if row["id"] not in best or row["ts"] >= best[row["id"]]["ts"]:
                best[row["id"]] = row
        where = {key: (city, key) for city, key in self.model.rows}
        for key, row in best.items():
            current = self.model.rows.get(where[key]) if key in where else None
            if current is not None and current["ts"] > row["ts"]:
                continue  # a late event neither updates nor moves the record
            if key in where:
                del self.model.rows[where[key]]
            if not row["_hoodie_is_deleted"]:
                self.model.rows[(row["city"], key)] = row
        self.record()

    def delete(self) -> None:
        if not self.model.rows:
            return
        victims = set(self.rng.sample(self.live(), min(len(self.model.rows), self.rng.randint(1, 15))))
        keys = [{"id": k, "city": self.rng.choice(CITIES)} for k in sorted(victims)]
        self.table.delete(pa.Table.from_pylist(keys))
        self.model.rows = {k: r for k, r in self.model.rows.items() if k[1] not in victims}
        self.record()

    def live(self) -> list[int]:
        return sorted(key for _, key in self.model.rows)


class BeyondSavepointRun(Run):
    """The same sequences with ``hoodie.archive.beyond.savepoint`` and a compaction trigger that
    holds no delta commit back from archival: archival passes savepoints where readers allow
    it, and a restore over commits archived beyond its savepoint is refused."""

    def __init__(self, tmp_path, seed: int, table_type: str) -> None:
        super().__init__(
            tmp_path,
            seed,
            table_type,
            {
                "hoodie.archive.beyond.savepoint": "true",
                "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
            },
        )

    def restore(self) -> None:
        if not self.saved:
            return
        before = self.timeline()
        try:
            super().restore()
        except UnsupportedError:
            assert self.timeline().instants == before.instants  # refused: nothing changed
            self.effects["refused_restore"] = self.effects.get("refused_restore", 0) + 1


class RetiringRun(Run):
    """The same sequences where a deleted partition is not written again (until a restore or a
    rollback brings its records back): the cleaner deletes emptied partitions' directories, and
    time travel, restores and rollbacks meet tables without them."""

    def __init__(self, tmp_path, seed: int, table_type: str) -> None:
        self.open_cities = list(CITIES)
        super().__init__(tmp_path, seed, table_type)

    def fresh(self, n: int) -> list[dict]:
        rows = []
        for _ in range(n):
            city = self.rng.choice(self.open_cities)
            self.city_of[self.next_key] = city
            self.clock += 1
            rows.append(_row(self.rng, self.next_key, city, self.clock))
            self.next_key += 1
        return rows

    def insert_overwrite(self) -> None:
        self.upsert()

    def delete_partition(self) -> None:
        held = sorted({city for city, _ in self.model.rows} & set(self.open_cities))
        if len(self.open_cities) < 2 or not held:
            return
        gone = self.rng.choice(held)
        self.table.delete_partitions([gone])
        self.open_cities.remove(gone)
        self.effects["replace"] += 1
        self.model.rows = {k: r for k, r in self.model.rows.items() if k[0] != gone}
        self.record()

    def clean(self) -> None:
        for instant in self.table.clean():
            self.effects["clean"] += 1
            metadata = clean_metadata(self.timeline(), instant)
            deleted = [p for p, m in metadata["partitionMetadata"].items() if m["isPartitionDeleted"]]
            for partition in deleted:
                assert not (Path(self.path) / partition).exists(), partition
            self.effects["partitions_deleted"] = self.effects.get("partitions_deleted", 0) + len(deleted)


class _EveryFileGroup(FileSystemView):
    def _replaced_file_ids(self, completed: list) -> set[tuple[str, str]]:
        return set()


STEPS = {
    "insert": 2,
    "upsert": 6,
    "delete": 2,
    "insert_overwrite": 2,
    "insert_overwrite_table": 1,
    "delete_partition": 1,
    "compact": 2,
    "clean": 2,
    "archive": 2,
    "savepoint": 1,
    "restore": 1,
    "rollback": 2,
    "time_travel": 2,
}


COW, MOR = "COPY_ON_WRITE", "MERGE_ON_READ"


# Seeds under which every sequence cleans, restores, rolls back, replaces and (MOR) compacts.
# GlobalRun seed 8 on MOR found a late soft delete with ordering value 0 that shoal applied and
# Java and hudi-rs do not; seed 9 a restore to the only commit left whose older files shoal hid.
@pytest.mark.parametrize(
    ("run_class", "seed", "table_type"),
    [
        (Run, 3, COW),
        (Run, 5, COW),
        (Run, 3, MOR),
        (Run, 5, MOR),
        (GlobalRun, 6, COW),
        (GlobalRun, 9, COW),
        (GlobalRun, 8, MOR),
        (GlobalRun, 9, MOR),
        # Seed 827 archives a commit between two savepoints, and its restores are refused.
        (BeyondSavepointRun, 827, COW),
        (BeyondSavepointRun, 803, MOR),
        # Seeds under which the cleaner also deletes emptied partitions.
        (RetiringRun, 3, COW),
        (RetiringRun, 9, COW),
        (RetiringRun, 30, MOR),
        (RetiringRun, 32, MOR),
    ],
)
def test_writes_and_services_against_the_model(tmp_path, run_class, seed, table_type):
    run = run_class(tmp_path, seed, table_type)
    run.insert()
    ops = [op for op, weight in STEPS.items() for _ in range(weight)]
    for step in range(40):
        op = run.rng.choice(ops)
        if op == "compact" and table_type == "COPY_ON_WRITE":
            op = "upsert"
        getattr(run, op)()
        run.check(step, op)
    # The sequence did what it is about: files cleaned, commits undone, logs compacted.
    assert all(run.effects[e] > 0 for e in ("clean", "rollback", "replace")), run.effects
    assert run.effects["restore"] + run.effects.get("refused_restore", 0) > 0, run.effects
    assert run.effects["compact"] > 0 or table_type == "COPY_ON_WRITE"
    assert run.effects.get("partitions_deleted", 0) > 0 or run_class is not RetiringRun
