"""Archival: one test per rule on timelines built for the case, the archive files decoded by an
independent reader (shared/tools/parse_log.py framing + fastavro), crash safety, merging of
small archive files, inline/async runs, and reads (shoal and hudi-rs) after archival."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

import shoal
from shoal import _native
from shoal.cli import main
from shoal.config.write_config import WriteConfig
from shoal.errors import InvalidOptionError, UnsupportedError
from shoal.fs.storage import Storage
from shoal.read.incremental import predecessor
from shoal.schemas import load_schema
from shoal.timeline.instant import Action, State
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import data_files

TOOLS = Path(__file__).resolve().parents[1].parent / "shared" / "tools" / "parse_log.py"
SCHEMA_DIR = Path(shoal.__file__).parent / "schemas"

# Small counts so that a handful of commits exercises every rule; no automatic services, so
# each test decides when cleaning and archival run.
OPTS = {
    "hoodie.archive.automatic": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "4",
}


def _parse_log():
    if not TOOLS.is_file():
        pytest.skip(f"{TOOLS} not found")
    spec = importlib.util.spec_from_file_location("parse_log", TOOLS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table(tmp_path, table_type="COPY_ON_WRITE", **extra) -> shoal.Table:
    return shoal.Table.create(
        tmp_path / "t",
        "arch",
        table_type=table_type,
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options={**OPTS, **extra},
    )


def _commit(t: shoal.Table, i: int) -> str:
    """One upsert: a new key per commit plus an update of key 0 (so file groups get new slices
    or log appends)."""
    return t.upsert(pa.table({"id": [i + 1, 0], "p": ["a", "b"], "ts": [i, i], "v": [f"n{i}", f"u{i}"]}))


def _commits(t: shoal.Table, n: int) -> list[str]:
    return [_commit(t, i) for i in range(n)]


def _hoodie(t: shoal.Table) -> Path:
    return Path(t.path) / ".hoodie"


def _timeline(t: shoal.Table) -> Timeline:
    return Timeline.load(t.storage, t.config)


def _active_data(t: shoal.Table) -> list[str]:
    return [i.requested_time for i in _timeline(t).completed_data_instants()]


def _after(instant: str) -> str:
    """A time 1 ms after ``instant`` (writes are far more than 1 ms apart)."""
    return str(int(instant) + 1)


def _avro_file(schema_name: str, record: dict) -> bytes:
    return _native.avro_container_encode(load_schema(schema_name), json.dumps([record]))


def _clean_metadata(start: str, earliest_retained: str) -> dict:
    return {
        "startCleanTime": start,
        "timeTakenInMillis": 3,
        "totalFilesDeleted": 0,
        "earliestCommitToRetain": earliest_retained,
        "lastCompletedCommitTimestamp": earliest_retained,
        "partitionMetadata": {},
        "version": 2,
    }


def _cleaner_plan(earliest_retained: str) -> dict:
    return {
        "earliestInstantToRetain": {"timestamp": earliest_retained, "action": "commit", "state": "COMPLETED"},
        "policy": "KEEP_LATEST_COMMITS",
        "version": 2,
        "filePathsToBeDeletedPerPartition": {},
    }


def _write_clean(t: shoal.Table, time: str, earliest_retained: str) -> None:
    plan = _avro_file("HoodieCleanerPlan.v6.writer", _cleaner_plan(earliest_retained))
    (_hoodie(t) / f"{time}.clean.requested").write_bytes(plan)
    (_hoodie(t) / f"{time}.clean.inflight").write_bytes(plan)
    (_hoodie(t) / f"{time}.clean").write_bytes(
        _avro_file("HoodieCleanMetadata.v6.writer", _clean_metadata(time, earliest_retained))
    )


def _write_rollback(t: shoal.Table, time: str, target: str) -> None:
    metadata = {
        "startRollbackTime": time,
        "timeTakenInMillis": 1,
        "totalFilesDeleted": 0,
        "commitsRollback": [target],
        "partitionMetadata": {},
        "version": 1,
        "instantsRollback": [{"commitTime": target, "action": "commit"}],
    }
    (_hoodie(t) / f"{time}.rollback.requested").write_bytes(
        _avro_file(
            "HoodieRollbackPlan.v6.writer",
            {
                "instantToRollback": {"commitTime": target, "action": "commit"},
                "RollbackRequests": [],
                "version": 1,
            },
        )
    )
    (_hoodie(t) / f"{time}.rollback.inflight").write_bytes(b"")
    (_hoodie(t) / f"{time}.rollback").write_bytes(_avro_file("HoodieRollbackMetadata.v6.writer", metadata))


def _independent_entries(t: shoal.Table) -> list[dict]:
    """Every record of every archive file, read without shoal: framing checked by parse_log,
    records decoded by fastavro with the header schema as writer and our avsc as reader."""
    parse_log = _parse_log()
    reader_schema = fastavro.parse_schema(
        json.loads((SCHEMA_DIR / "HoodieArchivedMetaEntry.avsc").read_text())
    )
    out: list[dict] = []
    for path in sorted((_hoodie(t) / "archived").glob(".commits_.archive.*")):
        assert path.name.endswith("_1-0-1")
        for block in parse_log.parse(str(path), verbose=False):
            assert block["type"] == "AVRO_DATA" and block["format_version"] == 1
            assert block["header_order"] == ["SCHEMA"] and block["block_version"] == 3
            assert (
                block["blocksize"] == block["blocksize_check"] and block["total_len"] == block["total_check"]
            )
            assert block["rest_bytes"] == 0
        data = path.read_bytes()
        f = io.BytesIO(data)
        while f.tell() < len(data):
            f.read(6)
            parse_log.rd(f, 16)  # block size, format version, block type
            header = parse_log.meta(f)
            (length,) = struct.unpack(">q", parse_log.rd(f, 8))
            content = io.BytesIO(parse_log.rd(f, length))
            parse_log.meta(f)
            parse_log.rd(f, 8)
            writer_schema = fastavro.parse_schema(json.loads(header["SCHEMA"]))
            _, count = struct.unpack(">ii", content.read(8))
            for _ in range(count):
                (size,) = struct.unpack(">i", content.read(4))
                out.append(
                    fastavro.schemaless_reader(io.BytesIO(content.read(size)), writer_schema, reader_schema)
                )
    return out


def _keys(entries: list[dict]) -> list[tuple[str, str, str]]:
    return [(e["commitTime"], e["actionType"], e["actionState"]) for e in entries]


def _rows(table: pa.Table) -> list[dict]:
    return rows_by(table, ["id", "p", "ts", "v"], ["id"])


def _assert_reads_unchanged(t: shoal.Table, expected: list[dict]) -> None:
    assert _rows(shoal.Table(t.path).read()) == expected
    assert _rows(hudi_rs_read(t.path)) == expected


# ---- the count rules ---------------------------------------------------------------------------


def test_commits_beyond_max_are_archived_down_to_min(tmp_path):
    t = _table(tmp_path)
    times = _commits(t, 4)
    assert t.archive().archived == []  # 4 completed commits: not more than the max
    times += _commits(t, 2)
    originals = {ts: json.loads((_hoodie(t) / f"{ts}.commit").read_bytes()) for ts in times}
    profiles = {ts: json.loads((_hoodie(t) / f"{ts}.inflight").read_bytes()) for ts in times}
    before = _rows(t.read())

    result = t.archive()

    assert [i.requested_time for i in result.archived] == times[:4]
    assert _active_data(t) == times[4:]
    assert not any(f.name.startswith(tuple(times[:4])) for f in _hoodie(t).iterdir())
    entries = _independent_entries(t)
    assert _keys(entries) == [
        (ts, "commit", s) for ts in times[:4] for s in ("REQUESTED", "INFLIGHT", "COMPLETED")
    ]
    for e in entries:
        ts = e["commitTime"]
        assert e["stateTransitionTime"] and e["version"] is None
        if e["actionState"] == "REQUESTED":  # an empty requested file has no metadata
            assert e["hoodieCommitMetadata"] is None
            continue
        source = originals[ts] if e["actionState"] == "COMPLETED" else profiles[ts]
        meta = e["hoodieCommitMetadata"]
        assert meta["operationType"] == source["operationType"] == "UPSERT"
        assert meta["extraMetadata"] == source["extraMetadata"]
        for partition, stats in source["partitionToWriteStats"].items():
            got = meta["partitionToWriteStats"][partition]
            assert len(got) == len(stats)
            for mine, theirs in zip(got, stats, strict=True):
                assert {k: mine[k] for k in theirs if k in mine} == {
                    k: v for k, v in theirs.items() if k in mine
                }
    _assert_reads_unchanged(t, before)
    assert t.archive().archived == []  # down to the min: nothing more until the max is passed


def test_cleans_and_rollbacks_are_archived_per_action(tmp_path):
    t = _table(tmp_path)
    times = _commits(t, 2)
    tl = _timeline(t)
    cleans, rollbacks = [], []
    for _ in range(5):
        cleans.append(tl.new_instant_time())
        _write_clean(t, cleans[-1], times[0])
        tl = _timeline(t)
    for _ in range(3):
        rollbacks.append(tl.new_instant_time())
        _write_rollback(t, rollbacks[-1], "20200101000000000")
        tl = _timeline(t)

    result = t.archive()

    # 5 cleans > max 4: down to min 2; 3 rollbacks and 2 commits are within their counts.
    assert [(i.requested_time, i.action) for i in result.archived] == [(c, Action.CLEAN) for c in cleans[:3]]
    left = _timeline(t)
    assert [i.requested_time for i in left.instants if i.action == Action.CLEAN] == cleans[3:]
    assert [i.requested_time for i in left.instants if i.action == Action.ROLLBACK] == rollbacks
    entries = _independent_entries(t)
    assert _keys(entries) == [
        (c, "clean", s) for c in cleans[:3] for s in ("REQUESTED", "INFLIGHT", "COMPLETED")
    ]
    for e in entries:
        if e["actionState"] == "COMPLETED":
            assert e["hoodieCleanMetadata"]["earliestCommitToRetain"] == times[0]
            assert e["hoodieCleanMetadata"]["startCleanTime"] == e["commitTime"]
            assert e["hoodieCleanerPlan"] is None
        else:
            assert e["hoodieCleanerPlan"]["earliestInstantToRetain"]["timestamp"] == times[0]
            assert e["hoodieCleanerPlan"]["policy"] == "KEEP_LATEST_COMMITS"
    archived = t.archived_timeline
    assert archived.metadata(cleans[0])["earliestCommitToRetain"] == times[0]


# ---- the limits -------------------------------------------------------------------------------


@pytest.mark.parametrize("pending", ["inflight commit", "requested replacecommit", "inflight replacecommit"])
def test_never_archives_past_the_oldest_pending_write(tmp_path, pending):
    t = _table(tmp_path)
    times = _commits(t, 8)
    # A pending instant between the 4th and 5th commits (written directly: the next write
    # would roll a failed one back).
    p = _after(times[3])
    assert p < times[4]
    names = {
        "inflight commit": [f"{p}.commit.requested", f"{p}.inflight"],
        "requested replacecommit": [f"{p}.replacecommit.requested"],
        "inflight replacecommit": [f"{p}.replacecommit.requested", f"{p}.replacecommit.inflight"],
    }[pending]
    for name in names:
        (_hoodie(t) / name).write_bytes(b"")
    before = _rows(t.read())

    result = t.archive()

    # The last completed commit before the pending instant stays too.
    assert [i.requested_time for i in result.archived] == times[:3]
    assert all((_hoodie(t) / n).exists() for n in names)
    _assert_reads_unchanged(t, before)


def test_never_archives_past_a_pending_compaction(tmp_path):
    t = _table(
        tmp_path,
        "MERGE_ON_READ",
        **{
            "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"
        },  # the compaction count rule is tested apart
    )
    times = _commits(t, 4)
    compaction = t.schedule_compaction()
    assert compaction is not None
    times += _commits(t, 4)
    before = _rows(t.read())

    result = t.archive()

    assert [i.requested_time for i in result.archived] == times[:3]
    assert t.pending_compactions() == [compaction]
    _assert_reads_unchanged(t, before)
    t.run_compaction(compaction)
    _assert_reads_unchanged(t, before)


def test_never_archives_past_the_first_savepoint(tmp_path):
    t = _table(tmp_path)
    times = _commits(t, 8)
    t.savepoint(times[2])
    before = _rows(t.read())

    assert [i.requested_time for i in t.archive().archived] == times[:2]
    assert _active_data(t) == times[2:]
    _assert_reads_unchanged(t, before)


def test_archive_beyond_savepoint_keeps_only_the_savepointed_commit(tmp_path):
    t = _table(tmp_path, **{"hoodie.archive.beyond.savepoint": "true"})
    times = _commits(t, 8)
    t.savepoint(times[2])
    before = _rows(t.read())

    archived = [i.requested_time for i in t.archive().archived]

    # 8 commits down to 2: six go, the savepointed one is skipped over.
    assert archived == times[:2] + times[3:7]
    assert _active_data(t) == [times[2], times[7]]
    # The archived commits after the savepoint are older than the first non-savepointed active
    # commit, so readers still take their files as committed.
    _assert_reads_unchanged(t, before)
    assert t.read(as_of=times[2]).num_rows == 4


@pytest.mark.parametrize("later", ["new_file_group", "replace"])
def test_archive_beyond_savepoint_keeps_commits_readers_still_need(tmp_path, later):
    """Beyond a savepoint, a commit whose base file is still in a latest file slice stays:
    hudi-rs takes only instants older than the first active commit as archived, and would hide
    that file. So does a replace commit: the savepoint keeps the files it replaced from the
    cleaner, and they would be visible again without it."""
    t = _table(tmp_path, **{"hoodie.archive.beyond.savepoint": "true"})
    times = _commits(t, 3)
    t.savepoint(times[1])
    if later == "new_file_group":
        needed = t.upsert(pa.table({"id": [500], "p": ["c"], "ts": [0], "v": ["c"]}))
    else:
        needed = t.insert_overwrite(pa.table({"id": [600], "p": ["b"], "ts": [0], "v": ["o"]}))
    times += [needed] + [_commit(t, i) for i in range(3, 7)]
    t.clean()
    before = _rows(t.read())

    archived = [i.requested_time for i in t.archive().archived]

    assert archived == [times[0], times[2]]
    assert _active_data(t) == [times[1], *times[3:]]
    _assert_reads_unchanged(t, before)


def test_no_restore_over_commits_archived_beyond_the_savepoint(tmp_path):
    """As in Hudi (HUDI-4501): a restore rolls back only what the active timeline holds, so
    commits archived after the savepoint would keep their files. It fails before any change."""
    t = _table(tmp_path, **{"hoodie.archive.beyond.savepoint": "true"})
    times = _commits(t, 8)
    t.savepoint(times[2])
    assert times[3] in [i.requested_time for i in t.archive().archived]
    before, files, instants = _rows(t.read()), data_files(t.path), t.instants()

    with pytest.raises(UnsupportedError, match="archived"):
        t.restore(times[2])

    assert t.instants() == instants and data_files(t.path) == files
    _assert_reads_unchanged(t, before)


def test_no_restore_that_would_hide_a_commit_archived_between_savepoints(tmp_path):
    """A commit archived between two savepoints is taken for archived while a later commit that
    is not savepointed stays. A restore to the second savepoint would leave savepointed commits
    only, before which the archived one no longer lies: readers would hide its file, which is
    that savepoint's version of partition c. So the restore is refused."""
    t = _table(tmp_path, **{"hoodie.archive.beyond.savepoint": "true"})

    def write(key: int, p: str, v: str) -> str:
        return t.upsert(pa.table({"id": [key], "p": [p], "ts": [0], "v": [v]}))

    first = write(1, "a", "a0")
    t.savepoint(first)
    between = write(500, "c", "c1")
    second = write(1, "a", "a2")
    t.savepoint(second)
    for i in range(3, 7):  # c's file of `between` is no longer latest; a's keep changing
        write(500 if i == 3 else 1, "c" if i == 3 else "a", f"v{i}")
    assert [i.requested_time for i in t.archive().archived] == [between]
    before, instants = _rows(t.read()), t.instants()

    with pytest.raises(UnsupportedError, match="archived"):
        t.restore(second)

    assert t.instants() == instants
    _assert_reads_unchanged(t, before)
    assert t.read(as_of=second).column("v").to_pylist() == ["a2", "c1"]


