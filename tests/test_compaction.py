"""Compaction of merge-on-read tables: plans, execution, trigger strategies, writes while a
compaction is pending, concurrent and failed compactions, and Hudi-written tables.

Expected rows come from an in-memory model of what the test wrote (or, for Hudi's own tables,
from the table before compaction); every state is also read by hudi-rs."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal import _native
from shoal.errors import CommitConflictError, InstantNotFoundError, InvalidArgumentError, UnsupportedError
from shoal.executor.local import LocalExecutor
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.services import compaction as svc
from shoal.timeline.instant import Action
from shoal.timeline.instant_time import parse_instant
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.test_fixtures import MOR_FIXTURES, _canonical, unzip_table

CITIES = ["sf", "nyc", "chennai"]
COLUMNS = ["id", "city", "ts", "fare"]
# Small files (and blooms sized for them) so that partitions hold several file groups.
SMALL_FILES = {
    "hoodie.parquet.max.file.size": "6000",
    "hoodie.parquet.small.file.limit": "4500",
    "hoodie.index.bloom.num_entries": "200",
    "hoodie.bloom.index.filter.dynamic.max.entries": "400",
}


def _schema() -> pa.Schema:
    return pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])


class Harness:
    """A MOR table and the model of its rows: key -> row, event-time ordering on ``ts``."""

    def __init__(self, path: Path, options: dict | None = None, executor: LocalExecutor | None = None):
        self.path = str(path)
        self.table = shoal.Table.create(
            self.path,
            name="compaction_test",
            table_type="MERGE_ON_READ",
            record_key="id",
            partition_by="city",
            ordering_field="ts",
            options={**SMALL_FILES, **(options or {})},
        )
        if executor is not None:
            self.table.executor = executor
        self.rows: dict[int, dict] = {}
        self.clock = 0
        self.rng = random.Random(7)
        # hudi-rs 0.5.0 ignores v6 log files named with an instant that is not a completed
        # commit, so the logs a pending compaction's slice receives stay invisible to it until
        # the compaction commits (Java readers merge them, HUDI_FORMAT §9.2 step 5). While a
        # compaction is pending, hudi-rs is expected to show the version of the planned file
        # groups' keys as of scheduling (deletes go to those logs too); a rewrite of such a
        # group makes it current.
        self.file_id_of: dict[int, str] = {}
        self.frozen_groups: set[str] = set()
        self.frozen_rows: dict[int, dict] = {}
        self.stale: set[int] = set()
        self.deleted_in: set[int] = set()  # keys deleted in the new logs of frozen groups
        self.deleted_city: dict[int, str] = {}

    def freeze(self, planned: set[str]) -> None:
        """A compaction planning ``planned`` file groups was scheduled (see __init__)."""
        self.file_id_of = _file_ids(self)
        self.frozen_groups = set(planned)
        self.frozen_rows = {k: dict(r) for k, r in self.rows.items() if self.file_id_of[k] in planned}
        self.stale = set()

    def thaw(self) -> None:
        """The pending compaction completed."""
        self.frozen_groups, self.frozen_rows, self.stale = set(), {}, set()
        self.deleted_in = set()

    def _row(self, key: int, deleted_city: str | None = None) -> dict:
        self.clock += 1
        city = (
            deleted_city
            or self.rows.get(key, {}).get("city")
            or self.deleted_city.get(key)
            or CITIES[key % 3]
        )
        return {"id": key, "city": city, "ts": self.clock, "fare": round(self.rng.uniform(1, 99), 2)}

    def insert(self, keys) -> str:
        batch = [self._row(k) for k in keys]
        t = self.table.insert(pa.Table.from_pylist(batch, schema=_schema()))
        self.rows.update({r["id"]: r for r in batch})
        return t

    def bulk_insert(self, keys) -> str:
        batch = [self._row(k) for k in keys]
        t = self.table.bulk_insert(pa.Table.from_pylist(batch, schema=_schema()))
        self.rows.update({r["id"]: r for r in batch})
        return t

    def upsert(self, keys) -> str:
        batch = [self._row(k) for k in keys]
        t = self.table.upsert(pa.Table.from_pylist(batch, schema=_schema()))
        self.rows.update({r["id"]: r for r in batch})
        # A record of a key the slice's logs delete is written as a rewrite of the slice
        # instead (tasks/mor_append.py), which hudi-rs sees.
        rewritten = {self.file_id_of.get(k) for k in keys if k in self.deleted_in}
        for group in rewritten & self.frozen_groups:
            self.frozen_groups.discard(group)
            self.stale -= {j for j, g in self.file_id_of.items() if g == group}
        self.stale |= {k for k in keys if self.file_id_of.get(k) in self.frozen_groups}
        return t

    def delete(self, keys) -> str:
        t = self.table.delete(pa.Table.from_pylist([{"id": k, "city": self.rows[k]["city"]} for k in keys]))
        for k in keys:
            self.deleted_city[k] = self.rows.pop(k)["city"]
        self.deleted_in |= {k for k in keys if self.file_id_of.get(k) in self.frozen_groups}
        self.stale |= {k for k in keys if self.file_id_of.get(k) in self.frozen_groups}
        return t

    def expected(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: r["id"])

    def expected_by_hudi_rs(self) -> list[dict]:
        rows = {**self.rows, **{k: self.frozen_rows[k] for k in self.stale}}
        return sorted(rows.values(), key=lambda r: r["id"])

    def check(self, read_optimized: bool = True) -> None:
        """Snapshot of shoal equals the model, hudi-rs's the model as it can see it (see
        __init__); the read-optimized views agree."""
        expected = self.expected()
        assert rows_by(self.table.read(), COLUMNS, ["id"]) == expected, "shoal snapshot"
        assert rows_by(hudi_rs_read(self.path), COLUMNS, ["id"]) == self.expected_by_hudi_rs(), (
            "hudi-rs snapshot"
        )
        if read_optimized:
            cols = ["_hoodie_commit_time", *COLUMNS]
            ours = rows_by(self.table.read(query_type="read_optimized"), cols, ["id"])
            assert ours == rows_by(hudi_rs_read(self.path, read_optimized=True), cols, ["id"]), (
                "read-optimized"
            )

    def existing(self, n: int) -> list[int]:
        return self.rng.sample(sorted(self.rows), min(n, len(self.rows)))

    def timeline(self) -> Timeline:
        return Timeline.load(self.table.storage, self.table.config)


def _full_rows(table: pa.Table) -> list[dict]:
    """Every column but ``_hoodie_file_name`` (compaction moves records to a new file)."""
    cols = [c for c in table.column_names if c != "_hoodie_file_name"]
    return rows_by(table, cols, ["_hoodie_record_key"])


def _plan(path: str, instant: str) -> dict:
    data = Path(path, ".hoodie", f"{instant}.compaction.requested").read_bytes()
    return json.loads(_native.avro_container_decode(data))[0]


def _commit(path: str, instant: str) -> dict:
    return json.loads(Path(path, ".hoodie", f"{instant}.commit").read_text())


# ---- compaction of a table shoal wrote --------------------------------------------------------


def test_compaction_keeps_every_row_and_reports_what_it_merged(tmp_path):
    h = Harness(tmp_path / "t")
    h.bulk_insert(range(120))
    batches = [h.existing(25) for _ in range(4)]
    for keys in batches:
        h.upsert(keys)
    h.check()
    before = _full_rows(h.table.read())
    slices_before = {s.file_id: s for s in h.table.file_slices()}
    with_logs = {fid: s for fid, s in slices_before.items() if s.log_files}
    assert with_logs, "the upserts went to log files"
    keys_of = {}
    for fid, s in with_logs.items():
        assert s.base_file is not None
        keys_of[fid] = set(
            pq.read_table(os.path.join(h.path, s.base_file.path), columns=["id"]).column("id").to_pylist()
        )

    done = h.table.compact()

    assert len(done) == 1
    t = done[0]
    assert _full_rows(h.table.read()) == before  # commit times and sequence numbers preserved
    h.check()
    assert rows_by(h.table.read(query_type="read_optimized"), COLUMNS, ["id"]) == h.expected()
    hudi_ro = hudi_rs_read(h.path, read_optimized=True)
    assert _full_rows(hudi_ro) == before
    for s in h.table.file_slices():
        assert not s.log_files
        if s.file_id in with_logs:
            assert (
                s.base_instant == t and s.base_file is not None and s.base_file.name.endswith(f"_{t}.parquet")
            )
    # Every record of a compacted file names that file.
    names = hudi_ro.column("_hoodie_file_name").to_pylist()
    paths = hudi_ro.column("_hoodie_partition_path").to_pylist()
    for name, partition in zip(names, paths, strict=True):
        assert os.path.exists(os.path.join(h.path, partition, name))

    timeline = h.timeline()
    assert timeline.get(t).action == Action.COMPACTION and timeline.get(t).is_completed
    assert Path(h.path, ".hoodie", f"{t}.compaction.inflight").read_bytes() == b""
    assert not Path(h.path, ".hoodie", ".temp", t).exists()
    commit = _commit(h.path, t)
    assert commit["compacted"] is True and commit["operationType"] == "COMPACT"
    assert json.loads(commit["extraMetadata"]["schema"])["fields"][0]["name"] == "id"
    stats = [s for lst in commit["partitionToWriteStats"].values() for s in lst]
    assert {s["fileId"] for s in stats} == set(with_logs)
    for s in stats:
        old = with_logs[s["fileId"]]
        group = keys_of[s["fileId"]]
        updated = [group & set(keys) for keys in batches]
        assert s["prevCommit"] == old.base_instant
        assert s["path"] == f"{old.partition_path}/{Path(s['path']).name}"
        assert s["partitionPath"] == old.partition_path
        assert s["totalLogFilesCompacted"] == len(old.log_files)
        assert s["totalLogSizeCompacted"] == sum(lf.size for lf in old.log_files)
        assert s["totalLogRecords"] == sum(len(u) for u in updated)
        assert s["totalUpdatedRecordsCompacted"] == len(set().union(*updated))
        assert s["numUpdateWrites"] == len(set().union(*updated))
        assert s["numWrites"] == len(group) and s["numInserts"] == 0 and s["numDeletes"] == 0
        assert (
            s["fileSizeInBytes"] == s["totalWriteBytes"] == os.path.getsize(os.path.join(h.path, s["path"]))
        )


def test_plan_is_hudis_compaction_plan(tmp_path):
    h = Harness(tmp_path / "t")
    h.bulk_insert(range(90))
    h.upsert(h.existing(30))
    h.upsert(h.existing(5))
    slices = {s.file_id: s for s in h.table.file_slices() if s.log_files}
    t = h.table.schedule_compaction()
    assert t is not None and h.table.pending_compactions() == [t]
    plan = _plan(h.path, t)
    assert plan["version"] == 2 and plan["strategy"] is None and plan["preserveHoodieMetadata"] is False
    ops = plan["operations"]
    assert {op["fileId"] for op in ops} == set(slices)
    sizes = [op["metrics"]["TOTAL_LOG_FILES_SIZE"] for op in ops]
    assert sizes == sorted(sizes, reverse=True)
    for op in ops:
        s = slices[op["fileId"]]
        assert op["partitionPath"] == s.partition_path
        assert op["baseInstantTime"] == s.base_instant
        assert op["dataFilePath"] == s.base_file.name and "/" not in op["dataFilePath"]
        assert op["deltaFilePaths"] == [
            lf.name for lf in sorted(s.log_files, key=lambda lf: lf.parsed.sort_key())
        ]
        assert op["metrics"]["TOTAL_LOG_FILES"] == len(s.log_files)
        assert op["metrics"]["TOTAL_LOG_FILES_SIZE"] == sum(lf.size for lf in s.log_files)
        read_mb = (s.base_file.size + sum(lf.size for lf in s.log_files)) // (1 << 20)
        assert op["metrics"]["TOTAL_IO_READ_MB"] == read_mb
        assert op["metrics"]["TOTAL_IO_MB"] == read_mb + s.base_file.size // (1 << 20)
    # The schema embedded in the file is the one Hudi writes, so Java resolves it as its own.
    data = Path(h.path, ".hoodie", f"{t}.compaction.requested").read_bytes()
    assert b'"name":"HoodieCompactionPlan"' in data.replace(b" ", b"")
    h.check()  # a pending compaction changes no row
    assert h.table.run_compaction(t).compacted
    assert h.table.pending_compactions() == []
    # Running a completed compaction again is a no-op that returns its metadata.
    assert h.table.run_compaction(t).operation_type == "COMPACT"
    h.check()


def test_compaction_of_an_evolved_schema(tmp_path):
    """Log records with a column the base file lacks compact into a file with that column."""
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path, name="evolved", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts"
    )
    table.insert(pa.Table.from_pylist([{"id": i, "ts": 1} for i in range(10)]))
    table.upsert(pa.Table.from_pylist([{"id": i, "ts": 2, "note": f"n{i}"} for i in range(0, 10, 3)]))
    expected = [
        {"id": i, "ts": 2 if i % 3 == 0 else 1, "note": f"n{i}" if i % 3 == 0 else None} for i in range(10)
    ]
    assert rows_by(table.read(), ["id", "ts", "note"], ["id"]) == expected
    assert len(table.compact()) == 1
    for rows in (
        table.read(),
        table.read(query_type="read_optimized"),
        hudi_rs_read(path),
        hudi_rs_read(path, read_optimized=True),
    ):
        assert rows_by(rows, ["id", "ts", "note"], ["id"]) == expected


# ---- validation ----------------------------------------------------------------------------------


def test_schedule_validation(tmp_path):
    h = Harness(tmp_path / "t")
    first = h.bulk_insert(range(30))
    second = h.upsert(h.existing(10))
    files_before = sorted(os.listdir(os.path.join(h.path, ".hoodie")))

    for bad in (first, second, "20000101000000000"):
        with pytest.raises(InvalidArgumentError, match="at or after compaction instant"):
            h.table.schedule_compaction(bad)
    with pytest.raises(InvalidArgumentError, match="yyyyMMddHHmmssSSS"):
        h.table.schedule_compaction("tomorrow")
    assert sorted(os.listdir(os.path.join(h.path, ".hoodie"))) == files_before

    # A write that is still pending (here: one that died) comes before any compaction.
    timeline = h.timeline()
    dead = timeline.new_instant_time()
    timeline.create_requested(dead, Action.DELTA_COMMIT)
    with pytest.raises(CommitConflictError, match="earliest pending write"):
        h.table.schedule_compaction()
    h.upsert(h.existing(3))  # rolls the dead write back
    assert h.timeline().get(dead) is None

    t = h.table.schedule_compaction()
    assert t is not None
    # At or before a pending compaction, and everything is planned already: nothing to add.
    with pytest.raises(InvalidArgumentError, match="at or after compaction instant"):
        h.table.schedule_compaction(t)
    assert h.table.schedule_compaction() is None
    with pytest.raises(InstantNotFoundError):
        h.table.run_compaction(second)
    h.table.run_compaction(t)
    assert h.table.schedule_compaction() is None  # no log files left
    h.check()


def test_compaction_needs_a_merge_on_read_table(tmp_path):
    cow = shoal.Table.create(str(tmp_path / "cow"), name="cow", record_key="id", ordering_field="ts")
    cow.insert(pa.Table.from_pylist([{"id": 1, "ts": 1}]))
    with pytest.raises(InvalidArgumentError, match="MERGE_ON_READ"):
        cow.compact()


# ---- trigger strategies -----------------------------------------------------------------------------


def _due(h: Harness, options: dict, at: dt.datetime) -> str | None:
    wc = h.table.write_config.merged(options)
    return svc.schedule_compaction(h.table.storage, h.table.config, wc, clock=lambda: at)


def test_num_commits_strategy(tmp_path):
    h = Harness(tmp_path / "t")
    opts = {"hoodie.compact.inline.max.delta.commits": "3"}
    never = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)  # no time has elapsed, ever
    h.bulk_insert(range(40))
    h.upsert(h.existing(10))
    assert _due(h, opts, never) is None  # 2 delta commits
    assert h.table.compact(force=False, options=opts) == []
    h.upsert(h.existing(10))
    t = _due(h, opts, never)  # 3 delta commits since the start
    assert t is not None
    h.table.run_compaction(t)
    h.upsert(h.existing(10))
    h.upsert(h.existing(10))
    assert _due(h, opts, never) is None  # 2 since the compaction
    h.upsert(h.existing(10))
    assert _due(h, opts, never) is not None
    h.check()


@pytest.mark.parametrize(
    ("strategy", "commits", "seconds", "due"),
    [
        ("TIME_ELAPSED", 100, 599, False),
        ("TIME_ELAPSED", 100, 600, True),
        ("NUM_OR_TIME", 2, 0, True),
        ("NUM_OR_TIME", 100, 600, True),
        ("NUM_OR_TIME", 100, 599, False),
        ("NUM_AND_TIME", 2, 600, True),
        ("NUM_AND_TIME", 2, 599, False),
        ("NUM_AND_TIME", 100, 600, False),
    ],
)
def test_time_strategies_with_an_injected_clock(tmp_path, strategy, commits, seconds, due):
    h = Harness(tmp_path / "t")
    first = h.bulk_insert(range(30))
    h.upsert(h.existing(10))  # 2 delta commits; time counts from the first one
    opts = {
        "hoodie.compact.inline.trigger.strategy": strategy,
        "hoodie.compact.inline.max.delta.commits": str(commits),
        "hoodie.compact.inline.max.delta.seconds": "600",
    }
    at = parse_instant(first) + dt.timedelta(seconds=seconds)
    assert (_due(h, opts, at) is not None) == due


def test_time_elapsed_counts_from_the_last_compaction(tmp_path):
    h = Harness(tmp_path / "t")
    h.bulk_insert(range(30))
    h.upsert(h.existing(10))
    (t,) = h.table.compact()
    h.upsert(h.existing(10))
    opts = {
        "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
        "hoodie.compact.inline.max.delta.seconds": "60",
    }
    assert _due(h, opts, parse_instant(t) + dt.timedelta(seconds=59)) is None
    assert _due(h, opts, parse_instant(t) + dt.timedelta(seconds=60)) is not None


def test_inline_compaction_every_third_delta_commit(tmp_path):
    h = Harness(
        tmp_path / "t",
        {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3"},
    )
    for step in range(8):
        if step == 0:
            h.bulk_insert(range(60))
        elif step == 4:
            h.insert(range(60, 80))
        else:
            h.upsert(h.existing(15))
        h.check()
    actions = [(i.action, i.is_completed) for i in h.timeline().instants if i.action != Action.ROLLBACK]
    kinds = ["C" if a == Action.COMPACTION else "D" for a, _ in actions]
    assert "".join(kinds) == "DDDCDDDCDD"
    assert all(done for _, done in actions)


def test_schedule_inline_leaves_execution_to_a_runner(tmp_path):
    h = Harness(
        tmp_path / "t",
        {"hoodie.compact.schedule.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"},
    )
    h.bulk_insert(range(60))
    h.upsert(h.existing(20))
    pending = h.table.pending_compactions()
    assert len(pending) == 1 and not Path(h.path, ".hoodie", f"{pending[0]}.commit").exists()
    h.freeze({op["fileId"] for op in _plan(h.path, pending[0])["operations"]})
    h.upsert(h.existing(20))  # during the pending compaction
    assert h.stale
    h.check()
    h.table.run_compaction(pending[0])
    h.thaw()
    h.check()


# ---- writes while a compaction is pending ----------------------------------------------------------


def test_writes_during_a_pending_compaction(tmp_path):
    h = Harness(tmp_path / "t")
    h.bulk_insert(range(150))
    h.upsert(h.existing(40))
    t = h.table.schedule_compaction()
    assert t is not None
    planned = {op["fileId"] for op in _plan(h.path, t)["operations"]}
    h.freeze(planned)
    planned_keys = [k for k in sorted(h.rows) if h.file_id_of[k] in planned]
    assert len(planned_keys) >= 30

    # Updates of planned file groups, twice (the second appends to the new slice's log).
    h.upsert(planned_keys[:20])
    h.check()
    h.upsert(planned_keys[10:30] + h.existing(10))
    h.check()
    new_logs = [
        n for n in _all_files(h.path) if (p := parse_log_file_name(n)) is not None and p.instant_time == t
    ]
    assert new_logs, "updates of planned file groups go to log files of the compaction's slice"
    assert {parse_log_file_name(n).file_id for n in new_logs} <= planned
    # New records, and deletes in planned file groups (delete blocks in the new slice's logs).
    h.insert(range(150, 190))
    h.check()
    group = h.file_id_of[planned_keys[-1]]
    h.delete([k for k in planned_keys if h.file_id_of[k] == group][:3])
    h.check()
    # Records of other keys are still appended; a record of a deleted key would collapse with
    # its delete in the log, so the group's slice is rewritten instead.
    in_group = [k for k in planned_keys if h.file_id_of[k] == group]
    h.upsert(in_group[3:5])
    h.check()
    assert group in h.frozen_groups
    h.upsert(in_group[:1])
    h.check()
    assert group not in h.frozen_groups
    assert h.stale, "some planned file groups still have updates only Java-style readers see"

    commit = h.table.run_compaction(t)
    assert {s.fileId for s in commit.write_stats()} == planned
    h.thaw()
    h.check()
    # Logs written during the compaction now sit on top of its base files.
    for s in h.table.file_slices():
        if s.file_id in planned and s.base_instant == t:
            assert all(lf.instant_time == t for lf in s.log_files)
    h.upsert(h.existing(30))
    h.check()
    h.table.compact()
    h.check()
    assert all(not s.log_files for s in h.table.file_slices())


def _file_ids(h: Harness) -> dict[int, str]:
    """Record key -> file group, from the base file (or, for log records, file id) a row names."""
    out = {}
    for row in h.table.read(columns=["id", "_hoodie_file_name"]).to_pylist():
        parsed = parse_base_file_name(row["_hoodie_file_name"])
        out[row["id"]] = parsed.file_id if parsed is not None else row["_hoodie_file_name"]
    return out


def _all_files(path: str) -> list[str]:
    """Names of the data files (everything outside ``.hoodie``)."""
    return [f for d, _, files in os.walk(path) for f in files if ".hoodie" not in Path(d).parts]


def test_a_write_racing_a_compaction_it_did_not_see_is_rolled_back(tmp_path, monkeypatch):
    """A compaction scheduled after a write planned (another process) conflicts with the write
    if it plans a file group the write appended to: the write is rolled back and retried."""
    h = Harness(tmp_path / "t")
    h.bulk_insert(range(60))
    h.upsert(range(0, 60, 2))
    from shoal.write.writer import Writer

    original = Writer._execute
    scheduled = []

    def racing(self, *args, **kwargs):
        if not scheduled:
            scheduled.append(svc.schedule_compaction(self.storage, self.config, self.wc, force=True))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Writer, "_execute", racing)
    with pytest.raises(CommitConflictError, match="was rolled back"):
        h.table.upsert(pa.Table.from_pylist([h._row(k) for k in range(0, 60, 2)], schema=_schema()))
    monkeypatch.setattr(Writer, "_execute", original)
    assert scheduled[0] is not None
    timeline = h.timeline()
    assert not timeline.pending_data_instants()
    assert any(i.action == Action.ROLLBACK for i in timeline.instants)
    h.check()  # the model never took the failed batch
    h.upsert(range(0, 60, 3))
    h.table.run_compaction(scheduled[0])
    h.check()


# ---- concurrent and failed compactions --------------------------------------------------------------


def test_compaction_in_a_thread_while_another_thread_upserts(tmp_path):
    h = Harness(tmp_path / "t")
    h.bulk_insert(range(200))
    h.upsert(h.existing(50))
    writes_done = threading.Event()
    compacted = threading.Event()
    compactions: list[str] = []
    errors: list[BaseException] = []

    def writer():
        try:
            for step in range(12):
                h.upsert(h.existing(30))
                if step % 4 == 3:
                    h.insert(range(200 + step * 10, 210 + step * 10))
                if step == 3:
                    # Make sure the two really overlap: wait for a compaction to have run.
                    assert compacted.wait(30)
        except BaseException as e:
            errors.append(e)
        finally:
            writes_done.set()

    def compactor():
        try:
            while not writes_done.is_set():
                done = h.table.compact()
                compactions.extend(done)
                if done:
                    compacted.set()
        except BaseException as e:
            errors.append(e)
            compacted.set()

    threads = [threading.Thread(target=writer), threading.Thread(target=compactor)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors
    assert compactions
    h.check()
    timeline = h.timeline()
    deltas = [i.requested_time for i in timeline.instants if i.action == Action.DELTA_COMMIT]
    assert any(deltas[0] < c < deltas[-1] for c in compactions), "compactions ran between writes"
    assert not timeline.pending()
    h.table.compact()
    h.check()


def test_async_runner_executes_what_the_writer_schedules(tmp_path):
    h = Harness(
        tmp_path / "t",
        {"hoodie.compact.schedule.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"},
    )
    h.bulk_insert(range(150))
    stop = threading.Event()
    ran: list[str] = []
    errors: list[BaseException] = []

    def runner():
        try:
            while not stop.is_set() or h.table.pending_compactions():
                for t in h.table.pending_compactions():
                    h.table.run_compaction(t)
                    ran.append(t)
                stop.wait(0.01)
        except BaseException as e:
            errors.append(e)

    th = threading.Thread(target=runner)
    th.start()
    try:
        for _ in range(10):
            h.upsert(h.existing(25))
    finally:
        stop.set()
        th.join(120)
    assert not errors, errors
    assert ran
    assert not h.table.pending_compactions()
    h.check()


def test_a_killed_compaction_is_rerun_by_the_next_compaction(tmp_path, monkeypatch):
    h = Harness(tmp_path / "t", executor=LocalExecutor(max_workers=1))
    h.bulk_insert(range(150))
    h.upsert(h.existing(60))
    import shoal.tasks.compact as task

    real_write, real_spliced = task.write_base_file, task.write_spliced_base_file
    calls: list[str] = []

    def killed_on_second_file(real):
        def write(storage, path, *args, **kwargs):
            if path not in calls:
                calls.append(path)
            if len(calls) == 2:
                # Killed halfway through the second file.
                storage.write_bytes(path, b"PAR1 torn")
                raise RuntimeError("compactor killed")
            return real(storage, path, *args, **kwargs)

        return write

    monkeypatch.setattr(task, "write_base_file", killed_on_second_file(real_write))
    monkeypatch.setattr(task, "write_spliced_base_file", killed_on_second_file(real_spliced))
    with pytest.raises(RuntimeError, match="compactor killed"):
        h.table.compact()
    monkeypatch.setattr(task, "write_base_file", real_write)
    monkeypatch.setattr(task, "write_spliced_base_file", real_spliced)
    (t,) = h.table.pending_compactions()
    assert Path(h.path, ".hoodie", f"{t}.compaction.inflight").exists()
    assert not Path(h.path, ".hoodie", f"{t}.commit").exists()
    leftovers = [n for n in _all_files(h.path) if t in n]
    assert len(leftovers) == 2  # the first base file and the torn temporary file of the second
    # Readers never see the uncommitted files (hudi-rs reads the complete leftover base file
    # once a later commit exists, which holds the same rows as the slice it compacts).
    h.check(read_optimized=False)
    # Writes go on; updates of planned file groups land in the compaction's slice.
    h.freeze({op["fileId"] for op in _plan(h.path, t)["operations"]})
    h.upsert(h.existing(40))
    h.check(read_optimized=False)

    done = h.table.compact()
    h.thaw()
    assert done[0] == t
    timeline = h.timeline()
    rollbacks = [i for i in timeline.instants if i.action == Action.ROLLBACK]
    assert len(rollbacks) == 1
    meta = json.loads(_native.avro_container_decode(timeline.read_instant(rollbacks[0])))[0]
    assert meta["instantsRollback"] == [{"commitTime": t, "action": "compaction"}]
    deleted = sorted(
        Path(p).name for m in meta["partitionMetadata"].values() for p in m["successDeleteFiles"]
    )
    assert deleted == sorted(leftovers)
    assert not any(n.endswith(".compacting") for n in _all_files(h.path))
    assert not Path(h.path, ".hoodie", ".temp", t).exists()
    h.check()


# ---- Hudi-written tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_compacting_hudi_written_tables(tmp_path, name):
    path = str(unzip_table(name, tmp_path))
    table = shoal.Table(path)
    hoodie = os.path.join(path, ".hoodie")
    if table.config.table_version >= 8 or not table.config.populate_meta_fields:
        before = sorted(os.listdir(hoodie))
        with pytest.raises(UnsupportedError):
            table.compact()
        assert sorted(os.listdir(hoodie)) == before
        return
    snapshot = table.read()
    if snapshot.num_rows == 0:
        assert table.compact() == []
        return
    cols = [c for c in snapshot.column_names if c != "_hoodie_file_name"]
    keys = ["_hoodie_record_key"]
    expected = _canonical(snapshot.select(cols), keys)
    assert _canonical(hudi_rs_read(path).select(cols), keys) == expected
    with_logs = {s.file_id: s for s in table.file_slices() if s.log_files}
    rows_per_group = {}
    for row in snapshot.select(["_hoodie_file_name"]).to_pylist():
        parsed = parse_base_file_name(row["_hoodie_file_name"])
        fid = parsed.file_id if parsed is not None else row["_hoodie_file_name"]
        rows_per_group[fid] = rows_per_group.get(fid, 0) + 1

    done = table.compact()

    assert len(done) == (1 if with_logs else 0)
    assert _canonical(table.read().select(cols), keys) == expected
    assert _canonical(table.read(query_type="read_optimized").select(cols), keys) == expected
    assert _canonical(hudi_rs_read(path).select(cols), keys) == expected
    assert _canonical(hudi_rs_read(path, read_optimized=True).select(cols), keys) == expected
    if done:
        stats = [s for lst in _commit(path, done[0])["partitionToWriteStats"].values() for s in lst]
        assert {s["fileId"] for s in stats} == set(with_logs)
        for s in stats:
            assert s["numWrites"] == rows_per_group.get(s["fileId"], 0)
            assert s["prevCommit"] == with_logs[s["fileId"]].base_instant
