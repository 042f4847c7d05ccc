"""Table services combined as an operator runs them on a production table: savepoints made and
deleted between incremental cleans, compactions, archival and restores. Expected rows come from
a model of the writes; hudi-rs reads every state too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidArgumentError
from tests.hudi_oracle import hudi_rs_read, rows_by

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
COLUMNS = ["id", "part", "ts", "v"]


class _Model:
    def __init__(self, path: Path, table_type: str, options: dict[str, str] | None = None) -> None:
        self.path = str(path)
        self.table = shoal.Table.create(
            self.path,
            name="mix",
            table_type=table_type,
            record_key="id",
            partition_by="part",
            ordering_field="ts",
            options={
                "hoodie.clean.automatic": "false",
                "hoodie.archive.automatic": "false",
                "hoodie.parquet.small.file.limit": "0",
                "hoodie.cleaner.commits.retained": "1",
                **(options or {}),
            },
        )
        self.rows: dict[int, dict] = {}
        self.ts = 0

    def upsert(self, ids: list[int], tag: str) -> str:
        batch = []
        for i in ids:
            self.ts += 1
            batch.append({"id": i, "part": f"p{i % 3}", "ts": self.ts, "v": f"{tag}-{i}"})
        instant = self.table.upsert(pa.Table.from_pylist(batch, schema=SCHEMA))
        self.rows.update({r["id"]: r for r in batch})
        return instant

    def overwrite_p0(self, ids: list[int]) -> str:
        """insert_overwrite of partition p0 with ``ids`` (each a multiple of 3)."""
        batch = []
        for i in ids:
            self.ts += 1
            batch.append({"id": i, "part": "p0", "ts": self.ts, "v": f"ow-{i}"})
        instant = self.table.insert_overwrite(pa.Table.from_pylist(batch, schema=SCHEMA))
        self.rows = {k: r for k, r in self.rows.items() if r["part"] != "p0"}
        self.rows.update({r["id"]: r for r in batch})
        return instant

    def active(self) -> set[str]:
        return {i.requested_time for i in self.table.instants()}

    def check(self) -> None:
        want = sorted(self.rows.values(), key=lambda r: r["id"])
        assert rows_by(self.table.read(), COLUMNS, ["id"]) == want
        assert rows_by(hudi_rs_read(self.path), COLUMNS, ["id"]) == want


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_incremental_clean_after_a_savepoint_is_deleted_frees_what_it_pinned(tmp_path, table_type):
    """A savepoint pins the slices of every partition as of its commit, not only those its
    commit wrote. Once it is deleted, the next incremental clean lists every partition (as
    Hudi's ``isAnySavepointDeleted`` does): a partition only an older commit wrote and no later
    commit touches kept its savepointed slice for good, which only a full clean removed."""
    m = _Model(tmp_path / "t", table_type)
    m.upsert(list(range(30)), "a")  # p0, p1 and p2
    saved = m.upsert([1, 4], "b")  # p1 only; the savepoint pins p0's slice of the first commit too
    m.table.savepoint(saved)
    for k in range(2):
        m.upsert([0, 3, 6], f"p0-{k}")  # p0 only: the savepointed p0 slice is an older one now
        if table_type == "MERGE_ON_READ":
            m.table.compact()
    m.upsert([7], "c")  # p1 only
    assert m.table.clean()  # keeps the savepointed p0 slice
    m.table.delete_savepoint(saved)
    m.upsert([10], "d")  # p1 only from here on: p0 is outside the incremental window
    m.upsert([13], "e")
    assert m.table.clean()
    m.check()
    # Nothing is left for a clean that lists every partition.
    assert m.table.clean(options={"hoodie.cleaner.incremental.mode": "false"}) == []
    m.check()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shoal.cli", *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
    )


def test_an_operator_savepoints_cleans_and_restores_with_python_m_shoal_cli(tmp_path):
    """``python -m shoal.cli`` runs the ``shoal`` command (where the console script is not on
    the PATH): a savepoint of an older commit survives a clean that keeps one commit, and a
    restore to it brings its rows back."""
    m = _Model(tmp_path / "t", "MERGE_ON_READ")
    m.upsert(list(range(30)), "a")
    saved = m.upsert(list(range(0, 30, 2)), "b")
    rows_then = dict(m.rows)
    done = _cli("savepoint", m.path, saved, "--comment", "before the backfill")
    assert done.returncode == 0, done.stderr
    assert saved in done.stdout
    m.upsert(list(range(1, 30, 3)), "c")
    assert m.table.compact()
    m.upsert(list(range(2, 30, 5)), "d")
    done = _cli("clean", m.path, "--retain-commits", "1")
    assert done.returncode == 0, done.stderr
    m.check()
    want = sorted(rows_then.values(), key=lambda r: r["id"])
    assert rows_by(m.table.read(as_of=saved), COLUMNS, ["id"]) == want
    done = _cli("restore", m.path, saved)
    assert done.returncode == 0, done.stderr
    m.rows = rows_then
    m.check()


FILE_VERSIONS = {
    "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
    "hoodie.cleaner.fileversions.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_archival_passes_a_replace_commit_the_file_versions_cleaner_cleaned(tmp_path, table_type):
    """A KEEP_LATEST_FILE_VERSIONS clean records no earliest retained commit. Archival took that
    for "nothing cleaned yet" and never passed the first replace commit, so the active timeline
    grew for good; as in Hudi, the clean's time bounds it instead (the clean removed the file
    groups replaced before it)."""
    m = _Model(tmp_path / "t", table_type, FILE_VERSIONS)
    m.upsert(list(range(30)), "a")
    replace = m.overwrite_p0([3, 6, 300])
    for k in range(6):
        m.upsert([1 + 3 * k, 2 + 3 * k, 3], f"w{k}")
        if table_type == "MERGE_ON_READ":
            m.table.compact()
        m.table.clean()
        m.table.archive()
        m.check()
    assert replace not in m.active()
    completed = [i for i in m.table.instants() if i.is_completed and i.action.value != "clean"]
    assert len(completed) <= 3 + 1  # keep.max.commits, and the compaction of the last write
    m.check()


def test_archival_keeps_a_replace_commit_whose_replaced_group_a_pending_compaction_kept(tmp_path):
    """A file-versions clean skips the slices of a replaced file group that a compaction
    planned before the replace still reads. Archival keeps the replace commit until a later
    clean removed them: without it the replaced group's rows would be visible again."""
    m = _Model(
        tmp_path / "t",
        "MERGE_ON_READ",
        {**FILE_VERSIONS, "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"},
    )
    m.upsert(list(range(30)), "a")
    m.upsert([0, 3, 6], "u")  # logs in p0 only
    planned = m.table.schedule_compaction()
    assert planned is not None
    replace = m.overwrite_p0([3, 6, 300])
    for k in range(4):  # p1 and p2 only, compacted at once
        m.upsert([1 + 3 * k, 2 + 3 * k], f"w{k}")
        m.table.run_compaction(m.table.schedule_compaction())
    assert m.table.clean()  # keeps the replaced p0 group: the planned compaction reads it
    m.table.run_compaction(planned)
    m.table.archive()
    assert replace in m.active()
    m.check()
    assert m.table.clean()  # the replaced group goes now
    m.table.archive()
    assert replace not in m.active()
    m.check()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rolling_back_the_only_commit_archival_left_is_refused(tmp_path, table_type):
    """Archival leaves a few commits; rolling them back one by one is fine until the last one:
    with no data instant on the active timeline, readers (shoal's and hudi-rs's) take the
    archived commits' files for uncommitted and read the table as empty, and the archived rows
    came back with the next commit. That rollback is refused and changes nothing."""
    m = _Model(
        tmp_path / "t",
        table_type,
        {
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
        },
    )
    states = []
    for k in range(6):
        m.upsert(list(range(k, 30, 3)), f"u{k}")
        states.append(dict(m.rows))
    assert m.table.archive().archived
    assert len(m.table.instants()) == 2
    m.table.rollback()
    m.rows = states[-2]
    m.check()
    before = m.table.instants()
    with pytest.raises(InvalidArgumentError, match="archived commits"):
        m.table.rollback()
    assert m.table.instants() == before
    m.check()
    m.upsert([100], "n")
    m.check()