def test_archive_beyond_savepoint_stops_at_the_savepoint_on_merge_on_read(tmp_path):
    """On merge-on-read, log blocks of a commit archived after a savepointed commit that stays
    would count as uncommitted: readers (shoal's, hudi-rs's and Hudi's log scanners) take only
    instants older than the first active commit as archived. So archival keeps the commits
    after the first savepoint there, and every update stays readable."""
    t = _table(
        tmp_path,
        "MERGE_ON_READ",
        **{
            "hoodie.archive.beyond.savepoint": "true",
            # A trigger that counts no delta commits holds none back from archival.
            "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
        },
    )
    keys = range(100, 108)  # none of _commit's
    times = [t.bulk_insert(pa.table({"id": keys, "p": ["b"] * 8, "ts": [0] * 8, "v": ["n"] * 8}))]
    times += _commits(t, 2)
    t.savepoint(times[1])
    # Each later commit's update of its own key lives only in its own log block.
    for i in range(2, 7):
        times.append(t.upsert(pa.table({"id": [keys[i]], "p": ["b"], "ts": [i], "v": [f"u{i}"]})))
    before = _rows(t.read())
    assert {r["id"]: r["v"] for r in before}[keys[3]] == "u3"

    assert [i.requested_time for i in t.archive().archived] == times[:1]
    assert _active_data(t) == times[1:]
    _assert_reads_unchanged(t, before)


