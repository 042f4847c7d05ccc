"""The cleaner: each policy on COW and MOR tables built from many small commits.

Expected survivors are derived here from the file-system view before the clean and the policy's
definition ("the slice a read as of each retained instant uses"), not from the cleaner's plan;
rows are checked against a model of the writes and against hudi-rs.
"""

from __future__ import annotations

import datetime as _dt
import io
import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

import shoal
from shoal.config.write_config import WriteConfig
from shoal.errors import CleanedInstantError
from shoal.fs.view import FileSystemView
from shoal.services import clean as clean_mod
from shoal.timeline.instant_time import parse_instant
from shoal.timeline.timeline import Timeline

from .hudi_oracle import hudi_rs_read, rows_by

SCHEMAS = Path(shoal.__file__).parent / "schemas"
REPO = Path(__file__).parents[1]
COLUMNS = ["id", "part", "ts", "v"]
NO_AUTO_CLEAN = {"hoodie.clean.automatic": "false"}
VERSIONS = {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"}


# ---- building tables with a model ------------------------------------------------------------


class Model:
    """The expected rows of the table after each instant (key -> row)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}
        self.as_of: dict[str, list[dict]] = {}

    def upsert(self, batch: list[dict]) -> None:
        for r in batch:
            self.rows[r["id"]] = r

    def record(self, instant: str) -> None:
        self.as_of[instant] = sorted(self.rows.values(), key=lambda r: r["id"])


def _batch(i: int) -> list[dict]:
    keys = sorted({i % 6, (i + 2) % 6, 100 + i})
    return [{"id": k, "part": f"p{k % 3}", "ts": i, "v": f"v{k}-{i}"} for k in keys]


def _build(path: Path, table_type: str, commits: int, compact_every: int = 0) -> tuple[shoal.Table, Model]:
    t = shoal.Table.create(
        str(path),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="part",
        ordering_field="ts",
        options=NO_AUTO_CLEAN,
    )
    model = Model()
    for i in range(commits):
        batch = _batch(i)
        model.upsert(batch)
        model.record(t.upsert(pa.Table.from_pylist(batch)))
        if compact_every and (i + 1) % compact_every == 0:
            for c in t.compact():
                model.record(c)
    return t, model


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, COLUMNS, ["id"])


def _data_files(path: str) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            if f != ".hoodie_partition_metadata":
                out.add(os.path.relpath(os.path.join(root, f), path))
    return out


# ---- the expectation, from the policy's definition -----------------------------------------


def _slices_by_group(t: shoal.Table) -> dict[tuple[str, str], list]:
    view = FileSystemView(t.storage, Timeline.load(t.storage, t.config))
    return {
        (fg.partition_path, fg.file_id): [s for s in fg.ordered_slices() if s.base_file or s.log_files]
        for fg in view.all_file_groups()
    }


def _files_of(sl) -> set[str]:
    return ({sl.base_file.path} if sl.base_file else set()) | {lf.path for lf in sl.log_files}


def _as_of(slices: list, instant: str):
    older = [s for s in slices if s.base_instant <= instant]
    return max(older, key=lambda s: s.base_instant) if older else None


def _expected_by_instants(t: shoal.Table, retained: list[str], protected: set[str] = frozenset()) -> set[str]:
    """Files to delete when every read as of an instant in ``retained`` must keep working."""
    doomed: set[str] = set()
    for slices in _slices_by_group(t).values():
        keep = {slices[-1].base_instant} | {s.base_instant for s in slices if s.base_instant in protected}
        keep |= {_as_of(slices, x).base_instant for x in retained if _as_of(slices, x) is not None}
        doomed |= {f for s in slices if s.base_instant not in keep for f in _files_of(s)}
    return doomed


def _expected_by_versions(t: shoal.Table, versions: int) -> set[str]:
    return {f for slices in _slices_by_group(t).values() for s in slices[:-versions] for f in _files_of(s)}


def _unreadable(groups: dict, doomed: set[str], instants: list[str]) -> set[str]:
    """Instants a read as of which needs a doomed slice."""
    out = set()
    for x in instants:
        for slices in groups.values():
            sl = _as_of(slices, x)
            if sl is not None and _files_of(sl) & doomed:
                out.add(x)
    return out


def _check_after_clean(
    t: shoal.Table, model: Model, before: set[str], doomed: set[str], groups: dict
) -> None:
    assert doomed, "the scenario must clean something"
    assert _data_files(t.path) == before - doomed
    latest = model.as_of[max(model.as_of)]
    assert _rows(t.read()) == latest
    assert _rows(hudi_rs_read(t.path)) == latest
    instants = sorted(model.as_of)
    unreadable = _unreadable(groups, doomed, instants)
    assert unreadable and unreadable != set(instants)
    for x in instants:
        if x in unreadable:
            with pytest.raises(CleanedInstantError, match="earliest instant still readable"):
                t.read(as_of=x)
        else:
            assert _rows(t.read(as_of=x)) == model.as_of[x], x
    readable = [x for x in instants if x not in unreadable]
    assert _rows(hudi_rs_read(t.path, as_of=readable[0])) == model.as_of[readable[0]]


def _completed_commits(t: shoal.Table) -> list[str]:
    return [i.requested_time for i in Timeline.load(t.storage, t.config).completed_data_instants()]


# ---- the policies ------------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_keep_latest_commits(tmp_path, table_type):
    mor = table_type == "MERGE_ON_READ"
    t, model = _build(tmp_path / "t", table_type, commits=9, compact_every=3 if mor else 0)
    retained = 3
    commits = _completed_commits(t)
    ectr = commits[-retained]
    # Hudi also keeps what a read as of the commit before ECTR uses (a query may still run on it).
    doomed = _expected_by_instants(t, commits[-retained - 1 :])
    before, groups = _data_files(t.path), _slices_by_group(t)
    (clean_time,) = t.clean(options={"hoodie.cleaner.commits.retained": str(retained)})
    _check_after_clean(t, model, before, doomed, groups)
    meta = _read_avro(t, f"{clean_time}.clean", "HoodieCleanMetadata.v6.writer")
    assert meta["earliestCommitToRetain"] == ectr
    assert meta["lastCompletedCommitTimestamp"] == commits[-1]
    assert meta["version"] == 2
    assert meta["totalFilesDeleted"] == len(doomed)
    deleted = {(p, n) for p, pm in meta["partitionMetadata"].items() for n in pm["successDeleteFiles"]}
    assert deleted == {tuple(f.rsplit("/", 1)) for f in doomed}
    assert all(pm["policy"] == "KEEP_LATEST_COMMITS" for pm in meta["partitionMetadata"].values())
    # Nothing more to clean: no new instant.
    assert t.clean(options={"hoodie.cleaner.commits.retained": str(retained)}) == []


def test_nothing_is_cleaned_until_there_are_more_commits_than_retained(tmp_path):
    t, _ = _build(tmp_path / "t", "COPY_ON_WRITE", commits=4)
    timeline = Timeline.load(t.storage, t.config)
    commits = _completed_commits(t)
    now = _dt.datetime.now(_dt.timezone.utc)
    policy = clean_mod.CleaningPolicy.KEEP_LATEST_COMMITS
    assert clean_mod.earliest_commit_to_retain(timeline, policy, 4, 0, now) is None
    assert clean_mod.earliest_commit_to_retain(timeline, policy, 3, 0, now).requested_time == commits[1]
    before = _data_files(t.path)
    assert t.clean(options={"hoodie.cleaner.commits.retained": "4"}) == []
    assert _data_files(t.path) == before
    assert t.clean(options={"hoodie.cleaner.commits.retained": "2"}) != []
    assert _data_files(t.path) < before


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_keep_latest_file_versions(tmp_path, table_type):
    mor = table_type == "MERGE_ON_READ"
    t, model = _build(tmp_path / "t", table_type, commits=9, compact_every=2 if mor else 0)
    doomed = _expected_by_versions(t, 2)
    before, groups = _data_files(t.path), _slices_by_group(t)
    (clean_time,) = t.clean(options={**VERSIONS, "hoodie.cleaner.fileversions.retained": "2"})
    _check_after_clean(t, model, before, doomed, groups)
    plan = _read_avro(t, f"{clean_time}.clean.requested", "HoodieCleanerPlan.v6.writer")
    assert plan["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    assert plan["earliestInstantToRetain"] is None
    meta = _read_avro(t, f"{clean_time}.clean", "HoodieCleanMetadata.v6.writer")
    assert meta["earliestCommitToRetain"] == ""


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_keep_latest_by_hours(tmp_path, table_type):
    mor = table_type == "MERGE_ON_READ"
    t, model = _build(tmp_path / "t", table_type, commits=8, compact_every=3 if mor else 0)
    commits = _completed_commits(t)
    ectr = commits[4]
    # "Now" is two hours after the fifth commit: with two hours retained, it is the first kept.
    now = parse_instant(ectr) + _dt.timedelta(hours=2)
    doomed = _expected_by_instants(t, commits[3:])  # from the commit before ECTR, as above
    before, groups = _data_files(t.path), _slices_by_group(t)
    wc = WriteConfig({"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "2"})
    (clean_time,) = clean_mod.clean(t.storage, t.config, wc, clock=lambda: now)
    _check_after_clean(t, model, before, doomed, groups)
    meta = _read_avro(t, f"{clean_time}.clean", "HoodieCleanMetadata.v6.writer")
    assert meta["earliestCommitToRetain"] == ectr


# ---- what is never cleaned ---------------------------------------------------------------------


def test_pending_compaction_slices_are_never_cleaned(tmp_path):
    t, model = _build(tmp_path / "t", "MERGE_ON_READ", commits=5, compact_every=2)
    pending = t.schedule_compaction()
    assert pending is not None
    plan = Timeline.load(t.storage, t.config).compaction_plan(pending)
    planned = {
        f"{op['partitionPath']}/{name}"
        for op in plan
        for name in [op["dataFilePath"], *op["deltaFilePaths"]]
        if name
    }
    for i in range(5, 8):  # updates of planned file groups go to the slice the compaction opened
        batch = _batch(i)
        model.upsert(batch)
        model.record(t.upsert(pa.Table.from_pylist(batch)))
    # With KEEP_LATEST_COMMITS the earliest commit to retain stops before the pending compaction.
    commits_before = [c for c in _completed_commits(t) if c < pending]
    (first,) = t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    meta = _read_avro(t, f"{first}.clean", "HoodieCleanMetadata.v6.writer")
    assert meta["earliestCommitToRetain"] == commits_before[-1]
    assert planned <= _data_files(t.path)
    # One version per file group would take the slice the compaction reads, were it not pending.
    assert planned & _expected_by_versions(t, 1)
    assert len(t.clean(options={**VERSIONS, "hoodie.cleaner.fileversions.retained": "1"})) == 1
    assert planned <= _data_files(t.path)
    latest = model.as_of[max(model.as_of)]
    assert _rows(t.read()) == latest
    t.run_compaction(pending)
    assert _rows(t.read()) == latest
    assert _rows(hudi_rs_read(t.path)) == latest


def test_replaced_file_groups_go_whole_once_older_than_the_retained_commits(fixture_table, tmp_path):
    path = str(fixture_table("cow_v6_simplekeygen_nonhivestyle_overwritetable"))
    t = shoal.Table(path, options=NO_AUTO_CLEAN)
    timeline = Timeline.load(t.storage, t.config)
    (replace,) = [i for i in timeline.completed() if i.action.value == "replacecommit"]
    replaced = {fid for ids in timeline.commit_metadata(replace).replaced_file_ids().values() for fid in ids}
    replaced_files = {f for f in _data_files(path) if f.rsplit("/", 1)[1].split("_")[0] in replaced}
    assert replaced_files
    before_replace = timeline.completed_data_instants()[0].requested_time
    rows_before_replace = rows_by(t.read(as_of=before_replace), ["id", "name"], ["id"])
    # Retaining the replace commit: a read as of the commit before it needs the replaced groups.
    assert t.clean(options={"hoodie.cleaner.commits.retained": "1"}) == []
    # One more commit (a new record) makes the replace commit older than the retained one.
    row = t.read().slice(0, 1).drop_columns([c for c in t.read().column_names if c.startswith("_hoodie")])
    t.upsert(row.set_column(0, "id", pa.array([99], pa.int32())))
    snapshot = rows_by(hudi_rs_read(path), ["id", "name"], ["id"])
    assert [r["id"] for r in snapshot] == [4, 99]
    assert t.clean(options={"hoodie.cleaner.commits.retained": "1"}) != []
    assert not (_data_files(path) & replaced_files)
    assert rows_by(hudi_rs_read(path), ["id", "name"], ["id"]) == snapshot
    assert rows_by(t.read(), ["id", "name"], ["id"]) == snapshot
    assert rows_before_replace and rows_before_replace != snapshot
    with pytest.raises(CleanedInstantError):
        t.read(as_of=before_replace)


# ---- crash recovery, inline cleaning, options -------------------------------------------------


def test_a_pending_clean_is_completed_by_the_next_clean(tmp_path):
    t, model = _build(tmp_path / "t", "COPY_ON_WRITE", commits=6)
    wc = WriteConfig({"hoodie.cleaner.commits.retained": "2"})
    before = _data_files(t.path)
    pending = clean_mod.schedule_clean(t.storage, t.config, wc)
    assert pending is not None
    assert _data_files(t.path) == before  # planned, nothing deleted yet
    plan = _read_avro(t, f"{pending}.clean.requested", "HoodieCleanerPlan.v6.writer")
    planned = {
        os.path.relpath(i["filePath"], t.path)
        for infos in plan["filePathsToBeDeletedPerPartition"].values()
        for i in infos
    }
    assert planned and planned <= before
    # The crashed cleaner reached inflight and deleted one file.
    timeline = Timeline.load(t.storage, t.config)
    requested = timeline.get(pending)
    timeline.transition_to_inflight(requested, timeline.read_instant(requested))
    gone = sorted(planned)[0]
    os.remove(os.path.join(t.path, gone))
    # A read as of a commit whose slice the pending clean removes is refused already.
    with pytest.raises(CleanedInstantError):
        t.read(as_of=min(model.as_of))
    assert t.clean(options={"hoodie.cleaner.commits.retained": "2"}) == [pending]
    assert _data_files(t.path) == before - planned
    meta = _read_avro(t, f"{pending}.clean", "HoodieCleanMetadata.v6.writer")
    failed = [n for pm in meta["partitionMetadata"].values() for n in pm["failedDeleteFiles"]]
    assert failed == [gone.rsplit("/", 1)[1]]
    assert meta["totalFilesDeleted"] == len(planned) - 1
    assert _read_avro(t, f"{pending}.clean.inflight", "HoodieCleanerPlan.v6.writer") == plan
    assert _rows(t.read()) == model.as_of[max(model.as_of)]


def test_two_processes_running_one_clean_plan_both_succeed(tmp_path, monkeypatch):
    """Another process runs the pending clean to its end while this one is deleting the same
    files: both succeed, and the clean records the files the other one deleted."""
    t, model = _build(tmp_path / "t", "COPY_ON_WRITE", commits=6)
    options = {"hoodie.cleaner.commits.retained": "2"}
    before = _data_files(t.path)
    pending = clean_mod.schedule_clean(t.storage, t.config, WriteConfig(options))
    assert pending is not None
    original, others, once = clean_mod.run_clean_task, [], threading.Lock()

    def after_another_process(spec, storage=None):
        # Clean tasks run on threads, one per partition: the first starts the other process.
        with once:
            if not others:
                code = f"import shoal; print(shoal.Table({t.path!r}).clean(options={options!r}))"
                done = subprocess.run(
                    [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO
                )
                others.append(done.stdout)
        return original(spec, storage)

    monkeypatch.setattr(clean_mod, "run_clean_task", after_another_process)
    assert t.clean(options=options) == [pending]
    assert pending in others[0]
    left = _data_files(t.path)
    meta = _read_avro(t, f"{pending}.clean", "HoodieCleanMetadata.v6.writer")
    assert meta["totalFilesDeleted"] == len(before - left) > 0
    assert not [n for pm in meta["partitionMetadata"].values() for n in pm["failedDeleteFiles"]]
    assert _rows(t.read()) == _rows(hudi_rs_read(t.path)) == model.as_of[max(model.as_of)]


def test_inline_clean_after_commits(tmp_path):
    t = shoal.Table.create(
        str(tmp_path / "t"),
        name="t",
        record_key="id",
        partition_by="part",
        ordering_field="ts",
        options={"hoodie.cleaner.commits.retained": "2", "hoodie.clean.max.commits": "2"},
    )
    model = Model()
    cleaned: list[bool] = []
    cleaned_instants: set[str] = set()
    for i in range(8):
        batch = _batch(i)
        model.upsert(batch)
        t.upsert(pa.Table.from_pylist(batch))
        cleans = [x.requested_time for x in t.instants() if x.action.value == "clean"]
        cleaned.append(bool(cleans) and cleans[-1] not in cleaned_instants)
        cleaned_instants.update(cleans)
    # No clean before there are more than two commits; then at most every second commit.
    assert cleaned[:2] == [False, False]
    assert sum(cleaned) >= 2
    assert not any(a and b for a, b in itertools.pairwise(cleaned))
    expected = sorted(model.rows.values(), key=lambda r: r["id"])
    assert _rows(t.read()) == expected
    assert _rows(hudi_rs_read(t.path)) == expected
    # What the last clean retained is all that is left of what came before it.
    last = max(cleaned_instants)
    ectr = clean_mod.clean_metadata(Timeline.load(t.storage, t.config), last)["earliestCommitToRetain"]
    commits = _completed_commits(t)
    assert _expected_by_instants(t, commits[commits.index(ectr) - 1 :]) == set()


def test_options(tmp_path):
    with pytest.raises(shoal.InvalidOptionError, match="asynchronous cleaning is not supported"):
        shoal.Table.create(str(tmp_path / "a"), name="t", options={"hoodie.clean.async": "true"})
    with pytest.raises(shoal.InvalidOptionError):
        WriteConfig({"hoodie.cleaner.policy": "KEEP_EVERYTHING"})
    with pytest.raises(shoal.InvalidOptionError):
        WriteConfig({"hoodie.cleaner.commits.retained": "0"})


# ---- Avro files: fastavro reads them against the shipped schemas ---------------------------


def _read_avro(t: shoal.Table, name: str, schema: str) -> dict:
    data = (Path(t.path) / ".hoodie" / name).read_bytes()
    reader_schema = fastavro.parse_schema(json.loads((SCHEMAS / f"{schema}.avsc").read_text()))
    (record,) = list(fastavro.reader(io.BytesIO(data), reader_schema=reader_schema))
    return record


def test_plan_and_metadata_decode_with_fastavro(tmp_path):
    t, _ = _build(tmp_path / "t", "MERGE_ON_READ", commits=6, compact_every=2)
    (clean_time,) = t.clean(options={"hoodie.cleaner.commits.retained": "2"})
    plan = _read_avro(t, f"{clean_time}.clean.requested", "HoodieCleanerPlan.v6.writer")
    assert plan["version"] == 2
    assert plan["policy"] == "KEEP_LATEST_COMMITS"
    ectr = plan["earliestInstantToRetain"]
    assert ectr["state"] == "COMPLETED" and ectr["action"] in ("commit", "deltacommit")
    assert plan["filesToBeDeletedPerPartition"] == {}
    assert plan["partitionsToBeDeleted"] == []
    for partition, infos in plan["filePathsToBeDeletedPerPartition"].items():
        for info in infos:
            assert info["isBootstrapBaseFile"] is False
            assert os.path.isabs(info["filePath"])
            assert os.path.dirname(info["filePath"]) == os.path.join(t.path, partition)
    meta = _read_avro(t, f"{clean_time}.clean", "HoodieCleanMetadata.v6.writer")
    assert meta["startCleanTime"] == clean_time
    assert meta["earliestCommitToRetain"] == ectr["timestamp"]
    assert meta["bootstrapPartitionMetadata"] == {}
    for partition, pm in meta["partitionMetadata"].items():
        assert pm["partitionPath"] == partition
        assert pm["deletePathPatterns"] == pm["successDeleteFiles"]
        assert pm["failedDeleteFiles"] == []
        assert pm["isPartitionDeleted"] is False


def test_incremental_read_ending_at_a_cleaned_slice_fails_clearly(tmp_path):
    """A range ending in the past reads the slices as of its end; when the cleaner removed one,
    the read fails (CleanedInstantError) instead of returning rows of another slice. Ranges up
    to the latest commit, and ranges ending at retained commits, still read."""
    t, _model = _build(tmp_path / "t", "COPY_ON_WRITE", commits=8)
    instants = _completed_commits(t)
    t.clean(options={"hoodie.cleaner.commits.retained": "2"})
    with pytest.raises(CleanedInstantError, match="earliest instant still readable"):
        t.read_incremental(instants[0], instants[2])
    latest = t.read_incremental(instants[5])
    assert {r["_hoodie_commit_time"] for r in latest.to_pylist()} <= set(instants[6:])
    assert latest.num_rows > 0
    assert t.read_incremental(instants[5], instants[6]).num_rows > 0
