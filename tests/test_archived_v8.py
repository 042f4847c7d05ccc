"""The archived timeline of table version 8: Hudi 1.x's LSM timeline in ``.hoodie/timeline/history``.

The v8 fixtures written by Hudi have an empty history directory, so every test with archived
instants builds its LSM timeline here. Those layouts are CONSTRUCTED FROM THE JAVA SOURCE of
apache/hudi 1.x, NOT WRITTEN BY HUDI: the parquet schema follows ``HoodieLSMTimelineInstant.avsc``
as parquet-avro maps it (optional UTF8 strings, optional binaries, a required int32 ``version``,
the Avro schema under ``parquet.avro.schema``), the rows are what
``MetadataConversionUtils.createLSMTimelineInstant`` makes of an active instant (the completed
action, the completed file's bytes as ``metadata``, the requested plan of a compaction or clean
as ``plan``), the files are named ``<min>_<max>_<layer>.parquet`` as ``LSMTimelineWriter`` names
them, the manifests are ``HoodieLSMTimelineManifest`` in Jackson's pretty-printed JSON, and
``_version_`` holds the latest manifest version. The archived instants themselves are real: the
completed, requested and plan files of the Hudi-written fixture ``mor_avro_v8_trips_8i3u1d``.

Expectations come from the fixture's file names (parsed here) and from fastavro decoding the
archived bytes, not from shoal's timeline code.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
from shoal.cli import main
from shoal.errors import CorruptTableError, InstantNotFoundError
from shoal.timeline.instant import Action, State

V8_FIXTURES = [
    "cow_v8_complexkeygen_hivestyle",
    "cow_v8_empty",
    "cow_v8_nonpartitioned",
    "cow_v8_simplekeygen_hivestyle_no_metafields",
    "cow_v8_simplekeygen_nonhivestyle",
    "mor_avro_v8_trips_8i3u1d",
]
TRIPS = "mor_avro_v8_trips_8i3u1d"

# HoodieLSMTimelineInstant.avsc, as the Avro writer records it in the parquet footer.
LSM_AVRO_SCHEMA = {
    "type": "record",
    "name": "HoodieLSMTimelineInstant",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "instantTime", "type": ["null", "string"], "default": None},
        {"name": "completionTime", "type": ["null", "string"], "default": None},
        {"name": "action", "type": ["null", "string"], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": "int", "default": 1},
    ],
}
LSM_ARROW_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ],
    metadata={
        "parquet.avro.schema": json.dumps(LSM_AVRO_SCHEMA, separators=(",", ":")),
        "writer.model.name": "avro",
    },
)
_COMPLETED = re.compile(r"^(\d+)_(\d+)\.(\w+)$")
# The pending actions whose requested file createLSMTimelineInstant stores as the plan.
_PLAN_ACTIONS = ("compaction", "logcompaction", "clean")


# ---- building an LSM timeline the way LSMTimelineWriter lays it out ---------------------------


def _timeline_dir(root: Path) -> Path:
    return root / ".hoodie" / "timeline"


def _history(root: Path) -> Path:
    return _timeline_dir(root) / "history"


def _active_actions(root: Path) -> list[dict]:
    """The rows createLSMTimelineInstant makes of every completed instant of the fixture, in
    instant time order, plus the pending action the test expects shoal to report."""
    rows = []
    tl = _timeline_dir(root)
    for f in sorted(tl.iterdir()):
        m = _COMPLETED.match(f.name)
        if not m:
            continue
        time, completion, action = m.groups()
        content = f.read_bytes()
        plan = None
        pending = action
        for pending_action in _PLAN_ACTIONS:
            requested = tl / f"{time}.{pending_action}.requested"
            if requested.exists():
                pending = pending_action
                plan = requested.read_bytes() or None
        rows.append(
            {
                "instantTime": time,
                "completionTime": completion,
                "action": action,
                "metadata": content or None,
                "plan": plan,
                "version": 1,
                "_reported_action": pending,
            }
        )
    return rows


def _write_data_file(history: Path, rows: list[dict], layer: int) -> str:
    name = f"{rows[0]['instantTime']}_{rows[-1]['instantTime']}_{layer}.parquet"
    columns = {f.name: [r[f.name] for r in rows] for f in LSM_ARROW_SCHEMA}
    pq.write_table(pa.Table.from_pydict(columns, schema=LSM_ARROW_SCHEMA), history / name)
    return name


def _write_manifest(history: Path, version: int, files: list[str], set_version: bool = True) -> None:
    # Jackson's default pretty printer, as HoodieLSMTimelineManifest.toJsonString writes it.
    entries = ", ".join(
        f'{{\n    "fileName" : "{n}",\n    "fileLen" : {(history / n).stat().st_size}\n  }}' for n in files
    )
    (history / f"manifest_{version}").write_text(f'{{\n  "files" : [ {entries} ]\n}}')
    if set_version:
        (history / "_version_").write_text(str(version))


def _archive_all(root: Path) -> list[dict]:
    """Archives every completed instant of the fixture in two layer-0 files, two snapshots."""
    rows = _active_actions(root)
    history = _history(root)
    history.mkdir(parents=True, exist_ok=True)
    first = _write_data_file(history, rows[:3], 0)
    _write_manifest(history, 1, [first])
    second = _write_data_file(history, rows[3:], 0)
    _write_manifest(history, 2, [first, second])
    return rows


def _expected(rows: list[dict]) -> list[tuple[str, str, str]]:
    return [(r["instantTime"], r["_reported_action"], r["completionTime"]) for r in rows]


def _got(archived) -> list[tuple[str, str, str]]:
    assert all(i.state == State.COMPLETED for i in archived.instants)
    return [(i.requested_time, i.action.value, i.completion_time) for i in archived.instants]


# ---- tables written by Hudi: empty history ----------------------------------------------------


@pytest.mark.parametrize("fixture", V8_FIXTURES)
def test_empty_history_of_every_v8_fixture_is_an_empty_archived_timeline(fixture_table, fixture):
    root = fixture_table(fixture)
    assert _history(root).is_dir() and not any(_history(root).iterdir())
    t = shoal.Table(str(root))
    assert t.config.table_version == 8
    archived = t.archived_timeline
    assert archived.instants == [] and len(archived) == 0
    assert archived.completed() == [] and archived.completed_data_instants() == []
    first = t.instants()[0].requested_time if t.instants() else "20250101000000000"
    assert archived.get(first) is None
    with pytest.raises(InstantNotFoundError):
        archived.commit_metadata(first)

    shutil.rmtree(_history(root))
    assert shoal.Table(str(root)).archived_timeline.instants == []


def test_empty_manifest_is_an_empty_snapshot(fixture_table):
    # HoodieLSMTimelineManifest.fromJsonString reads empty content as no files.
    root = fixture_table(TRIPS)
    (_history(root) / "manifest_1").write_text("")
    (_history(root) / "_version_").write_text("1")
    assert shoal.Table(str(root)).archived_timeline.instants == []


# ---- LSM timelines constructed from the Java source -------------------------------------------


def test_archived_instants_times_actions_and_metadata(fixture_table):
    root = fixture_table(TRIPS)
    rows = _archive_all(root)
    t = shoal.Table(str(root))
    archived = t.archived_timeline

    assert _got(archived) == _expected(rows)
    assert len(rows) == 8 and {r["_reported_action"] for r in rows} == {
        "deltacommit",
        "indexing",
        "compaction",
    }
    # The active timeline (not yet trimmed in this construction) names the same instants.
    assert [(i.requested_time, i.action.value, i.completion_time) for i in t.instants()] == _expected(rows)
    data = {"deltacommit", "commit", "compaction", "replacecommit", "logcompaction", "clustering"}
    want_data = [r["instantTime"] for r in rows if r["_reported_action"] in data]
    assert [i.requested_time for i in archived.completed_data_instants()] == want_data
    assert [i.requested_time for i in archived.completed()] == [r["instantTime"] for r in rows]

    for r in rows:
        time = r["instantTime"]
        assert archived.get(time).completion_time == r["completionTime"]
        assert archived.state_transition_time(time) == r["completionTime"]
        # entry() takes the action as written: a completed compaction is a commit.
        entry = archived.entry(time, r["action"], State.COMPLETED)
        assert entry is not None and entry["metadata"] == r["metadata"] and entry["plan"] == r["plan"]
        assert archived.entry(time, r["action"], State.REQUESTED) is None
        want = next(iter(fastavro.reader(io.BytesIO(r["metadata"]))))
        assert archived.metadata(time) == want
        if r["_reported_action"] in data:
            meta = archived.commit_metadata(time)
            stats = [s for lst in want["partitionToWriteStats"].values() for s in lst]
            assert meta.total_records_written() == sum(s["numWrites"] for s in stats)
            assert meta.operation_type == want["operationType"]
            assert sorted(s.fileId for s in meta.write_stats()) == sorted(s["fileId"] for s in stats)
    compaction = next(r for r in rows if r["_reported_action"] == "compaction")
    assert archived.get(compaction["instantTime"]).action == Action.COMPACTION
    assert compaction["plan"] and archived.entry(compaction["instantTime"], "commit", State.COMPLETED)["plan"]
    indexing = next(r for r in rows if r["_reported_action"] == "indexing")
    with pytest.raises(InstantNotFoundError):
        archived.commit_metadata(indexing["instantTime"])
    with pytest.raises(InstantNotFoundError):
        archived.metadata("20000101000000000")


def test_only_files_of_the_latest_manifest_are_read(fixture_table):
    root = fixture_table(TRIPS)
    rows = _archive_all(root)
    history = _history(root)
    # A compaction to layer 1: manifest_3 lists only the merged file; the layer-0 files stay
    # until cleaned, and must not be read twice.
    merged = _write_data_file(history, rows, 1)
    _write_manifest(history, 3, [merged])
    # A writer that crashed after its data file and manifest_4 but before _version_.
    ghost = {**rows[-1], "instantTime": "20991231000000000", "completionTime": "20991231000000001"}
    orphan = _write_data_file(history, [ghost], 0)
    _write_manifest(history, 4, [merged, orphan], set_version=False)
    assert (history / "_version_").read_text() == "3"

    assert _got(shoal.Table(str(root)).archived_timeline) == _expected(rows)

    # Without a readable _version_, readers take the highest manifest (LSMTimeline's fallback).
    ghost_expected = [
        *_expected(rows),
        (ghost["instantTime"], ghost["_reported_action"], ghost["completionTime"]),
    ]
    (history / "_version_").write_text("not a number")
    assert _got(shoal.Table(str(root)).archived_timeline) == ghost_expected
    (history / "_version_").unlink()
    assert _got(shoal.Table(str(root)).archived_timeline) == ghost_expected


def test_a_record_in_two_listed_files_is_reported_once(fixture_table):
    root = fixture_table(TRIPS)
    rows = _active_actions(root)
    history = _history(root)
    a = _write_data_file(history, rows[:4], 0)
    b = _write_data_file(history, rows[3:], 0)
    _write_manifest(history, 1, [a, b])
    assert _got(shoal.Table(str(root)).archived_timeline) == _expected(rows)


def _bad_manifest(history: Path) -> None:
    (history / "manifest_2").write_text('{"files": [ {"fileName": ')


def _missing_data_file(history: Path) -> None:
    next(history.glob("*_0.parquet")).unlink()


def _bad_parquet(history: Path) -> None:
    f = sorted(history.glob("*.parquet"))[-1]
    f.write_bytes(b"PAR1" + b"\x00" * 64)


def _missing_manifest(history: Path) -> None:
    (history / "_version_").write_text("7")


def _bad_file_name(history: Path) -> None:
    (history / "manifest_2").write_text('{"files": [{"fileName": "history.parquet", "fileLen": 1}]}')


def _no_instant_time_column(history: Path) -> None:
    name = sorted(history.glob("*.parquet"))[-1]
    table = pq.read_table(name).drop_columns(["instantTime"])
    pq.write_table(table, name)


def _null_completion_time(history: Path) -> None:
    name = sorted(history.glob("*.parquet"))[-1]
    table = pq.read_table(name)
    nulls = pa.nulls(table.num_rows, pa.string())
    pq.write_table(
        table.set_column(table.schema.get_field_index("completionTime"), "completionTime", nulls), name
    )


def _int_action_column(history: Path) -> None:
    name = sorted(history.glob("*.parquet"))[-1]
    table = pq.read_table(name)
    ints = pa.array([1] * table.num_rows, pa.int32())
    pq.write_table(table.set_column(table.schema.get_field_index("action"), "action", ints), name)


@pytest.mark.parametrize(
    "damage",
    [
        _bad_manifest,
        _missing_data_file,
        _bad_parquet,
        _missing_manifest,
        _bad_file_name,
        _no_instant_time_column,
        _null_completion_time,
        _int_action_column,
    ],
)
def test_corrupt_lsm_timeline_raises_corrupt_table_error(fixture_table, damage):
    root = fixture_table(TRIPS)
    _archive_all(root)
    damage(_history(root))
    with pytest.raises(CorruptTableError):
        shoal.Table(str(root)).archived_timeline  # noqa: B018
    assert main(["timeline", str(root), "--archived"]) != 0


def test_undecodable_archived_metadata_raises_corrupt_table_error(fixture_table):
    root = fixture_table(TRIPS)
    rows = _active_actions(root)
    rows[0] = {**rows[0], "metadata": b"Obj\x01" + b"\xff" * 40}
    history = _history(root)
    _write_manifest(history, 1, [_write_data_file(history, rows, 0)])
    archived = shoal.Table(str(root)).archived_timeline
    assert _got(archived) == _expected(rows)
    with pytest.raises(CorruptTableError):
        archived.metadata(rows[0]["instantTime"])
    with pytest.raises(CorruptTableError):
        archived.commit_metadata(rows[0]["instantTime"])


# ---- the CLI ----------------------------------------------------------------------------------


def test_cli_timeline_archived_on_v8(fixture_table, capsys):
    root = fixture_table(TRIPS)
    assert main(["timeline", str(root), "--archived"]) == 0
    assert "COMPLETED" not in capsys.readouterr().out

    rows = _archive_all(root)
    assert main(["timeline", str(root), "--archived"]) == 0
    out = capsys.readouterr().out
    assert out.count("COMPLETED") == len(rows) and "completed at" in out
    lines = out.splitlines()
    for r in rows:
        line = next(line for line in lines if r["instantTime"] in line)
        assert r["_reported_action"] in line and r["completionTime"] in line