def test_never_archives_what_the_last_clean_retains(tmp_path):
    t = _table(tmp_path)
    times = _commits(t, 8)
    _write_clean(t, _timeline(t).new_instant_time(), earliest_retained=times[3])
    before = _rows(t.read())

    assert [i.requested_time for i in t.archive().archived] == times[:3]
    _assert_reads_unchanged(t, before)


def test_a_replacecommit_stays_until_the_cleaner_passed_it(tmp_path):
    t = _table(tmp_path)
    times = _commits(t, 8)
    replace = _after(times[3])
    metadata = {
        "partitionToWriteStats": {},
        "partitionToReplaceFileIds": {},
        "compacted": False,
        "extraMetadata": {},
        "operationType": "INSERT_OVERWRITE",
    }
    (_hoodie(t) / f"{replace}.replacecommit.requested").write_bytes(b"")
    (_hoodie(t) / f"{replace}.replacecommit.inflight").write_bytes(b"")
    (_hoodie(t) / f"{replace}.replacecommit").write_bytes(json.dumps(metadata).encode())

    # Nothing cleaned yet: the first completed replacecommit caps archival.
    assert [i.requested_time for i in t.archive().archived] == times[:4]
    # Once a clean retains only what follows it, it goes too (the clean keeps times[6] on).
    _write_clean(t, _timeline(t).new_instant_time(), earliest_retained=times[6])
    archived = t.archive().archived
    assert [(i.requested_time, i.action) for i in archived] == [
        (replace, Action.REPLACE_COMMIT),
        (times[4], Action.COMMIT),
        (times[5], Action.COMMIT),
    ]
    entries = [e for e in _independent_entries(t) if e["commitTime"] == replace]
    assert _keys(entries) == [(replace, "replacecommit", s) for s in ("REQUESTED", "INFLIGHT", "COMPLETED")]
    completed = entries[-1]["hoodieReplaceCommitMetadata"]
    assert completed["operationType"] == "INSERT_OVERWRITE" and completed["partitionToReplaceFileIds"] == {}
    assert entries[0]["hoodieRequestedReplaceMetadata"] is None  # empty requested file