def test_rolling_back_the_commit_after_a_savepoint_archival_passed_is_refused(tmp_path):
    """With ``hoodie.archive.beyond.savepoint`` archival keeps the savepointed commit and
    archives the ones after it. Rolling back the last commit after them would leave only the
    savepointed one on the timeline: readers take archived commits later than it for
    uncommitted and showed the savepoint's rows instead of the archived commits' ones, as a
    restore would (which is refused for that reason). The rollback is refused too."""
    m = _Model(
        tmp_path / "t",
        "COPY_ON_WRITE",
        {
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.archive.beyond.savepoint": "true",
        },
    )
    m.upsert(list(range(30)), "a")
    saved = m.upsert(list(range(0, 30, 2)), "s")
    m.table.savepoint(saved)
    states = []
    for k in range(6):
        m.upsert([1, 4], f"u{k}")  # rewrites p1's file group: the earlier versions go
        states.append(dict(m.rows))
    assert m.table.clean()
    archived = m.table.archive().archived
    assert saved not in {i.requested_time for i in archived}
    assert len([i for i in archived if i.requested_time > saved]) == 5
    m.check()
    before = m.table.instants()
    with pytest.raises(InvalidArgumentError, match="archived commits"):
        m.table.rollback()
    assert m.table.instants() == before
    m.check()
