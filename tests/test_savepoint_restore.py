"""Savepoints pin file slices against the cleaner; restore rolls a table back to a savepoint."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

import shoal
from shoal.cli.main import main as cli_main
from shoal.errors import CleanedInstantError
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.services import clean as clean_mod
from shoal.services import restore as restore_mod
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline

from .hudi_oracle import hudi_rs_read, rows_by

SCHEMAS = Path(shoal.__file__).parent / "schemas"
COLUMNS = ["id", "part", "ts", "v"]
NO_AUTO_CLEAN = {"hoodie.clean.automatic": "false"}


def _batch(i: int) -> list[dict]:
    keys = sorted({i % 5, (i + 3) % 5, 50 + i})
    return [{"id": k, "part": f"p{k % 2}", "ts": i, "v": f"v{k}-{i}"} for k in keys]


class Built:
    """A table and the rows expected after each of its writes."""

    def __init__(self, path: Path, table_type: str) -> None:
        self.t = shoal.Table.create(
            str(path),
            name="t",
            table_type=table_type,
            record_key="id",
            partition_by="part",
            ordering_field="ts",
            options=NO_AUTO_CLEAN,
        )
        self.rows: dict[int, dict] = {}
        self.as_of: dict[str, list[dict]] = {}
        self.i = 0

    def write(self, n: int = 1) -> str:
        for _ in range(n):
            batch = _batch(self.i)
            self.i += 1
            instant = self.t.upsert(pa.Table.from_pylist(batch))
            self.rows.update({r["id"]: r for r in batch})
            self.as_of[instant] = self.expected()
        return instant

    def expected(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: r["id"])


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, COLUMNS, ["id"])


def _data_files(path: str) -> dict[str, bytes]:
    out = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            out[os.path.relpath(os.path.join(root, f), path)] = Path(root, f).read_bytes()
    return out


def _read_avro(path: str, name: str, schema: str) -> dict:
    data = (Path(path) / ".hoodie" / name).read_bytes()
    reader_schema = fastavro.parse_schema(json.loads((SCHEMAS / f"{schema}.avsc").read_text()))
    (record,) = list(fastavro.reader(io.BytesIO(data), reader_schema=reader_schema))
    return record


def _latest_files_as_of(path: str, instant: str) -> dict[str, set[str]]:
    """Per partition, the names of the files of every file group's latest slice as of
    ``instant``, from the file names alone."""
    bases: dict[tuple[str, str], str] = {}
    names = [f.rsplit("/", 1) for f in _data_files(path)]
    for partition, name in names:
        parsed = parse_base_file_name(name)
        if parsed is not None and parsed.instant_time <= instant:
            key = (partition, parsed.file_id)
            bases[key] = max(bases.get(key, ""), parsed.instant_time)
    out: dict[str, set[str]] = {}
    for partition, name in names:
        parsed = parse_base_file_name(name) or parse_log_file_name(name)
        if parsed is not None and bases.get((partition, parsed.file_id)) == parsed.instant_time:
            out.setdefault(partition, set()).add(name)
    return out


# ---- savepoints ----------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_savepointed_slices_survive_clean(tmp_path, table_type):
    b = Built(tmp_path / "t", table_type)
    b.write(2)
    pinned = b.write()
    expected_files = _latest_files_as_of(b.t.path, pinned)
    assert b.t.savepoint(pinned, user="ops", comment="before the backfill") == pinned
    b.write(4)
    if table_type == "MERGE_ON_READ":
        b.t.compact()
        b.write(2)
    early = min(b.as_of)
    (clean_time,) = b.t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    meta = _read_avro(b.t.path, f"{pinned}.savepoint", "HoodieSavepointMetadata.v6.writer")
    assert meta["savepointedBy"] == "ops" and meta["comments"] == "before the backfill"
    assert meta["version"] == 1 and meta["savepointedAt"] > 0
    listed = {p: set(m["savepointDataFile"]) for p, m in meta["partitionMetadata"].items()}
    assert listed == expected_files
    on_disk = {tuple(f.rsplit("/", 1)) for f in _data_files(b.t.path)}
    assert {(p, n) for p, names in listed.items() for n in names} <= on_disk
    plan = _read_avro(b.t.path, f"{clean_time}.clean.requested", "HoodieCleanerPlan.v6.writer")
    planned = {
        os.path.basename(i["filePath"]) for v in plan["filePathsToBeDeletedPerPartition"].values() for i in v
    }
    assert planned and not planned & {n for names in listed.values() for n in names}
    assert plan["extraMetadata"] == {"savepointed_timestamps": pinned}
    assert _rows(b.t.read(as_of=pinned)) == b.as_of[pinned]
    assert _rows(hudi_rs_read(b.t.path, as_of=pinned)) == b.as_of[pinned]
    with pytest.raises(CleanedInstantError, match="savepointed instants stay readable"):
        b.t.read(as_of=early)
    assert b.t.savepoints() == [pinned]
    assert _rows(b.t.read()) == b.expected()
    assert _rows(hudi_rs_read(b.t.path)) == b.expected()
    # Without the savepoint, the next clean takes the slices it kept.
    b.t.delete_savepoint(pinned)
    assert b.t.savepoints() == []
    assert not any(".savepoint" in n for n in os.listdir(Path(b.t.path) / ".hoodie"))
    assert b.t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    with pytest.raises(CleanedInstantError):
        b.t.read(as_of=pinned)
    assert _rows(b.t.read()) == b.expected()


def test_a_savepoint_made_after_a_clean_was_planned_is_respected(tmp_path, monkeypatch):
    b = Built(tmp_path / "t", "COPY_ON_WRITE")
    pinned = b.write(3)
    b.write(4)
    wc = clean_mod.WriteConfig({"hoodie.cleaner.commits.retained": "1"})
    pending = clean_mod.schedule_clean(b.t.storage, b.t.config, wc)
    assert pending is not None
    # shoal refuses to savepoint what a pending clean removes...
    with pytest.raises(CleanedInstantError):
        b.t.savepoint(pinned)
    # ...but another writer (Apache Hudi) may not know: the clean leaves the pinned files alone.
    monkeypatch.setattr(clean_mod, "ensure_retained", lambda *args: None)
    b.t.savepoint(pinned)
    monkeypatch.undo()
    assert b.t.clean() == [pending]
    assert _rows(b.t.read(as_of=pinned)) == b.as_of[pinned]
    assert _rows(b.t.read()) == b.expected()


def test_savepoint_refusals(tmp_path):
    b = Built(tmp_path / "t", "COPY_ON_WRITE")
    first = b.write()
    b.write(4)
    with pytest.raises(shoal.InstantNotFoundError):
        b.t.savepoint("20200101000000000")
    sp = b.t.savepoint()
    assert sp == max(b.as_of)
    with pytest.raises(shoal.InvalidArgumentError, match="savepointed already"):
        b.t.savepoint(sp)
    with pytest.raises(shoal.InstantNotFoundError):
        b.t.delete_savepoint(first)
    b.t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    hoodie = sorted(os.listdir(Path(b.t.path) / ".hoodie"))
    with pytest.raises(CleanedInstantError):
        b.t.savepoint(first)
    assert sorted(os.listdir(Path(b.t.path) / ".hoodie")) == hoodie
    # The savepoint does not hide the commit it shares its time with.
    assert [e.action for e in b.t.timeline if e.time == sp] == ["commit", "savepoint"]
    assert b.t.latest_instant() == sp


# ---- restore -------------------------------------------------------------------------------


def _fail_next_commit(monkeypatch) -> None:
    """The next write dies after writing its files, before its commit is published."""
    real = Timeline.complete

    def complete(self, instant, content):
        if instant.action in (Action.COMMIT, Action.DELTA_COMMIT):
            raise OSError("killed before the commit")
        return real(self, instant, content)

    monkeypatch.setattr(Timeline, "complete", complete)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_restore_to_a_savepoint(tmp_path, table_type, monkeypatch):
    mor = table_type == "MERGE_ON_READ"
    b = Built(tmp_path / "t", table_type)
    b.write(3)
    sp = b.t.savepoint()
    files_at_savepoint = _data_files(b.t.path)
    b.write(2)
    if mor:
        assert b.t.compact()
        b.write(1)
        assert b.t.schedule_compaction() is not None
        b.write(1)
    b.t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    with monkeypatch.context() as m:
        _fail_next_commit(m)
        with pytest.raises(OSError, match="killed"):
            b.t.upsert(pa.Table.from_pylist(_batch(99)))
    timeline = Timeline.load(b.t.storage, b.t.config)
    after = restore_mod.instants_to_roll_back(timeline, sp)[::-1]
    assert any(not i.is_completed for i in after)
    if mor:
        assert any(i.action == Action.COMPACTION and i.is_completed for i in after)
        assert any(i.action == Action.COMPACTION and not i.is_completed for i in after)

    restored = b.t.restore(sp)

    assert _rows(b.t.read()) == b.as_of[sp]
    assert _rows(hudi_rs_read(b.t.path)) == b.as_of[sp]
    # Every file written after the savepoint is gone, base files are as they were, and log files
    # start with the bytes they had (what later writes appended is neutralised by ROLLBACK command
    # blocks). The clean took older slices, never the savepointed ones.
    files = _data_files(b.t.path)
    assert set(files) <= set(files_at_savepoint)
    for name, data in files.items():
        if name.rsplit("/", 1)[1].startswith(".") and ".log." in name:
            assert data.startswith(files_at_savepoint[name])
        else:
            assert data == files_at_savepoint[name]
    pinned = _read_avro(b.t.path, f"{sp}.savepoint", "HoodieSavepointMetadata.v6.writer")
    by_partition = pinned["partitionMetadata"].items()
    assert {f"{p}/{n}" for p, m in by_partition for n in m["savepointDataFile"]} <= set(files)
    now = Timeline.load(b.t.storage, b.t.config)
    assert [i.action.value for i in now.instants if i.requested_time > sp] == ["clean", "restore"]
    plan = _read_avro(b.t.path, f"{restored}.restore.requested", "HoodieRestorePlan.v6.writer")
    assert plan["savepointToRestoreTimestamp"] == sp
    expected_infos = [
        {
            "commitTime": i.requested_time,
            "action": "commit" if i.action == Action.COMPACTION and i.is_completed else i.action.value,
        }
        for i in reversed(after)
    ]
    assert plan["instantsToRollback"] == expected_infos
    meta = _read_avro(b.t.path, f"{restored}.restore", "HoodieRestoreMetadata.v6.writer")
    assert meta["instantsToRollback"] == [i["commitTime"] for i in expected_infos]
    assert meta["restoreInstantInfo"] == expected_infos
    assert set(meta["hoodieRestoreMetadata"]) == {i["commitTime"] for i in expected_infos}
    for t, rollbacks in meta["hoodieRestoreMetadata"].items():
        assert [r["commitsRollback"] for r in rollbacks] == [[t]]

    # The table takes writes again, and time travel to the savepoint still works.
    b.rows = {r["id"]: r for r in b.as_of[sp]}
    b.write(2)
    assert _rows(b.t.read()) == b.expected()
    assert _rows(hudi_rs_read(b.t.path)) == b.expected()
    assert _rows(b.t.read(as_of=sp)) == b.as_of[sp]


def test_restore_refusals(tmp_path):
    b = Built(tmp_path / "t", "COPY_ON_WRITE")
    first = b.write()
    b.t.savepoint(first)
    second = b.write()
    b.t.savepoint(second)
    b.write()
    hoodie = sorted(os.listdir(Path(b.t.path) / ".hoodie"))
    with pytest.raises(shoal.InvalidArgumentError, match="delete them first"):
        b.t.restore(first)
    with pytest.raises(shoal.InstantNotFoundError, match="no savepoint"):
        b.t.restore(max(b.as_of))
    assert sorted(os.listdir(Path(b.t.path) / ".hoodie")) == hoodie
    b.t.delete_savepoint(second)
    b.t.restore(first)
    assert _rows(b.t.read()) == b.as_of[first]


def _crash_mid_restore(b: Built, savepoint: str, monkeypatch) -> None:
    """Restores to ``savepoint`` with a crash after the first instant is rolled back."""
    real = restore_mod._roll_back
    calls = []

    def crash_on_second(*args):
        if calls:
            raise OSError("killed mid-restore")
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(restore_mod, "_roll_back", crash_on_second)
    with pytest.raises(OSError, match="mid-restore"):
        b.t.restore(savepoint)
    monkeypatch.setattr(restore_mod, "_roll_back", real)


def test_a_crashed_restore_is_finished_by_the_next(tmp_path, monkeypatch):
    b = Built(tmp_path / "t", "MERGE_ON_READ")
    b.write(2)
    sp = b.t.savepoint()
    b.write(3)
    _crash_mid_restore(b, sp, monkeypatch)
    pending = [i for i in b.t.instants() if i.action == Action.RESTORE]
    assert [i.is_completed for i in pending] == [False]
    b.t.restore(sp)
    done = [i for i in b.t.instants() if i.action == Action.RESTORE]
    assert [(i.requested_time, i.is_completed) for i in done] == [(pending[0].requested_time, True)]
    assert not any(i.action == Action.ROLLBACK for i in b.t.instants())
    assert _rows(b.t.read()) == b.as_of[sp]
    assert _rows(hudi_rs_read(b.t.path)) == b.as_of[sp]


def test_cli_clean_savepoint_restore(tmp_path, capsys):
    b = Built(tmp_path / "t", "COPY_ON_WRITE")
    first = b.write()
    b.write(3)
    assert cli_main(["savepoint", b.t.path, first]) == 0
    assert cli_main(["savepoints", b.t.path]) == 0
    assert first in capsys.readouterr().out
    assert cli_main(["clean", b.t.path, "--retain-commits", "1"]) == 0
    assert "clean" in capsys.readouterr().out
    assert cli_main(["restore", b.t.path, first]) == 0
    assert _rows(b.t.read()) == b.as_of[first]
    assert cli_main(["restore", b.t.path, "20200101000000000"]) == 2


def test_rollback_refuses_a_savepointed_commit(tmp_path):
    from shoal.errors import InvalidArgumentError

    t = shoal.Table.create(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts")
    t.upsert(pa.table({"id": [1], "ts": [1]}))
    last = t.upsert(pa.table({"id": [2], "ts": [1]}))
    t.savepoint(last)
    with pytest.raises(InvalidArgumentError, match="savepointed"):
        t.rollback()
    assert sorted(t.read()["id"].to_pylist()) == [1, 2]
    t.delete_savepoint(last)
    t.rollback()
    assert t.read()["id"].to_pylist() == [1]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rollback_refuses_a_commit_whose_predecessors_a_later_clean_removed(tmp_path, table_type):
    """The cleaner keeping file versions removes replaced file groups at once. Rolling back the
    replace commit after that would bring back an older version of its partition, or nothing:
    refused, nothing changes. A rollback whose previous slices the clean kept goes ahead."""
    from shoal.errors import InvalidArgumentError

    t = shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options={
            "hoodie.clean.automatic": "false",
            "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
            "hoodie.cleaner.fileversions.retained": "2",
        },
    )

    def batch(ids: list[int], ts: int) -> pa.Table:
        return pa.table({"id": ids, "p": ["a"] * len(ids), "ts": [ts] * len(ids), "v": [f"v{ts}"] * len(ids)})

    t.bulk_insert(batch([1, 2], 1))
    t.upsert(batch([1], 2))
    t.insert_overwrite(batch([3], 3))
    assert t.clean(), "the replaced file group is cleaned"
    before, instants = rows_by(t.read(), ["id", "v"], ["id"]), t.instants()
    with pytest.raises(InvalidArgumentError, match="clean"):
        t.rollback()
    assert t.instants() == instants and rows_by(t.read(), ["id", "v"], ["id"]) == before
    assert rows_by(hudi_rs_read(t.path), ["id", "v"], ["id"]) == [{"id": 3, "v": "v3"}]

    t.upsert(batch([3], 4))  # the slice before it stays: its rollback goes ahead
    t.rollback()
    assert rows_by(t.read(), ["id", "v"], ["id"]) == [{"id": 3, "v": "v3"}]


def test_a_write_after_a_crashed_restore_finishes_it_first(tmp_path, monkeypatch):
    b = Built(tmp_path / "t", "MERGE_ON_READ")
    b.write(2)
    sp = b.t.savepoint()
    b.write(3)
    _crash_mid_restore(b, sp, monkeypatch)
    # The next write completes the restore before it plans: it writes on the savepoint's state.
    b.t.upsert(pa.table({"id": [999], "part": ["p0"], "ts": [99], "v": ["new"]}))
    restores = [i for i in b.t.instants() if i.action == Action.RESTORE]
    assert [i.is_completed for i in restores] == [True]
    expected = sorted([*b.as_of[sp], {"id": 999, "part": "p0", "ts": 99, "v": "new"}], key=lambda r: r["id"])
    assert _rows(b.t.read()) == expected
    assert _rows(hudi_rs_read(b.t.path)) == expected


@pytest.mark.parametrize(
    ("service", "refusal"),
    [
        (lambda t: t.clean(), None),
        (lambda t: t.archive(), None),
        (lambda t: t.compact(), None),
        (lambda t: t.schedule_compaction(), None),
        (lambda t: t.delete_savepoint(t.savepoints()[0]), None),
        # On the restored table the latest commit is the savepointed one.
        (lambda t: t.savepoint(), "savepointed already"),
        (lambda t: t.rollback(), "is savepointed"),
    ],
    ids=["clean", "archive", "compact", "schedule_compaction", "delete_savepoint", "savepoint", "rollback"],
)
def test_a_service_after_a_crashed_restore_finishes_it_first(tmp_path, monkeypatch, service, refusal):
    """Half restored, the table is in no committed state: a service run then (a savepoint that
    the resumed restore would delete, a clean of the slices it needs, ...) finishes the restore
    first, as a write does."""
    b = Built(tmp_path / "t", "MERGE_ON_READ")
    b.write(2)
    sp = b.t.savepoint()
    b.write(3)
    _crash_mid_restore(b, sp, monkeypatch)
    if refusal is None:
        service(b.t)
    else:
        with pytest.raises(shoal.InvalidArgumentError, match=refusal):
            service(b.t)
    restores = [i for i in b.t.instants() if i.action == Action.RESTORE]
    assert [i.is_completed for i in restores] == [True]
    assert _rows(hudi_rs_read(b.t.path)) == _rows(b.t.read())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_restore_to_the_only_commit_left_keeps_the_archived_ones(tmp_path, table_type):
    """Commits archived before a savepoint stay committed when a restore leaves only the
    savepointed commit on the timeline: their files, which no later commit replaced, are read
    (by shoal and hudi-rs) as Hudi's file-system view reads them."""
    path = str(tmp_path / "t")
    options = {
        **NO_AUTO_CLEAN,
        "hoodie.archive.automatic": "false",
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    t = shoal.Table.create(
        path, "r", table_type, record_key="id", partition_by="part", ordering_field="ts", options=options
    )
    first = [{"id": i, "part": f"p{i % 2}", "ts": 1, "v": "a"} for i in range(10)]
    t.insert(pa.Table.from_pylist(first))
    second = [{"id": i, "part": "p1", "ts": 2, "v": "b"} for i in range(1, 10, 2)]
    t.upsert(pa.Table.from_pylist(second))  # only partition p1
    saved = t.savepoint()
    for ts in range(3, 7):
        t.upsert(pa.Table.from_pylist([{"id": 1, "part": "p1", "ts": ts, "v": f"c{ts}"}]))
    t.archive()
    assert first_commit_archived(t)
    t.restore(saved)
    want = sorted([r for r in first if r["part"] == "p0"] + second, key=lambda r: r["id"])
    assert rows_by(t.read(), COLUMNS, ["id"]) == want
    assert rows_by(hudi_rs_read(path), COLUMNS, ["id"]) == want


def first_commit_archived(t: shoal.Table) -> bool:
    return len([i for i in t.instants() if i.action in (Action.COMMIT, Action.DELTA_COMMIT)]) < 6