def test_merge_on_read_keeps_the_delta_commits_compaction_still_counts(tmp_path):
    t = _table(tmp_path, "MERGE_ON_READ", **{"hoodie.compact.inline.max.delta.commits": "3"})
    times = _commits(t, 8)
    before = _rows(t.read())

    # 8 delta commits, no compaction: the scheduler counts from the 6th (8 - 3 + 1) on.
    assert [i.requested_time for i in t.archive().archived] == times[:5]
    _assert_reads_unchanged(t, before)

    compaction = t.compact()[0]
    plan = json.loads(
        _native.avro_container_decode((_hoodie(t) / f"{compaction}.compaction.requested").read_bytes())
    )
    times += _commits(t, 4)
    before = _rows(t.read())
    # 4 delta commits after the compaction (>= 3): the scheduler counts from the 2nd on.
    archived = [(i.requested_time, i.action) for i in t.archive().archived]
    assert archived == [
        (times[5], Action.DELTA_COMMIT),
        (times[6], Action.DELTA_COMMIT),
        (times[7], Action.DELTA_COMMIT),
        (compaction, Action.COMPACTION),
        (times[8], Action.DELTA_COMMIT),
    ]
    _assert_reads_unchanged(t, before)
    entries = [e for e in _independent_entries(t) if e["commitTime"] == compaction]
    assert _keys(entries) == [
        (compaction, "compaction", "REQUESTED"),
        (compaction, "compaction", "INFLIGHT"),
        (compaction, "commit", "COMPLETED"),
    ]
    got_plan = entries[0]["hoodieCompactionPlan"]
    assert [op["fileId"] for op in got_plan["operations"]] == [op["fileId"] for op in plan[0]["operations"]]
    assert entries[2]["hoodieCommitMetadata"]["operationType"] == "COMPACT"
    archived_tl = t.archived_timeline
    assert archived_tl.get(compaction).action == Action.COMPACTION
    assert archived_tl.metadata(compaction)["operationType"] == "COMPACT"


def test_without_the_count_trigger_merge_on_read_archives_by_count_alone(tmp_path):
    t = _table(tmp_path, "MERGE_ON_READ", **{"hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"})
    times = _commits(t, 8)
    assert [i.requested_time for i in t.archive().archived] == times[:6]


# ---- reading after archival -------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_old_rollbacks_left_active_do_not_hide_archived_commits(tmp_path, table_type):
    t = _table(tmp_path, table_type, **{"hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"})
    times = _commits(t, 2)
    # Two real rollbacks early on: they stay active (2 <= max) while later commits are archived.
    rolled = [t.rollback(), t.rollback()]
    times = _commits(t, 8)
    before = _rows(t.read())

    archived = [i.requested_time for i in t.archive().archived]

    assert archived == times[:6]
    tl = _timeline(t)
    assert tl.first_instant_time() == rolled[0] < archived[0]
    _assert_reads_unchanged(t, before)
    changes = t.read_incremental(predecessor(times[6]))
    assert sorted(set(changes["_hoodie_commit_time"].to_pylist())) == times[6:]


def test_archived_timeline_gives_instants_and_metadata(tmp_path):
    t = _table(tmp_path)
    times = _commits(t, 6)
    expected = {ts: _timeline(t).commit_metadata(ts) for ts in times[:4]}
    t.archive()

    archived = t.archived_timeline
    assert [(i.requested_time, i.action, i.state) for i in archived.instants] == [
        (ts, Action.COMMIT, State.COMPLETED) for ts in times[:4]
    ]
    assert [i.requested_time for i in archived.completed_data_instants()] == times[:4]
    for ts, meta in expected.items():
        got = archived.commit_metadata(ts)
        assert [(s.fileId, s.path, s.numWrites, s.prevCommit) for s in got.write_stats()] == [
            (s.fileId, s.path, s.numWrites, s.prevCommit) for s in meta.write_stats()
        ]
        assert got.schema == meta.schema
        assert archived.state_transition_time(ts) >= ts
        assert archived.entry(ts, "commit", State.REQUESTED) is not None


# ---- crash safety -----------------------------------------------------------------------------


@pytest.mark.parametrize("deletes_before_crash", [0, 1, 8, 9, 12])
def test_an_interrupted_archival_resumes_without_loss_or_duplicates(
    tmp_path, monkeypatch, deletes_before_crash
):
    t = _table(tmp_path)
    times = _commits(t, 6)
    before = _rows(t.read())
    expected = [(ts, "commit", s) for ts in times[:4] for s in ("REQUESTED", "INFLIGHT", "COMPLETED")]

    real_delete = Storage.delete
    calls = {"n": 0}

    def crashing_delete(self, rel, missing_ok=False):
        if calls["n"] >= deletes_before_crash:
            raise OSError("killed")
        calls["n"] += 1
        real_delete(self, rel, missing_ok)

    monkeypatch.setattr(Storage, "delete", crashing_delete)
    if deletes_before_crash < len(expected):
        with pytest.raises(OSError, match="killed"):
            t.archive()
    else:
        t.archive()
    monkeypatch.setattr(Storage, "delete", real_delete)

    # Between the crash and the re-run the table reads as before, and no archived instant is
    # left looking pending (requested and inflight files go before completed ones).
    _assert_reads_unchanged(t, before)
    assert not [i for i in _timeline(t).pending() if i.requested_time in times]

    again = t.archive()
    # The re-run only deletes what the crash left: every state file still on the timeline.
    left = len(expected) - deletes_before_crash
    assert again.already_archived == left and again.archive_files == []
    # Completed files go last, oldest first: the instants whose completed file is gone left.
    assert [i.requested_time for i in again.archived] == times[max(0, deletes_before_crash - 8) : 4]
    assert _keys(_independent_entries(t)) == expected
    assert _active_data(t) == times[4:]
    _assert_reads_unchanged(t, before)


# ---- merging small archive files --------------------------------------------------------------


def _merge_table(tmp_path) -> shoal.Table:
    return _table(
        tmp_path,
        **{
            "hoodie.archive.merge.enable": "true",
            "hoodie.archive.merge.files.batch.size": "3",
            "hoodie.keep.max.commits": "3",
        },
    )


def _archive_files(t: shoal.Table) -> list[str]:
    return sorted(p.name for p in (_hoodie(t) / "archived").glob(".commits_.archive.*"))


def test_small_archive_files_are_merged(tmp_path):
    t = _merge_table(tmp_path)
    times = _commits(t, 4)
    t.archive()  # 4 > 3: two go, into file 1
    times += _commits(t, 2)
    t.archive()  # file 2
    assert _archive_files(t) == [".commits_.archive.1_1-0-1", ".commits_.archive.2_1-0-1"]
    times += _commits(t, 2)
    result = t.archive()  # file 3, then three small files are merged into file 4
    assert result.merged_file == ".hoodie/archived/.commits_.archive.4_1-0-1"
    assert _archive_files(t) == [".commits_.archive.4_1-0-1"]
    assert not (_hoodie(t) / "archived" / "mergeArchivePlan").exists()
    assert _keys(_independent_entries(t)) == [
        (ts, "commit", s) for ts in times[:6] for s in ("REQUESTED", "INFLIGHT", "COMPLETED")
    ]


@pytest.mark.parametrize("crash_at", ["merged file", "second candidate delete", "plan delete"])
def test_a_merge_interrupted_by_a_crash_is_finished_or_undone(tmp_path, monkeypatch, crash_at):
    t = _merge_table(tmp_path)
    times = _commits(t, 4)
    t.archive()
    times += _commits(t, 2)
    t.archive()
    times += _commits(t, 2)
    real_create, real_delete = Storage.create_exclusive, Storage.delete

    def create(self, rel, data):
        if crash_at == "merged file" and rel.endswith("archive.4_1-0-1"):
            raise OSError("killed")
        real_create(self, rel, data)

    def delete(self, rel, missing_ok=False):
        if crash_at == "second candidate delete" and rel.endswith("archive.2_1-0-1"):
            raise OSError("killed")
        if crash_at == "plan delete" and rel.endswith("mergeArchivePlan"):
            raise OSError("killed")
        real_delete(self, rel, missing_ok)

    monkeypatch.setattr(Storage, "create_exclusive", create)
    monkeypatch.setattr(Storage, "delete", delete)
    with pytest.raises(OSError, match="killed"):
        t.archive()
    monkeypatch.setattr(Storage, "create_exclusive", real_create)
    monkeypatch.setattr(Storage, "delete", real_delete)

    plan_file = _hoodie(t) / "archived" / "mergeArchivePlan"
    assert plan_file.exists()
    with plan_file.open("rb") as f:  # a container file Hudi's reader takes
        (plan,) = list(fastavro.reader(f))
    assert plan["mergedArchiveFileName"] == ".commits_.archive.4_1-0-1"
    assert [Path(c).name for c in plan["candidate"]] == [f".commits_.archive.{v}_1-0-1" for v in (1, 2, 3)]
    # Readers see every entry once even now.
    expected = [(ts, "commit", s) for ts in times[:6] for s in ("REQUESTED", "INFLIGHT", "COMPLETED")]
    assert sorted(
        (i.requested_time, i.action.value, i.state.name)
        for i in shoal.Table(t.path).archived_timeline.instants
    ) == [(ts, "commit", "COMPLETED") for ts in times[:6]]

    result = t.archive()
    assert result.recovered_merge is not None
    assert ("undid" in result.recovered_merge) == (crash_at == "merged file")
    assert not plan_file.exists()
    assert _keys(sorted(_independent_entries(t), key=lambda e: e["commitTime"])) == expected
    # Undone and merged again by this run, or finished by it.
    assert (result.merged_file is not None) == (crash_at == "merged file")
    assert _archive_files(t) == [".commits_.archive.4_1-0-1"]


# ---- inline, asynchronous, options, CLI -------------------------------------------------------


def test_inline_archival_after_commits(tmp_path):
    t = _table(tmp_path, **{"hoodie.archive.automatic": "true"})
    times = _commits(t, 7)
    # Archival ran after the 5th commit (5 > 4: down to 2), and not since (4 active).
    assert [i.requested_time for i in t.archived_timeline.instants] == times[:3]
    assert _active_data(t) == times[3:]


def test_asynchronous_archival(tmp_path):
    t = _table(tmp_path, **{"hoodie.archive.automatic": "true", "hoodie.archive.async": "true"})
    times = _commits(t, 5)
    result = t.wait_for_archive()
    assert result is not None
    assert [i.requested_time for i in result.archived] == times[:3]
    job = shoal.Table(t.path, options=OPTS).archive_async()
    assert job.result().archived == []
    before = _rows(t.read())
    _assert_reads_unchanged(t, before)


def test_archival_options_are_checked_like_hudi():
    with pytest.raises(InvalidOptionError, match=re.escape("hoodie.keep.max.commits")):
        WriteConfig({"hoodie.keep.min.commits": "30"})
    with pytest.raises(InvalidOptionError, match=re.escape("hoodie.cleaner.commits.retained")):
        WriteConfig({"hoodie.keep.min.commits": "10", "hoodie.keep.max.commits": "12"})
    defaults = WriteConfig()
    assert (defaults.get("hoodie.keep.min.commits"), defaults.get("hoodie.keep.max.commits")) == (20, 30)
    assert defaults.get("hoodie.commits.archival.batch") == 10
    assert defaults.get("hoodie.archive.merge.small.file.limit.bytes") == 20971520


def test_cli_archive_and_archived_timeline(tmp_path, capsys):
    t = _table(tmp_path)
    times = _commits(t, 32)  # the CLI archives with Hudi's defaults: 30 / 20
    assert main(["archive", t.path]) == 0
    out = capsys.readouterr().out
    assert out.count("archived ") == 12 and times[11] in out and times[12] not in out
    assert main(["timeline", t.path, "--archived"]) == 0
    out = capsys.readouterr().out
    assert out.count("COMPLETED") == 12
    assert main(["archive", t.path]) == 0
    assert "nothing to archive" in capsys.readouterr().out


# ---- instants written by Apache Hudi ----------------------------------------------------------


@pytest.mark.parametrize(
    "fixture", ["cow_v6_simplekeygen_nonhivestyle_overwritetable", "mor_parquet_v6_nonpartitioned_rollback"]
)
def test_instants_written_by_hudi_are_archived(fixture_table, fixture):
    root = fixture_table(fixture)
    t = shoal.Table(root, options={**OPTS, "hoodie.clean.automatic": "true"})
    java_instants = {i.requested_time: i.action for i in _timeline(t).completed_data_instants()}
    java_metadata = {
        ts: json.loads((_hoodie(t) / f"{ts}.{a.value}").read_bytes()) for ts, a in java_instants.items()
    }
    data = t.read()
    data = data.select([c for c in data.column_names if not c.startswith("_hoodie_")])
    for _ in range(4):
        t.upsert(data)
    before = hudi_rs_read(str(root))

    archived = {i.requested_time for i in t.archive().archived}

    assert archived & set(java_instants)
    after = hudi_rs_read(str(root))
    key = ["_hoodie_record_key"]
    assert rows_by(after, after.column_names, key) == rows_by(before, before.column_names, key)
    mine = shoal.Table(root).read()
    columns = [*key, "_hoodie_commit_time"]
    assert rows_by(mine, columns, key) == rows_by(after, columns, key)
    archived_tl = t.archived_timeline
    for ts in archived & set(java_instants):
        got = archived_tl.metadata(ts)
        source = java_metadata[ts]
        assert got["operationType"] == source["operationType"]
        assert got.get("partitionToReplaceFileIds") == source.get("partitionToReplaceFileIds")
        for partition, stats in source["partitionToWriteStats"].items():
            assert [s["fileId"] for s in got["partitionToWriteStats"][partition]] == [
                s["fileId"] for s in stats
            ]
            assert [s["path"] for s in got["partitionToWriteStats"][partition]] == [s["path"] for s in stats]
    assert {e["commitTime"] for e in _independent_entries(t)} >= archived
